// Candidate decode GEMV (m = 1): "warp rows". Included after baseline_gemv.cuh (uses its
// signed_word_dot, f16_to_f32, warp_sum, GROUP_SIZE).
//
// Why: the baseline gives every warp exactly one 1024-weight chunk of 8 rows (K = 4096), so a
// warp's life is load -> wait -> compute -> shared-memory reduce, with 95 registers (5 CTAs =
// 20 warps per SM) and nothing overlapping the ~1.5 us compute phase of a wave with the next
// wave's loads. Here a warp owns R whole rows (or a 1/splits share of their K chunks), issues
// U x R coalesced 128-byte loads before computing any of them, and the sums of x per word come
// from a per-CTA shared table (one LDS per word instead of WPW FADDs per word and row batch).
#define WR_WARPS 8

template <bool NO_L1>
__device__ __forceinline__ u32 load_weight_word(const u32* p) {
    if (NO_L1) {
        u32 v;
        asm volatile("ld.global.nc.L1::no_allocate.u32 %0, [%1];" : "=r"(v) : "l"(p));
        return v;
    }
    return __ldg(p);
}

// Dynamic shared memory: xsum[k / WPW] floats, then partial[WR_WARPS * R] floats.
template <int BITS, int R, int U, bool NO_L1>
__device__ __forceinline__ void gemv_warp_rows(const u16* __restrict__ scales,
                                               const u32* __restrict__ payload,
                                               const float* __restrict__ x,
                                               float* __restrict__ y, int n, int k,
                                               int splits) {
    constexpr int WPW = 32 / BITS;
    constexpr int WPG = GROUP_SIZE / WPW;
    extern __shared__ float wr_smem[];
    const int words_per_row = k / WPW;
    const int groups_per_row = k / GROUP_SIZE;
    float* xsum = wr_smem;
    float* partial = wr_smem + words_per_row;

    for (int i = threadIdx.x; i < words_per_row; i += blockDim.x) {
        const float4* src = reinterpret_cast<const float4*>(x + (long long)i * WPW);
        float s = 0.0f;
#pragma unroll
        for (int q = 0; q < WPW / 4; ++q) {
            const float4 v = __ldg(src + q);
            s += (v.x + v.y) + (v.z + v.w);
        }
        xsum[i] = s;
    }
    __syncthreads();

    const int lane = threadIdx.x % WARP_SIZE;
    const int warp = threadIdx.x / WARP_SIZE;
    const int split = warp % splits;
    const int batches_per_cta = WR_WARPS / splits;
    const int row0 = (blockIdx.x * batches_per_cta + warp / splits) * R;
    const int n_chunks = (words_per_row + WARP_SIZE - 1) / WARP_SIZE;

    float acc[R];
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = 0.0f;

    for (int c0 = split; c0 < n_chunks; c0 += U * splits) {
        u32 w[U][R];
        float d[U][R];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int wi = (c0 + u * splits) * WARP_SIZE + lane;
#pragma unroll
            for (int r = 0; r < R; ++r) {
                const bool ok = wi < words_per_row && row0 + r < n;
                const long long row = row0 + r;
                w[u][r] = ok ? load_weight_word<NO_L1>(payload + row * words_per_row + wi) : 0u;
                d[u][r] = ok ? f16_to_f32(__ldg(scales + row * groups_per_row + wi / WPG)) : 0.0f;
            }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int wi = (c0 + u * splits) * WARP_SIZE + lane;
            if (wi < words_per_row) {
                float xv[WPW];
                const float4* src = reinterpret_cast<const float4*>(x + (long long)wi * WPW);
#pragma unroll
                for (int q = 0; q < WPW / 4; ++q) {
                    const float4 v = __ldg(src + q);
                    xv[4 * q] = v.x; xv[4 * q + 1] = v.y; xv[4 * q + 2] = v.z; xv[4 * q + 3] = v.w;
                }
                const float xs = xsum[wi];
#pragma unroll
                for (int r = 0; r < R; ++r) acc[r] += d[u][r] * signed_word_dot<BITS>(w[u][r], xv, xs);
            }
        }
    }

#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = warp_sum(acc[r]);
    if (splits == 1) {
        if (lane == 0) {
#pragma unroll
            for (int r = 0; r < R; ++r)
                if (row0 + r < n) y[row0 + r] = acc[r];
        }
        return;
    }
    if (lane == 0) {
#pragma unroll
        for (int r = 0; r < R; ++r) partial[warp * R + r] = acc[r];
    }
    __syncthreads();
    if (threadIdx.x < batches_per_cta * R) {
        const int b = threadIdx.x / R;
        const int r = threadIdx.x % R;
        float v = 0.0f;
        for (int s = 0; s < splits; ++s) v += partial[(b * splits + s) * R + r];
        const int row = (blockIdx.x * batches_per_cta + b) * R + r;
        if (row < n) y[row] = v;
    }
}

#define WR_ENTRY(NAME, BITS, R, U, NO_L1)                                                     \
    __global__ void __launch_bounds__(WR_WARPS * WARP_SIZE)                                   \
        NAME(const u16* s, const u32* p, const float* x, float* y, int n, int k, int splits) { \
        gemv_warp_rows<BITS, R, U, NO_L1>(s, p, x, y, n, k, splits);                          \
    }

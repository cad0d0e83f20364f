// Second-round candidates, after round 1 showed that fewer x loads per weight (more rows per
// warp) is what helps. Two suspects, both visible without a profiler:
//  1. The SASS of signed_word_dot runs one accumulator per row: 32 dependent predicated FADDs
//     (R2P fills all 7 predicates, so rows cannot interleave) -> a 4-cycle latency chain.
//     Fix: 4 accumulators per word (on[j % 4]).
//  2. x loads: lane l reads float4 q of its own 128-byte slice, so one LDG.128 touches 32
//     different 128-byte lines (32 L1 wavefronts instead of 4). Fix: stage x in shared memory
//     and let lane l read float4 (q + rot(l)) % F of its slice (F float4 per slice): the 8 lanes
//     of each quarter-warp then hit 8 different bank quads (conflict-free); the word is rotated
//     right by 4 * BITS * rot(l) bits so bit order matches xv again (the sum is unchanged).

template <int BITS>
__device__ __forceinline__ float signed_word_dot_ilp(u32 w, const float* xv, float xsum) {
    if (BITS == 1) {
        float on[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int j = 0; j < 32; ++j)
            if (w & (1u << j)) on[j % 4] += xv[j];
        return 2.0f * ((on[0] + on[1]) + (on[2] + on[3])) - xsum;
    } else {
        float lo[2] = {0.0f, 0.0f}, hi[2] = {0.0f, 0.0f};
#pragma unroll
        for (int j = 0; j < 16; ++j) {
            if (w & (1u << (2 * j))) lo[j % 2] += xv[j];
            if (w & (2u << (2 * j))) hi[j % 2] += xv[j];
        }
        return (lo[0] + lo[1]) + 2.0f * (hi[0] + hi[1]) - xsum;
    }
}

// Baseline kernel with only fix 1 (for attribution).
template <int BITS>
__device__ __forceinline__ void gemv_rows8_ilp(const u16* __restrict__ scales,
                                               const u32* __restrict__ payload,
                                               const float* __restrict__ x, float* __restrict__ y,
                                               int n_out, int k) {
    constexpr int WEIGHTS_PER_WORD = 32 / BITS;
    constexpr int WORDS_PER_GROUP = GROUP_SIZE / WEIGHTS_PER_WORD;
    constexpr int GROUPS_PER_CHUNK = WARP_SIZE / WORDS_PER_GROUP;
    __shared__ float partial[GEMV_WARPS][GEMV_ROWS];
    const int lane = threadIdx.x % WARP_SIZE;
    const int warp = threadIdx.x / WARP_SIZE;
    const int groups_per_row = k / GROUP_SIZE;
    const int n_chunks = (groups_per_row + GROUPS_PER_CHUNK - 1) / GROUPS_PER_CHUNK;
    const int lane_group = lane / WORDS_PER_GROUP;
    const int lane_word = lane % WORDS_PER_GROUP;
    float acc[GEMV_ROWS];
#pragma unroll
    for (int r = 0; r < GEMV_ROWS; ++r) acc[r] = 0.0f;
    for (int chunk = warp; chunk < n_chunks; chunk += GEMV_WARPS) {
        const int kb = chunk * GROUPS_PER_CHUNK + lane_group;
        if (kb >= groups_per_row) continue;
        u32 w[GEMV_ROWS];
        float d[GEMV_ROWS];
#pragma unroll
        for (int r = 0; r < GEMV_ROWS; ++r) {
            const int row = blockIdx.x * GEMV_ROWS + r;
            const long long g = (long long)row * groups_per_row + kb;
            w[r] = row < n_out ? __ldg(payload + g * WORDS_PER_GROUP + lane_word) : 0u;
            d[r] = row < n_out ? f16_to_f32(__ldg(scales + g)) : 0.0f;
        }
        const int k0 = kb * GROUP_SIZE + lane_word * WEIGHTS_PER_WORD;
        float xv[WEIGHTS_PER_WORD];
        const float4* src = reinterpret_cast<const float4*>(x + k0);
        float xsum = 0.0f;
#pragma unroll
        for (int q = 0; q < WEIGHTS_PER_WORD / 4; ++q) {
            const float4 v = __ldg(src + q);
            xv[4 * q] = v.x; xv[4 * q + 1] = v.y; xv[4 * q + 2] = v.z; xv[4 * q + 3] = v.w;
            xsum += (v.x + v.y) + (v.z + v.w);
        }
#pragma unroll
        for (int r = 0; r < GEMV_ROWS; ++r) acc[r] += d[r] * signed_word_dot_ilp<BITS>(w[r], xv, xsum);
    }
#pragma unroll
    for (int r = 0; r < GEMV_ROWS; ++r) {
        const float s = warp_sum(acc[r]);
        if (lane == 0) partial[warp][r] = s;
    }
    __syncthreads();
    if (threadIdx.x < GEMV_ROWS) {
        const int row = blockIdx.x * GEMV_ROWS + threadIdx.x;
        float v = 0.0f;
#pragma unroll
        for (int wi = 0; wi < GEMV_WARPS; ++wi) v += partial[wi][threadIdx.x];
        if (row < n_out) y[row] = v;
    }
}

// Warp-rows kernel with both fixes. Dynamic shared memory: x[k], xsum[k / WPW],
// partial[WR_WARPS * R] floats.
template <int BITS, int R, int U>
__device__ __forceinline__ void gemv_wr_smem(const u16* __restrict__ scales,
                                             const u32* __restrict__ payload,
                                             const float* __restrict__ x, float* __restrict__ y,
                                             int n, int k, int splits) {
    constexpr int WPW = 32 / BITS;
    constexpr int WPG = GROUP_SIZE / WPW;
    constexpr int F = WPW / 4;  // float4 per lane slice
    extern __shared__ float4 wr2_smem[];
    const int words_per_row = k / WPW;
    const int groups_per_row = k / GROUP_SIZE;
    float4* xs = wr2_smem;
    float* xsum = reinterpret_cast<float*>(wr2_smem + k / 4);
    float* partial = xsum + words_per_row;
    const int lane = threadIdx.x % WARP_SIZE;
    const int rot = (lane / (8 / F)) % F;

    for (int i = threadIdx.x; i < k / 4; i += blockDim.x)
        xs[i] = __ldg(reinterpret_cast<const float4*>(x) + i);
    __syncthreads();
    for (int i = threadIdx.x; i < words_per_row; i += blockDim.x) {
        float s = 0.0f;
#pragma unroll
        for (int q = 0; q < F; ++q) {
            const float4 v = xs[i * F + (q + rot) % F];
            s += (v.x + v.y) + (v.z + v.w);
        }
        xsum[i] = s;
    }
    __syncthreads();

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
                w[u][r] = ok ? __ldg(payload + row * words_per_row + wi) : 0u;
                d[u][r] = ok ? f16_to_f32(__ldg(scales + row * groups_per_row + wi / WPG)) : 0.0f;
            }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int wi = (c0 + u * splits) * WARP_SIZE + lane;
            if (wi < words_per_row) {
                float xv[WPW];
#pragma unroll
                for (int q = 0; q < F; ++q) {
                    const float4 v = xs[wi * F + (q + rot) % F];
                    xv[4 * q] = v.x; xv[4 * q + 1] = v.y; xv[4 * q + 2] = v.z; xv[4 * q + 3] = v.w;
                }
                const float xsw = xsum[wi];
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    const u32 wr = __funnelshift_r(w[u][r], w[u][r], 4 * BITS * rot);
                    acc[r] += d[u][r] * signed_word_dot_ilp<BITS>(wr, xv, xsw);
                }
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

#define WR2_ENTRY(NAME, BITS, R, U)                                                           \
    __global__ void __launch_bounds__(WR_WARPS * WARP_SIZE)                                   \
        NAME(const u16* s, const u32* p, const float* x, float* y, int n, int k, int splits) { \
        gemv_wr_smem<BITS, R, U>(s, p, x, y, n, k, splits);                                   \
    }

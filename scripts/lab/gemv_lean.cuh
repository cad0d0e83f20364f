// Round 3 candidate: "lean". Round 2's ncu showed the baseline issuing 3.95 lane-instructions per
// weight (1010 per warp for 256 weights per lane: 8-row address set-up, a dead prefetch, the
// shuffles and the shared-memory epilogue dwarf the 338 FADDs), at 0.45 IPC per scheduler
// (31% theoretical occupancy, registers), with L1 at 63% from the uncoalesced x loads (32
// wavefronts per LDG.128). Round 2's shared-memory x fixed the wavefronts but ran at 12%
// occupancy (148-190 registers). Here: x and its per-word sums staged once per CTA in shared
// memory (rotated conflict-free reads as in gemv_smem_ilp.cuh), a warp streams R rows through
// many K chunks with the next chunk's R words in flight while it computes the current one, one
// accumulator chain per row (latency hidden by 32 warps per SM, registers capped at 64).
// Dynamic shared memory: x[k], xsum[k / WPW], partial[warps * R] floats.
template <int BITS, int R>
__device__ __forceinline__ void gemv_lean(const u16* __restrict__ scales,
                                          const u32* __restrict__ payload,
                                          const float* __restrict__ x, float* __restrict__ y, int n,
                                          int k, int splits) {
    constexpr int WPW = 32 / BITS;
    constexpr int WPG = GROUP_SIZE / WPW;
    constexpr int F = WPW / 4;
    extern __shared__ float4 lean_smem[];
    const int words_per_row = k / WPW;
    const int groups_per_row = k / GROUP_SIZE;
    float4* xs = lean_smem;
    float* xsum = reinterpret_cast<float*>(lean_smem + k / 4);
    float* partial = xsum + words_per_row;
    const int lane = threadIdx.x % WARP_SIZE;
    const int warp = threadIdx.x / WARP_SIZE;
    const int warps = blockDim.x / WARP_SIZE;
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

    const int split = warp % splits;
    const int batches_per_cta = warps / splits;
    const int row0 = (blockIdx.x * batches_per_cta + warp / splits) * R;
    const int n_chunks = (words_per_row + WARP_SIZE - 1) / WARP_SIZE;
    // Word offsets of the warp's rows relative to row0 (rows past N re-read the last valid row,
    // never stored); 32-bit offsets keep the register count down (N*K/32 < 2^31, checked by the
    // launcher). A row's scale index is its word index / WPG.
    const u32* wbase = payload + (long long)min(row0, n - 1) * words_per_row + lane;
    const u16* sbase = scales + (long long)min(row0, n - 1) * groups_per_row;
    int off[R];
#pragma unroll
    for (int r = 0; r < R; ++r) off[r] = max(0, min(row0 + r, n - 1) - row0) * words_per_row;
    float acc[R];
    u32 w[R];
    u16 d16[R];
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = 0.0f;
    auto load = [&](int c, u32* wv, u16* dv) {
        const int wi = c * WARP_SIZE + lane;
        const bool ok = c < n_chunks && wi < words_per_row;
#pragma unroll
        for (int r = 0; r < R; ++r) {
            wv[r] = ok ? __ldg(wbase + off[r] + c * WARP_SIZE) : 0u;
            dv[r] = ok ? __ldg(sbase + (off[r] + wi) / WPG) : (u16)0;
        }
    };
    load(split, w, d16);
    for (int c = split; c < n_chunks; c += splits) {
        u32 wn[R];
        u16 dn[R];
        load(c + splits, wn, dn);
        const int wi = c * WARP_SIZE + lane;
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
                const u32 wr = __funnelshift_r(w[r], w[r], 4 * BITS * rot);
                acc[r] += f16_to_f32(d16[r]) * signed_word_dot<BITS>(wr, xv, xsw);
            }
        }
#pragma unroll
        for (int r = 0; r < R; ++r) {
            w[r] = wn[r];
            d16[r] = dn[r];
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

#define LEAN_ENTRY(NAME, BITS, R, MAXREG)                                                       \
    __global__ void __maxnreg__(MAXREG)                                                         \
        NAME(const u16* s, const u32* p, const float* x, float* y, int n, int k, int splits) { \
        gemv_lean<BITS, R>(s, p, x, y, n, k, splits);                                           \
    }

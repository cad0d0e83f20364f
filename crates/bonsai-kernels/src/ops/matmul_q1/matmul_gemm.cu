// Prefill GEMM templates for every quantized matmul (see matmul_gemv.cu for the layout, the
// epilogue modes and the decode kernels). Entry points are instantiated in matmul_q1.cu etc.

// ---------------------------------------------------------------------------------------------
// Prefill on tensor cores: `gemm_mma_bf16x3`. CTA tile 64 weight rows x 32 tokens, 4 warps of
// 16 rows each; K in steps of one 128-group. Weights are decoded to bf16 +-1 / (c - 1) (exact);
// each activation is split x = hi + mid + lo into three bf16 (the residual after three parts is
// below 2^-27 |x|) and every part goes through mma.sync m16n8k16 (f32 accumulate) into a per-group
// partial, which is scaled by the row's group scale d and added to the f32 accumulator.
// SwiGLU tiles: in each warp's 16 rows, rows 0..7 are gate rows of 8 features and rows 8..15 the
// matching up rows, so one thread holds gate (c0, c1) and up (c2, c3) of the same feature.
#define MMA_TILE_ROWS 64
#define MMA_TILE_TOKENS 32
#define MMA_THREADS 128
#define MMA_PARTS 3
// Shared rows are padded by 8 bf16 (4 words) so fragment loads of 8 rows x 4 lanes hit 32 banks.
#define MMA_ROW_STRIDE (GROUP_SIZE + 8)

// Tile-local row lr (0 .. ROWS-1) of a tile of ROWS weight rows -> weight row, or -1 when
// outside the matrix. SwiGLU: 16-row blocks of 8 gate rows then the same 8 features' up rows.
// Also the wgmma GEMM's (matmul_gemm_wgmma.cu).
template <int MODE, int ROWS>
__device__ __forceinline__ int gemm_weight_row(int tile, int lr, int n_out) {
    if (MODE == MATMUL_SWIGLU) {
        const int f = tile * (ROWS / 2) + (lr / 16) * 8 + (lr % 8);
        if (f >= n_out) return -1;
        return (lr % 16) < 8 ? f : n_out + f;
    }
    const int r = tile * ROWS + lr;
    return r < n_out ? r : -1;
}

// bf16 value of a weight code: 1-bit: +1 / -1; 2-bit: c - 1 (exact).
template <int BITS>
__device__ __forceinline__ u32 code_bf16(u32 c) {
    if (BITS == 1) return c ? 0x3F80u : 0xBF80u;
    return c == 0 ? 0xBF80u : c == 1 ? 0x0000u : c == 2 ? 0x3F80u : 0x4000u;
}

template <int BITS, int MODE>
__device__ __forceinline__ void gemm_mma_bf16x3(const u16* __restrict__ scales,
                                                const u32* __restrict__ payload,
                                                const float* __restrict__ x, int m,
                                                float* __restrict__ y, int n_out, int k) {
    __shared__ __align__(16) u16 w_s[MMA_TILE_ROWS][MMA_ROW_STRIDE];
    __shared__ __align__(16) u16 x_s[MMA_PARTS][MMA_TILE_TOKENS][MMA_ROW_STRIDE];
    __shared__ float d_s[MMA_TILE_ROWS];

    const int tile = blockIdx.x;
    const int tok0 = blockIdx.y * MMA_TILE_TOKENS;
    const int lane = threadIdx.x % WARP_SIZE;
    const int warp = threadIdx.x / WARP_SIZE;
    const int g = lane / 4, t = lane % 4;
    const int groups_per_row = k / GROUP_SIZE;

    float acc[MMA_TILE_TOKENS / 8][4];
#pragma unroll
    for (int tt = 0; tt < MMA_TILE_TOKENS / 8; ++tt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[tt][e] = 0.0f;

    for (int kb = 0; kb < groups_per_row; ++kb) {
        __syncthreads();  // the previous group's tiles are consumed
        // Weights: one lane word (all planes) per thread-iteration, 32 weights decoded in pairs:
        // bits 15 - q and 31 - q hold weights j and j + 1 (weight_layout.cu).
        for (int i = threadIdx.x; i < MMA_TILE_ROWS * LAYOUT_LANES; i += MMA_THREADS) {
            const int lr = i / LAYOUT_LANES, t = i % LAYOUT_LANES;
            const int row = gemm_weight_row<MODE, MMA_TILE_ROWS>(tile, lr, n_out);
            u32 plane[BITS];
#pragma unroll
            for (int p = 0; p < BITS; ++p)
                plane[p] = row >= 0 ? __ldg(layout_row<BITS>(payload, row, groups_per_row) +
                                            layout_word<BITS>(groups_per_row, kb, t, p))
                                    : 0u;
#pragma unroll
            for (int q = 0; q < 16; ++q) {
                u32 pair = 0;
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int bit = 15 - q + 16 * e;
                    u32 c = 0;
#pragma unroll
                    for (int p = 0; p < BITS; ++p) c |= ((plane[p] >> bit) & 1u) << p;
                    pair |= (row >= 0 ? code_bf16<BITS>(c) : 0u) << (16 * e);
                }
                *reinterpret_cast<u32*>(&w_s[lr][layout_weight(t, 15 - q)]) = pair;
            }
            if (t == 0) d_s[lr] = row >= 0 ? f16_to_f32(__ldg(scales + (long long)row * groups_per_row + kb)) : 0.0f;
        }
        // Activations: split into three bf16 parts.
        for (int i = threadIdx.x; i < MMA_TILE_TOKENS * GROUP_SIZE / 2; i += MMA_THREADS) {
            const int tok = (2 * i) / GROUP_SIZE, kk = (2 * i) % GROUP_SIZE;
            float v0 = 0.0f, v1 = 0.0f;
            if (tok0 + tok < m) {
                const float* src = x + (long long)(tok0 + tok) * k + kb * GROUP_SIZE + kk;
                v0 = src[0];
                v1 = src[1];
            }
#pragma unroll
            for (int p = 0; p < MMA_PARTS; ++p) {
                const u16 h0 = f32_to_bf16_rn(v0), h1 = f32_to_bf16_rn(v1);
                *reinterpret_cast<u32*>(&x_s[p][tok][kk]) = (u32)h0 | ((u32)h1 << 16);
                v0 -= bf16_to_f32(h0);  // exact: the residual fits in f32
                v1 -= bf16_to_f32(h1);
            }
        }
        __syncthreads();

        float part[MMA_TILE_TOKENS / 8][4];
#pragma unroll
        for (int tt = 0; tt < MMA_TILE_TOKENS / 8; ++tt)
#pragma unroll
            for (int e = 0; e < 4; ++e) part[tt][e] = 0.0f;
        const int r0 = warp * 16 + g;
#pragma unroll
        for (int ks = 0; ks < GROUP_SIZE; ks += 16) {
            u32 a[4];
            a[0] = *reinterpret_cast<const u32*>(&w_s[r0][ks + 2 * t]);
            a[1] = *reinterpret_cast<const u32*>(&w_s[r0 + 8][ks + 2 * t]);
            a[2] = *reinterpret_cast<const u32*>(&w_s[r0][ks + 2 * t + 8]);
            a[3] = *reinterpret_cast<const u32*>(&w_s[r0 + 8][ks + 2 * t + 8]);
#pragma unroll
            for (int tt = 0; tt < MMA_TILE_TOKENS / 8; ++tt)
#pragma unroll
                for (int p = 0; p < MMA_PARTS; ++p) {
                    const u32 b0 = *reinterpret_cast<const u32*>(&x_s[p][tt * 8 + g][ks + 2 * t]);
                    const u32 b1 = *reinterpret_cast<const u32*>(&x_s[p][tt * 8 + g][ks + 2 * t + 8]);
                    mma_bf16_16x8x16(part[tt], a, b0, b1);
                }
        }
        const float d_lo = d_s[r0], d_hi = d_s[r0 + 8];
#pragma unroll
        for (int tt = 0; tt < MMA_TILE_TOKENS / 8; ++tt) {
            acc[tt][0] = fmaf(d_lo, part[tt][0], acc[tt][0]);
            acc[tt][1] = fmaf(d_lo, part[tt][1], acc[tt][1]);
            acc[tt][2] = fmaf(d_hi, part[tt][2], acc[tt][2]);
            acc[tt][3] = fmaf(d_hi, part[tt][3], acc[tt][3]);
        }
    }

    // Epilogue: thread holds rows r0 (c0, c1) and r0 + 8 (c2, c3) for tokens 8tt + 2t, +1.
    // Add: every old value is loaded before the first store (the compiler cannot prove that a
    // store to y misses the next load from y: one dependent round trip per output otherwise).
    const int lr = warp * 16 + g;
    float old[MMA_TILE_TOKENS / 8][2][2] = {};
    if constexpr (MODE == MATMUL_ADD) {
#pragma unroll
        for (int tt = 0; tt < MMA_TILE_TOKENS / 8; ++tt)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int tok = tok0 + tt * 8 + 2 * t + e;
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int row = gemm_weight_row<MODE, MMA_TILE_ROWS>(tile, lr + 8 * h, n_out);
                    if (tok < m && row >= 0) old[tt][e][h] = y[(long long)tok * n_out + row];
                }
            }
    }
#pragma unroll
    for (int tt = 0; tt < MMA_TILE_TOKENS / 8; ++tt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const int tok = tok0 + tt * 8 + 2 * t + e;
            if (tok >= m) continue;
            if (MODE == MATMUL_SWIGLU) {
                const int f = tile * (MMA_TILE_ROWS / 2) + warp * 8 + g;
                if (f < n_out) y[(long long)tok * n_out + f] = silu_mul(acc[tt][e], acc[tt][2 + e]);
            } else {
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int row = gemm_weight_row<MODE, MMA_TILE_ROWS>(tile, lr + 8 * h, n_out);
                    if (row < 0) continue;
                    float* dst = y + (long long)tok * n_out + row;
                    if (MODE == MATMUL_ADD) *dst = old[tt][e][h] + acc[tt][2 * h + e];
                    else *dst = acc[tt][2 * h + e];
                }
            }
        }
}

// Quantized matmul Y[m, N] (=|+=) X[m, K] . W[N, K]^T, W in the SoA group-128 layout of
// weights.rs: scales f16 [N * K/128], payload u32 words [N * K/128 * WORDS_PER_GROUP].
// This file holds the machinery shared by every quantized matmul (1-bit and 2-bit, plain, fused
// residual, fused gate|up SwiGLU) plus the 1-bit entry points; matmul_q2.cu and the
// gate_up_swiglu files only instantiate it.
//
// Decode (m <= GEMV_MAX_TOKENS): `gemv_rows8_split_k`. A CTA owns 8 weight rows and splits K over
// its 4 warps; lanes of a warp own consecutive payload words, so a warp reads 128 contiguous
// bytes per row and its slice of x once per 8 rows (x is kept in registers and reused by all 8
// rows and the per-row weights by all tokens). Per weight the inner loop is a predicated add of
// x where the bit/code bit is set (sum_{bit=1} x), turned into the signed sum with the lane's
// sum of x: 1-bit: sum s_j x_j = 2 sum_{bit=1} x_j - sum x_j; 2-bit: sum (c_j - 1) x_j =
// sum_{lo=1} x_j + 2 sum_{hi=1} x_j - sum x_j. Accumulation is f32.
//
// Prefill (m > GEMV_MAX_TOKENS): `gemm_tile64_simt`: 64 rows x 64 tokens per CTA, K in steps of
// 32, weights decoded to f32 (+-d, exact) into shared memory, 4x4 register tile per thread.

#define GROUP_SIZE 128
#define GEMV_ROWS 8
#define GEMV_WARPS 4
#define GEMV_MAX_TOKENS 8
#define GEMM_TILE_ROWS 64
#define GEMM_TILE_TOKENS 64
#define GEMM_K_STEP 32
#define GEMM_THREADS 256

// How a matmul's result leaves the kernel.
#define MATMUL_STORE 0   // y = W.x
#define MATMUL_ADD 1     // y += W.x (fused residual)
#define MATMUL_SWIGLU 2  // rows [0, F) gate, [F, 2F) up; out[f] = silu(gate) * up

// The weight row that local row `r` (0 <= r < GEMV_ROWS) of output group `group` reads.
// SwiGLU groups hold 4 features: rows 0..3 gate rows f..f+3, rows 4..7 the matching up rows.
template <int MODE>
__device__ __forceinline__ int gemv_weight_row(int group, int r, int n_out) {
    if (MODE == MATMUL_SWIGLU) {
        const int f = group * (GEMV_ROWS / 2) + (r % (GEMV_ROWS / 2));
        return r < GEMV_ROWS / 2 ? f : n_out + f;
    }
    return group * GEMV_ROWS + r;
}

template <int MODE>
__device__ __forceinline__ bool gemv_row_valid(int group, int r, int n_out) {
    const int f = MODE == MATMUL_SWIGLU ? group * (GEMV_ROWS / 2) + (r % (GEMV_ROWS / 2))
                                        : group * GEMV_ROWS + r;
    return f < n_out;
}

// Sum over a lane's word: sum of x_j whose weight evaluates as BITS=1: s_j in {-1,+1};
// BITS=2: (c_j - 1). `xsum` is the sum of the same x_j.
template <int BITS>
__device__ __forceinline__ float signed_word_dot(u32 w, const float* xv, float xsum) {
    if (BITS == 1) {
        float on = 0.0f;
#pragma unroll
        for (int j = 0; j < 32; ++j)
            if (w & (1u << j)) on += xv[j];
        return 2.0f * on - xsum;
    } else {
        float lo = 0.0f, hi = 0.0f;
#pragma unroll
        for (int j = 0; j < 16; ++j) {
            if (w & (1u << (2 * j))) lo += xv[j];
            if (w & (2u << (2 * j))) hi += xv[j];
        }
        return lo + 2.0f * hi - xsum;
    }
}

// One CTA: GEMV_WARPS warps x 32 lanes; output group blockIdx.x; tokens [0, m), m <= MT.
template <int BITS, int MODE, int MT>
__device__ __forceinline__ void gemv_rows8_split_k(const u16* __restrict__ scales,
                                                   const u32* __restrict__ payload,
                                                   const float* __restrict__ x, int m,
                                                   float* __restrict__ y, int n_out, int k) {
    constexpr int WEIGHTS_PER_WORD = 32 / BITS;
    constexpr int WORDS_PER_GROUP = GROUP_SIZE / WEIGHTS_PER_WORD;
    constexpr int GROUPS_PER_CHUNK = WARP_SIZE / WORDS_PER_GROUP;
    __shared__ float partial[GEMV_WARPS][GEMV_ROWS][MT];

    const int lane = threadIdx.x % WARP_SIZE;
    const int warp = threadIdx.x / WARP_SIZE;
    const int group = blockIdx.x;
    const int groups_per_row = k / GROUP_SIZE;
    const int n_chunks = (groups_per_row + GROUPS_PER_CHUNK - 1) / GROUPS_PER_CHUNK;
    const int lane_group = lane / WORDS_PER_GROUP;
    const int lane_word = lane % WORDS_PER_GROUP;

    int rows[GEMV_ROWS];
    bool row_ok[GEMV_ROWS];
#pragma unroll
    for (int r = 0; r < GEMV_ROWS; ++r) {
        row_ok[r] = gemv_row_valid<MODE>(group, r, n_out);
        rows[r] = row_ok[r] ? gemv_weight_row<MODE>(group, r, n_out) : 0;
    }

    float acc[GEMV_ROWS][MT];
#pragma unroll
    for (int r = 0; r < GEMV_ROWS; ++r)
#pragma unroll
        for (int t = 0; t < MT; ++t) acc[r][t] = 0.0f;

    // Weights of the lane's group in `chunk` (zero when the lane has no group there: K tail).
    auto load_chunk = [&](int chunk, u32* w, float* d) {
        const int kb = chunk * GROUPS_PER_CHUNK + lane_group;
        const bool in_range = chunk < n_chunks && kb < groups_per_row;
#pragma unroll
        for (int r = 0; r < GEMV_ROWS; ++r) {
            const long long g = (long long)rows[r] * groups_per_row + kb;
            w[r] = (in_range && row_ok[r]) ? __ldg(payload + g * WORDS_PER_GROUP + lane_word) : 0u;
            d[r] = (in_range && row_ok[r]) ? f16_to_f32(__ldg(scales + g)) : 0.0f;
        }
    };
    // Double-buffered: the next chunk's weights are in flight while this one is computed.
    u32 w[GEMV_ROWS];
    float d[GEMV_ROWS];
    load_chunk(warp, w, d);
    for (int chunk = warp; chunk < n_chunks; chunk += GEMV_WARPS) {
        u32 w_next[GEMV_ROWS];
        float d_next[GEMV_ROWS];
        load_chunk(chunk + GEMV_WARPS, w_next, d_next);
        const int kb = chunk * GROUPS_PER_CHUNK + lane_group;
        if (kb < groups_per_row) {  // tail chunk: lanes past K have no group
            const int k0 = kb * GROUP_SIZE + lane_word * WEIGHTS_PER_WORD;
#pragma unroll
            for (int t = 0; t < MT; ++t) {
                if (t >= m) break;
                float xv[WEIGHTS_PER_WORD];
                const float4* src = reinterpret_cast<const float4*>(x + (long long)t * k + k0);
                float xsum = 0.0f;
#pragma unroll
                for (int q = 0; q < WEIGHTS_PER_WORD / 4; ++q) {
                    const float4 v = __ldg(src + q);
                    xv[4 * q] = v.x; xv[4 * q + 1] = v.y; xv[4 * q + 2] = v.z; xv[4 * q + 3] = v.w;
                    xsum += (v.x + v.y) + (v.z + v.w);
                }
#pragma unroll
                for (int r = 0; r < GEMV_ROWS; ++r)
                    acc[r][t] += d[r] * signed_word_dot<BITS>(w[r], xv, xsum);
            }
        }
#pragma unroll
        for (int r = 0; r < GEMV_ROWS; ++r) {
            w[r] = w_next[r];
            d[r] = d_next[r];
        }
    }

#pragma unroll
    for (int r = 0; r < GEMV_ROWS; ++r)
#pragma unroll
        for (int t = 0; t < MT; ++t) {
            const float s = warp_sum(acc[r][t]);
            if (lane == 0) partial[warp][r][t] = s;
        }
    __syncthreads();

    // Epilogue: one thread per (output row, token).
    const int n_local = MODE == MATMUL_SWIGLU ? GEMV_ROWS / 2 : GEMV_ROWS;
    for (int i = threadIdx.x; i < n_local * MT; i += blockDim.x) {
        const int r = i % n_local;
        const int t = i / n_local;
        if (t >= m || !gemv_row_valid<MODE>(group, r, n_out)) continue;
        float v = 0.0f;
#pragma unroll
        for (int wi = 0; wi < GEMV_WARPS; ++wi) v += partial[wi][r][t];
        const int out_col = MODE == MATMUL_SWIGLU ? group * (GEMV_ROWS / 2) + r : group * GEMV_ROWS + r;
        float* dst = y + (long long)t * n_out + out_col;
        if (MODE == MATMUL_SWIGLU) {
            float u = 0.0f;
#pragma unroll
            for (int wi = 0; wi < GEMV_WARPS; ++wi) u += partial[wi][r + GEMV_ROWS / 2][t];
            *dst = silu_mul(v, u);
        } else if (MODE == MATMUL_ADD) {
            *dst += v;
        } else {
            *dst = v;
        }
    }
}

// Weight (row, k) of a quantized matrix as f32, given the row's payload/scales base.
template <int BITS>
__device__ __forceinline__ float dequant_weight(const u16* scales, const u32* payload,
                                                long long row, int groups_per_row, int kk) {
    constexpr int WEIGHTS_PER_WORD = 32 / BITS;
    constexpr int WORDS_PER_GROUP = GROUP_SIZE / WEIGHTS_PER_WORD;
    const long long g = row * groups_per_row + kk / GROUP_SIZE;
    const int j = kk % GROUP_SIZE;
    const u32 word = __ldg(payload + g * WORDS_PER_GROUP + j / WEIGHTS_PER_WORD);
    const float d = f16_to_f32(__ldg(scales + g));
    if (BITS == 1) return ((word >> (j % 32)) & 1u) ? d : -d;
    const u32 c = (word >> (2 * (j % 16))) & 3u;
    return ((float)c - 1.0f) * d;
}

// Local tile row lr (0..63) -> weight row. SwiGLU tiles hold 32 features: for each pair of
// features, 2 gate rows then the 2 matching up rows, so one thread's 4 rows pair up.
template <int MODE>
__device__ __forceinline__ int gemm_weight_row(int tile, int lr, int n_out) {
    if (MODE == MATMUL_SWIGLU) {
        const int f = tile * (GEMM_TILE_ROWS / 2) + (lr / 4) * 2 + (lr % 2);
        return (lr % 4) < 2 ? f : n_out + f;
    }
    return tile * GEMM_TILE_ROWS + lr;
}
template <int MODE>
__device__ __forceinline__ int gemm_out_col(int tile, int lr) {
    if (MODE == MATMUL_SWIGLU) return tile * (GEMM_TILE_ROWS / 2) + (lr / 4) * 2 + (lr % 2);
    return tile * GEMM_TILE_ROWS + lr;
}

// grid (row tiles, token tiles), GEMM_THREADS threads. Thread (ty, tx) of 16 x 16 owns local rows
// ty*4..ty*4+3 and tokens tx*4..tx*4+3.
template <int BITS, int MODE>
__device__ __forceinline__ void gemm_tile64_simt(const u16* __restrict__ scales,
                                                 const u32* __restrict__ payload,
                                                 const float* __restrict__ x, int m,
                                                 float* __restrict__ y, int n_out, int k) {
    // +1 column breaks the power-of-two stride so column reads hit distinct banks.
    __shared__ float ws[GEMM_TILE_ROWS][GEMM_K_STEP + 1];
    __shared__ float xs[GEMM_TILE_TOKENS][GEMM_K_STEP + 1];
    const int tile = blockIdx.x;
    const int tok0 = blockIdx.y * GEMM_TILE_TOKENS;
    const int tx = threadIdx.x % 16;
    const int ty = threadIdx.x / 16;
    const int groups_per_row = k / GROUP_SIZE;

    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < k; k0 += GEMM_K_STEP) {
        // Fill: GEMM_TILE_ROWS * GEMM_K_STEP weights and as many x values, 8 per thread each.
        for (int i = threadIdx.x; i < GEMM_TILE_ROWS * GEMM_K_STEP; i += GEMM_THREADS) {
            const int lr = i / GEMM_K_STEP;
            const int kk = i % GEMM_K_STEP;
            const int col = gemm_out_col<MODE>(tile, lr);
            float wv = 0.0f;
            if (col < n_out)
                wv = dequant_weight<BITS>(scales, payload, gemm_weight_row<MODE>(tile, lr, n_out),
                                          groups_per_row, k0 + kk);
            ws[lr][kk] = wv;
            const int tok = tok0 + lr;
            xs[lr][kk] = tok < m ? x[(long long)tok * k + k0 + kk] : 0.0f;
        }
        __syncthreads();
#pragma unroll 8
        for (int kk = 0; kk < GEMM_K_STEP; ++kk) {
            float a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) a[i] = ws[ty * 4 + i][kk];
#pragma unroll
            for (int j = 0; j < 4; ++j) b[j] = xs[tx * 4 + j][kk];
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }

#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const int tok = tok0 + tx * 4 + j;
        if (tok >= m) continue;
        if (MODE == MATMUL_SWIGLU) {
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                const int col = gemm_out_col<MODE>(tile, ty * 4 + i);
                if (col < n_out) y[(long long)tok * n_out + col] = silu_mul(acc[i][j], acc[i + 2][j]);
            }
        } else {
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int col = gemm_out_col<MODE>(tile, ty * 4 + i);
                if (col >= n_out) continue;
                float* dst = y + (long long)tok * n_out + col;
                if (MODE == MATMUL_ADD) *dst += acc[i][j];
                else *dst = acc[i][j];
            }
        }
    }
}

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

__device__ __forceinline__ u16 f32_to_bf16_rn(float f) {
    u16 h;
    asm("{ .reg .b16 t; cvt.rn.bf16.f32 t, %1; mov.b16 %0, t; }" : "=h"(h) : "f"(f));
    return h;
}
__device__ __forceinline__ float bf16_to_f32(u16 h) { return __int_as_float(((u32)h) << 16); }

__device__ __forceinline__ void mma_bf16_16x8x16(float* c, const u32* a, u32 b0, u32 b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Tile-local row lr (0..63) -> weight row, or -1 when outside the matrix.
template <int MODE>
__device__ __forceinline__ int mma_weight_row(int tile, int lr, int n_out) {
    if (MODE == MATMUL_SWIGLU) {
        const int f = tile * (MMA_TILE_ROWS / 2) + (lr / 16) * 8 + (lr % 8);
        if (f >= n_out) return -1;
        return (lr % 16) < 8 ? f : n_out + f;
    }
    const int r = tile * MMA_TILE_ROWS + lr;
    return r < n_out ? r : -1;
}

// bf16 value of weight code/bit: 1-bit: bit ? +1 : -1; 2-bit: c - 1.
template <int BITS>
__device__ __forceinline__ u16 weight_bf16(u32 word, int j) {
    if (BITS == 1) return ((word >> j) & 1u) ? 0x3F80 : 0xBF80;
    const u32 c = (word >> (2 * j)) & 3u;
    return c == 0 ? 0xBF80 : c == 1 ? 0x0000 : c == 2 ? 0x3F80 : 0x4000;
}

template <int BITS, int MODE>
__device__ __forceinline__ void gemm_mma_bf16x3(const u16* __restrict__ scales,
                                                const u32* __restrict__ payload,
                                                const float* __restrict__ x, int m,
                                                float* __restrict__ y, int n_out, int k) {
    constexpr int WEIGHTS_PER_WORD = 32 / BITS;
    constexpr int WORDS_PER_GROUP = GROUP_SIZE / WEIGHTS_PER_WORD;
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
        // Weights: one payload word per thread-iteration, decoded into WEIGHTS_PER_WORD bf16.
        for (int i = threadIdx.x; i < MMA_TILE_ROWS * WORDS_PER_GROUP; i += MMA_THREADS) {
            const int lr = i / WORDS_PER_GROUP, wi = i % WORDS_PER_GROUP;
            const int row = mma_weight_row<MODE>(tile, lr, n_out);
            const long long grp = (long long)row * groups_per_row + kb;
            const u32 word = row >= 0 ? __ldg(payload + grp * WORDS_PER_GROUP + wi) : 0u;
            u32* dst = reinterpret_cast<u32*>(&w_s[lr][wi * WEIGHTS_PER_WORD]);
#pragma unroll
            for (int j = 0; j < WEIGHTS_PER_WORD; j += 2) {
                const u32 lo = row >= 0 ? weight_bf16<BITS>(word, j) : 0u;
                const u32 hi = row >= 0 ? weight_bf16<BITS>(word, j + 1) : 0u;
                dst[j / 2] = lo | (hi << 16);
            }
            if (wi == 0) d_s[lr] = row >= 0 ? f16_to_f32(__ldg(scales + grp)) : 0.0f;
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
    const int lr = warp * 16 + g;
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
                    const int row = mma_weight_row<MODE>(tile, lr + 8 * h, n_out);
                    if (row < 0) continue;
                    float* dst = y + (long long)tok * n_out + row;
                    if (MODE == MATMUL_ADD) *dst += acc[tt][2 * h + e];
                    else *dst = acc[tt][2 * h + e];
                }
            }
        }
}

// Entry points. `n_out` is N for plain/add and F (features) for SwiGLU; y is [m, n_out].
#define DEFINE_MATMUL_ENTRY_POINTS(PREFIX, BITS, MODE)                                           \
    extern "C" __global__ void __launch_bounds__(GEMV_WARPS * WARP_SIZE)                         \
        PREFIX##_gemv_rows8_split_k(const u16* scales, const u32* payload, const float* x,       \
                                    int m, float* y, int n_out, int k) {                         \
        gemv_rows8_split_k<BITS, MODE, 1>(scales, payload, x, m, y, n_out, k);                   \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(GEMV_WARPS * WARP_SIZE)                         \
        PREFIX##_gemv_rows8_split_k_tokens8(const u16* scales, const u32* payload,               \
                                            const float* x, int m, float* y, int n_out, int k) { \
        gemv_rows8_split_k<BITS, MODE, GEMV_MAX_TOKENS>(scales, payload, x, m, y, n_out, k);     \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(GEMM_THREADS)                                   \
        PREFIX##_gemm_tile64_simt(const u16* scales, const u32* payload, const float* x, int m,  \
                                  float* y, int n_out, int k) {                                  \
        gemm_tile64_simt<BITS, MODE>(scales, payload, x, m, y, n_out, k);                        \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(MMA_THREADS)                                    \
        PREFIX##_gemm_mma_bf16x3(const u16* scales, const u32* payload, const float* x, int m,   \
                                 float* y, int n_out, int k) {                                   \
        gemm_mma_bf16x3<BITS, MODE>(scales, payload, x, m, y, n_out, k);                         \
    }

DEFINE_MATMUL_ENTRY_POINTS(matmul_q1, 1, MATMUL_STORE)
DEFINE_MATMUL_ENTRY_POINTS(matmul_q1_add, 1, MATMUL_ADD)

// Snapshot of the production decode GEMV before this work (prelude.cuh + matmul_gemv.cu at 825eebd), the lab's baseline.
// Shared definitions for every bonsai kernel. Concatenated first into the single module.
// No CUDA headers are included: NVRTC ships none, and the kernels need only builtins.
typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned long long u64;
typedef unsigned char u8;

// Threads per warp; every reduction below assumes full warps.
#define WARP_SIZE 32
#define FULL_MASK 0xffffffffu

// f16 <-> f32 through inline PTX (no cuda_fp16.h under NVRTC). Round to nearest even.
__device__ __forceinline__ float f16_to_f32(u16 h) {
    float f;
    asm("{ .reg .b16 t; mov.b16 t, %1; cvt.f32.f16 %0, t; }" : "=f"(f) : "h"(h));
    return f;
}
__device__ __forceinline__ u16 f32_to_f16(float f) {
    u16 h;
    asm("{ .reg .b16 t; cvt.rn.f16.f32 t, %1; mov.b16 %0, t; }" : "=h"(h) : "f"(f));
    return h;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int offset = WARP_SIZE / 2; offset > 0; offset >>= 1)
        v += __shfl_xor_sync(FULL_MASK, v, offset);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int offset = WARP_SIZE / 2; offset > 0; offset >>= 1)
        v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, offset));
    return v;
}

// Sum over a whole CTA (blockDim.x a multiple of 32, at most 1024). `scratch` holds 32 floats.
// Every thread gets the total. Ends with a barrier so `scratch` may be reused at once.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
    const int lane = threadIdx.x % WARP_SIZE;
    const int warp = threadIdx.x / WARP_SIZE;
    const int n_warps = blockDim.x / WARP_SIZE;
    v = warp_sum(v);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    float t = lane < n_warps ? scratch[lane] : 0.0f;
    t = warp_sum(t);
    __syncthreads();
    return t;
}
__device__ __forceinline__ float block_max(float v, float* scratch) {
    const int lane = threadIdx.x % WARP_SIZE;
    const int warp = threadIdx.x / WARP_SIZE;
    const int n_warps = blockDim.x / WARP_SIZE;
    v = warp_max(v);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    float t = lane < n_warps ? scratch[lane] : -__int_as_float(0x7f800000);
    t = warp_max(t);
    __syncthreads();
    return t;
}

// Negative infinity without headers.
__device__ __forceinline__ float neg_inf() { return -__int_as_float(0x7f800000); }

// silu(g) * u. expf (max 2 ulp over the whole range) rather than __expf, whose error grows with |g|.
__device__ __forceinline__ float silu_mul(float g, float u) {
    return g / (1.0f + expf(-g)) * u;
}
// Quantized matmul Y[m, N] (=|+=) X[m, K] . W[N, K]^T, W in the SoA group-128 layout of
// weights.rs: scales f16 [N * K/128], payload u32 words [N * K/128 * WORDS_PER_GROUP].
// This file and matmul_gemm.cu hold the machinery shared by every quantized matmul (1-bit and
// 2-bit, plain, fused residual, fused gate|up SwiGLU); matmul_q1.cu, matmul_q2.cu and the
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

// Round-4 production decode GEMV `gemv_rows8_split_k` (CUDA cores), kept in the lab as a frozen
// reference after round 6 replaced it with matmul_gemv_tc.cu. It reads the HOST (natural) weight
// layout of crates/bonsai-kernels/src/weights.rs (bit j of word j / 32), not the device layout,
// so the lab uploads natural words for it. Needs prelude.cuh, ptx.cuh, matmul_gemv.cu before.
//
// A CTA owns 8 weight rows and splits K over its 4 warps; lanes of a warp own consecutive payload
// words; per weight the inner loop is a predicated add of x where the bit is set, turned into the
// signed sum with the lane's sum of x. Accumulation is f32.

#define GEMV_ROWS 8
#define GEMV_WARPS 4

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

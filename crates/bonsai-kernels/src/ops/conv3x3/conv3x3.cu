// conv3x3 (pad 1, stride 1, bias, NCHW f32, batch 1) as an implicit GEMM on tensor cores with the
// 3xTF32 machinery of ops/gemm_f32/tile_3xtf32.cu: M = C_out (the filters [C_out, C_in*9] are the
// K-contiguous A rows), N = H*W pixels, K = C_in*9 with k = ci*9 + kh*3 + kw. No patch buffer
// exists in memory: each B stage is gathered straight from the image into shared memory.
//
// B stage layout: [32 k][CONV3X3_B_STRIDE] floats, pixels contiguous. The stride is 128 + 8 so
// the fragment reads (k t, pixel g) of a warp, bank 8t + g, hit 32 distinct banks; the gather
// writes 32 consecutive pixels of one k row per warp instruction (conflict-free too).
// Each thread owns one pixel column of the tile and gathers 16 of its 32 k rows per stage with
// 4-byte cp.async: source x[ci][ph + kh - 1][pw + kw - 1], or a plain store of 0 where the tap
// falls in the padding, past K, or past the last pixel.
//
// Split K (launcher's split_k): 384 -> 384 at 64² is 96 output tiles, one CTA each on 96 of the
// 132 SMs, 108 K tiles long. Two K ranges give 192 CTAs (all resident at 2 per SM), each half as
// long, plus a merge of 2 x 6.3 MB partials. Speed of light: 10.4 GFLOP at ~100 TFLOP/s effective
// (mma.sync 3xTF32, three products) = 104 us. Measured with and without the split:
// docs/kernel-notes.md, "gemm_f32 3xTF32 / wgmma and conv3x3".
#define CONV3X3_B_ROW_PAD 8
#define CONV3X3_B_STRIDE (TF32X3_TILE_N + CONV3X3_B_ROW_PAD)
// k rows gathered per pass of the whole CTA (one pixel column per thread).
#define CONV3X3_ROWS_PER_PASS (TF32X3_THREADS / TF32X3_TILE_N)

struct Conv3x3Patches {
    static constexpr int STAGE_FLOATS = TF32X3_TILE_K * CONV3X3_B_STRIDE;
    const float* x;
    int h, w, k;
    int pix;      // this thread's pixel column in the tile
    int ph, pw;   // its pixel's row and column in the image
    bool pvalid;  // false past the last pixel
    __device__ __forceinline__ void load(float* tile, int k0) const {
        const long long plane = (long long)h * w;
// 8 of the 16 rows per unrolled body: ptxas spills least there (sm_90: 116 bytes against
        // 424 at 4 and 404 fully unrolled).
#pragma unroll 8
        for (int j = 0; j < TF32X3_TILE_K / CONV3X3_ROWS_PER_PASS; ++j) {
            const int kr = threadIdx.x / TF32X3_TILE_N + CONV3X3_ROWS_PER_PASS * j;
            const int kg = k0 + kr;
            const int ci = kg / 9, tap = kg - 9 * ci;
            const int kh = tap / 3, kw = tap - 3 * kh;
            const int ih = ph + kh - 1, iw = pw + kw - 1;
            float* dst = tile + kr * CONV3X3_B_STRIDE + pix;
            if (pvalid && kg < k && (unsigned)ih < (unsigned)h && (unsigned)iw < (unsigned)w)
                cp_async4(dst, x + ci * plane + (long long)ih * w + iw);
            else
                *dst = 0.0f;
        }
    }
    // b[j] = (b0, b1) = (k t, pixel g), (k t + 4, pixel g) of n8 tile j of the warp's pixels wn0...
    __device__ __forceinline__ void fragments(u32 (*b)[2], const float* tile, int wn0, int ks, int lane) const {
        const int g = lane / 4, t = lane % 4;
        const float* row = tile + (ks * 8 + t) * CONV3X3_B_STRIDE + wn0 + g;
#pragma unroll
        for (int j = 0; j < TF32X3_NI; ++j) {
            b[j][0] = __float_as_uint(row[8 * j]);
            b[j][1] = __float_as_uint(row[4 * CONV3X3_B_STRIDE + 8 * j]);
        }
    }
};

// grid (tiles_m * tiles_n), TF32X3_THREADS threads, TF32X3_STAGES x (16 KiB + 17 KiB) of dynamic
// shared memory. `_vec16`: C_in % 4 == 0 and `weight` 16-byte aligned; `_any_c`: any C_in.
// Split-K (`splits` > 1, gridDim.y = splits): CTA row blockIdx.y sums its share of the K tiles
// into partial[blockIdx.y] = y + blockIdx.y·C_out·H·W (a caller-owned workspace, no bias);
// conv3x3_split_merge then adds the splits in order and the bias.
template <bool VEC16>
__device__ __forceinline__ void conv3x3_3xtf32_cta(const float* __restrict__ x, const float* __restrict__ weight,
                                                   const float* __restrict__ bias, float* __restrict__ y, int c_in,
                                                   int c_out, int h, int w, int splits = 1) {
    extern __shared__ float4 tf32x3_smem[];
    const int pixels = h * w, k = 9 * c_in;
    int tile_m, tile_n;
    tf32x3_tile_of_cta((c_out + TF32X3_TILE_M - 1) / TF32X3_TILE_M, (pixels + TF32X3_TILE_N - 1) / TF32X3_TILE_N,
                       tile_m, tile_n);
    Conv3x3Patches patches;
    patches.x = x;
    patches.h = h;
    patches.w = w;
    patches.k = k;
    patches.pix = threadIdx.x % TF32X3_TILE_N;
    const int p = tile_n * TF32X3_TILE_N + patches.pix;
    patches.pvalid = p < pixels;
    patches.ph = p / w;
    patches.pw = p - patches.ph * w;
    const int k_tiles = (k + TF32X3_TILE_K - 1) / TF32X3_TILE_K;
    const int per_split = (k_tiles + splits - 1) / splits;
    const int split = blockIdx.y;
    float* out = y + (long long)split * c_out * pixels;
    tf32x3_gemm_cta<VEC16, true>(reinterpret_cast<float*>(tf32x3_smem), weight, patches,
                                 splits > 1 ? nullptr : bias, out, c_out, pixels, k, tile_m, tile_n,
                                 split * per_split, (split + 1) * per_split);
}

// y[i] = ((partial[0][i] + partial[1][i]) + ...) + bias[i / pixels]: the splits in a fixed
// order (the same bits every run).
extern "C" __global__ void conv3x3_split_merge(const float* __restrict__ partial, const float* __restrict__ bias,
                                               float* __restrict__ y, int c_out, int pixels, int splits) {
    griddep_wait();
    griddep_launch_dependents();
    tf32x3_merge_splits<true>(partial, bias, y, c_out, pixels, splits);
}

// Both variants; the suffixes are spelled out (PREFIX##_suffix) so launch_ex.rs's griddep check
// finds every entry point's body.
#define CONV3X3_ENTRIES(PREFIX)                                                                                \
    extern "C" __global__ void __launch_bounds__(TF32X3_THREADS, 2)                                            \
        PREFIX##_vec16(const float* __restrict__ x, const float* __restrict__ weight,                          \
                       const float* __restrict__ bias, float* __restrict__ y, int c_in, int c_out, int h, int w) {\
        griddep_wait();                                                                                        \
        griddep_launch_dependents();                                                                           \
        conv3x3_3xtf32_cta<true>(x, weight, bias, y, c_in, c_out, h, w);                                       \
    }                                                                                                          \
    extern "C" __global__ void __launch_bounds__(TF32X3_THREADS, 2)                                            \
        PREFIX##_any_c(const float* __restrict__ x, const float* __restrict__ weight,                          \
                       const float* __restrict__ bias, float* __restrict__ y, int c_in, int c_out, int h, int w) {\
        griddep_wait();                                                                                        \
        griddep_launch_dependents();                                                                           \
        conv3x3_3xtf32_cta<false>(x, weight, bias, y, c_in, c_out, h, w);                                      \
    }                                                                                                          \
    extern "C" __global__ void __launch_bounds__(TF32X3_THREADS, 2)                                            \
        PREFIX##_split_vec16(const float* __restrict__ x, const float* __restrict__ weight,                    \
                             float* __restrict__ partial, int c_in, int c_out, int h, int w, int splits) {      \
        griddep_wait();                                                                                        \
        griddep_launch_dependents();                                                                           \
        conv3x3_3xtf32_cta<true>(x, weight, nullptr, partial, c_in, c_out, h, w, splits);                      \
    }                                                                                                          \
    extern "C" __global__ void __launch_bounds__(TF32X3_THREADS, 2)                                            \
        PREFIX##_split_any_c(const float* __restrict__ x, const float* __restrict__ weight,                    \
                             float* __restrict__ partial, int c_in, int c_out, int h, int w, int splits) {      \
        griddep_wait();                                                                                        \
        griddep_launch_dependents();                                                                           \
        conv3x3_3xtf32_cta<false>(x, weight, nullptr, partial, c_in, c_out, h, w, splits);                     \
    }

CONV3X3_ENTRIES(conv3x3_3xtf32)

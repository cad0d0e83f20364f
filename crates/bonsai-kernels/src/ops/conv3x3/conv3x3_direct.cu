// conv3x3 (pad 1, stride 1, bias, NCHW f32, batch 1) for few output channels (C_out <= 8, the
// VAE's conv_out 96 -> 3): a direct convolution on the f32 FMA units. The implicit GEMM
// (conv3x3.cu) puts C_out on its 128-wide M tile, so at C_out = 3 it computes 128 rows to keep
// 3 (far slower than torch fp32 at 96 -> 3 x 512²: docs/kernel-notes.md, "gemm_f32 3xTF32 /
// wgmma and conv3x3"); here every FMA is one the definition needs
// (up to CO - C_out padded channels: 1 of 4 at C_out = 3).
//
// CTA: an output tile of CONV_DIRECT_TILE_H rows x CONV_DIRECT_TILE_W columns, 128 threads,
// thread (ty, tx) owns CONV_DIRECT_PX consecutive pixels of row ty and all CO output channels
// (CO = 4 or 8 accumulators per pixel; channels >= C_out get zero weights and are not stored).
// Input channels stream through a 2-stage cp.async ring of CONV_DIRECT_CI_BLOCK channels: the
// halo tile [CI_BLOCK][TILE_H + 2][TILE_W + 2] (padding and channels past C_in stored as 0) and
// the filters [CI_BLOCK][9][CO] (weights transposed so one float4 load gives 4 channels).
//
// Summation (error bound, checked by verify/image_gemm.rs): per pixel and channel, each stage's
// 9·CI_BLOCK products in k order (ci, kh, kw) go by an FMA chain into a fresh partial, which one
// f32 add folds into the accumulator; the bias is added last. Error <= γ_{9·CI_BLOCK +
// ⌈C_in/CI_BLOCK⌉}·Σ|x·w| + u·(|acc| + |bias|): (72 + 12)u at C_in = 96, below the 3xTF32 GEMM's
// (2·⌈9·C_in/32⌉ + 37)u = 91u and a plain f32 chain's 864u.
//
// Speed of light (H200): 96 -> 3 x 512²: 1.36 GFLOP of needed FMAs (1.81 with CO = 4 padding)
// over ~60 TFLOP/s f32 FMA = 30 us; reads 100.7 MB of input (+ 12% halo, mostly L2 hits) at
// 4.8 TB/s = 21 us. FMA issue and shared-memory loads share the SM, one barrier per 8 channels.
// Measured: docs/kernel-notes.md, "gemm_f32 3xTF32 / wgmma and conv3x3".
#define CONV_DIRECT_TILE_H 8
#define CONV_DIRECT_TILE_W 64
#define CONV_DIRECT_PX 4
#define CONV_DIRECT_THREADS 128
#define CONV_DIRECT_CI_BLOCK 8
#define CONV_DIRECT_HALO_H (CONV_DIRECT_TILE_H + 2)
#define CONV_DIRECT_HALO_W (CONV_DIRECT_TILE_W + 2)

template <int CO>
struct ConvDirectStage {
    float in[CONV_DIRECT_CI_BLOCK][CONV_DIRECT_HALO_H][CONV_DIRECT_HALO_W];
    float4 w[CONV_DIRECT_CI_BLOCK][9][CO / 4];
};

// Queues stage `ci0`'s halo tile and filters into `st` (cp.async; zeros by plain stores).
template <int CO>
__device__ __forceinline__ void conv_direct_load(ConvDirectStage<CO>& st, const float* __restrict__ x,
                                                 const float* __restrict__ weight, int ci0, int c_in,
                                                 int c_out, int h, int w, int oh0, int ow0) {
    // Warp-per-halo-row: the row's channel, image row and validity are computed once, then
    // the lanes copy its TILE_W + 2 columns (consecutive addresses: coalesced).
    const long long plane = (long long)h * w;
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    for (int rr = warp; rr < CONV_DIRECT_CI_BLOCK * CONV_DIRECT_HALO_H; rr += CONV_DIRECT_THREADS / WARP_SIZE) {
        const int c = rr / CONV_DIRECT_HALO_H, r = rr - c * CONV_DIRECT_HALO_H;
        const int ci = ci0 + c, ih = oh0 + r - 1;
        const bool row_ok = ci < c_in && (unsigned)ih < (unsigned)h;
        const float* src = x + ci * plane + (long long)ih * w;
        for (int col = lane; col < CONV_DIRECT_HALO_W; col += WARP_SIZE) {
            const int iw = ow0 + col - 1;
            float* dst = &st.in[c][r][col];
            if (row_ok && (unsigned)iw < (unsigned)w)
                cp_async4(dst, src + iw);
            else
                *dst = 0.0f;
        }
    }
    float* wdst = reinterpret_cast<float*>(st.w);
    for (int i = threadIdx.x; i < CONV_DIRECT_CI_BLOCK * 9 * CO; i += CONV_DIRECT_THREADS) {
        const int c = i / (9 * CO);
        const int rem = i - c * (9 * CO);
        const int tap = rem / CO, o = rem - tap * CO;
        const int ci = ci0 + c;
        if (ci < c_in && o < c_out)
            cp_async4(wdst + i, weight + ((long long)o * c_in + ci) * 9 + tap);
        else
            wdst[i] = 0.0f;
    }
}

#define CONV_DIRECT_PARAMS                                                                                     \
    const float *__restrict__ x, const float *__restrict__ weight, const float *__restrict__ bias, float *__restrict__ y, \
        int c_in, int c_out, int h, int w
#define CONV_DIRECT_ARGS x, weight, bias, y, c_in, c_out, h, w
template <int CO>
__device__ __forceinline__ void conv3x3_direct_cta(CONV_DIRECT_PARAMS) {
    __shared__ __align__(16) ConvDirectStage<CO> stages[2];
    const int tx = threadIdx.x % (CONV_DIRECT_TILE_W / CONV_DIRECT_PX);
    const int ty = threadIdx.x / (CONV_DIRECT_TILE_W / CONV_DIRECT_PX);
    const int oh0 = blockIdx.y * CONV_DIRECT_TILE_H, ow0 = blockIdx.x * CONV_DIRECT_TILE_W;
    const int blocks = (c_in + CONV_DIRECT_CI_BLOCK - 1) / CONV_DIRECT_CI_BLOCK;

    float acc[CONV_DIRECT_PX][CO];
#pragma unroll
    for (int p = 0; p < CONV_DIRECT_PX; ++p)
#pragma unroll
        for (int o = 0; o < CO; ++o) acc[p][o] = 0.0f;

    conv_direct_load<CO>(stages[0], x, weight, 0, c_in, c_out, h, w, oh0, ow0);
    cp_async_commit();
    for (int b = 0; b < blocks; ++b) {
        // Queue block b+1 into the other stage (freed by the barrier that ended block b-1's
        // compute), then wait for block b only.
        if (b + 1 < blocks)
            conv_direct_load<CO>(stages[(b + 1) & 1], x, weight, (b + 1) * CONV_DIRECT_CI_BLOCK, c_in, c_out, h,
                                 w, oh0, ow0);
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        const ConvDirectStage<CO>& st = stages[b & 1];
        float part[CONV_DIRECT_PX][CO];
#pragma unroll
        for (int p = 0; p < CONV_DIRECT_PX; ++p)
#pragma unroll
            for (int o = 0; o < CO; ++o) part[p][o] = 0.0f;
        for (int c = 0; c < CONV_DIRECT_CI_BLOCK; ++c) {
#pragma unroll
            for (int kh = 0; kh < 3; ++kh) {
                // The PX + 2 inputs this thread's pixels see in halo row ty + kh (float2 loads:
                // the row start and tx·PX are even).
                float row[CONV_DIRECT_PX + 2];
                const float2* src = reinterpret_cast<const float2*>(&st.in[c][ty + kh][tx * CONV_DIRECT_PX]);
#pragma unroll
                for (int q = 0; q < (CONV_DIRECT_PX + 2) / 2; ++q) {
                    const float2 v = src[q];
                    row[2 * q] = v.x;
                    row[2 * q + 1] = v.y;
                }
#pragma unroll
                for (int kw = 0; kw < 3; ++kw) {
                    float wv[CO];
#pragma unroll
                    for (int o4 = 0; o4 < CO / 4; ++o4) {
                        const float4 f = st.w[c][kh * 3 + kw][o4];
                        wv[4 * o4] = f.x;
                        wv[4 * o4 + 1] = f.y;
                        wv[4 * o4 + 2] = f.z;
                        wv[4 * o4 + 3] = f.w;
                    }
#pragma unroll
                    for (int p = 0; p < CONV_DIRECT_PX; ++p)
#pragma unroll
                        for (int o = 0; o < CO; ++o) part[p][o] = fmaf(row[p + kw], wv[o], part[p][o]);
                }
            }
        }
#pragma unroll
        for (int p = 0; p < CONV_DIRECT_PX; ++p)
#pragma unroll
            for (int o = 0; o < CO; ++o) acc[p][o] += part[p][o];
        // Every warp is done with this stage before the next iteration refills it.
        __syncthreads();
    }
    cp_async_wait<0>();

    const int oh = oh0 + ty;
    if (oh >= h) return;
#pragma unroll
    for (int o = 0; o < CO; ++o) {
        if (o >= c_out) break;
        const float b = bias[o];
        float* dst = y + (long long)o * h * w + (long long)oh * w;
#pragma unroll
        for (int p = 0; p < CONV_DIRECT_PX; ++p) {
            const int ow = ow0 + tx * CONV_DIRECT_PX + p;
            if (ow < w) dst[ow] = acc[p][o] + b;
        }
    }
}

// grid (⌈W / TILE_W⌉, ⌈H / TILE_H⌉), CONV_DIRECT_THREADS threads, static shared memory only.
// `_co4`: C_out <= 4; `_co8`: C_out <= 8.
extern "C" __global__ void __launch_bounds__(CONV_DIRECT_THREADS) conv3x3_direct_co4(CONV_DIRECT_PARAMS) {
    griddep_wait();
    griddep_launch_dependents();
    conv3x3_direct_cta<4>(CONV_DIRECT_ARGS);
}
extern "C" __global__ void __launch_bounds__(CONV_DIRECT_THREADS) conv3x3_direct_co8(CONV_DIRECT_PARAMS) {
    griddep_wait();
    griddep_launch_dependents();
    conv3x3_direct_cta<8>(CONV_DIRECT_ARGS);
}

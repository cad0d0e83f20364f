// gemm_f32 on tensor cores: `out[M, N] = A[M, K] · W[N, K]^T (+ bias[N])`, 3xTF32 (machinery and
// geometry in tile_3xtf32.cu, error bound in mod.rs). grid (tiles_m * tiles_n), TF32X3_THREADS
// threads, TF32X3_STAGES x 2 x 16 KiB of dynamic shared memory. `bias` may be null.
// `_vec16`: K % 4 == 0 and a, w 16-byte aligned (16-byte cp.async); `_any_k`: any K.
#define GEMM_F32_PARAMS                                                                                      \
    const float *__restrict__ a, const float *__restrict__ w, const float *__restrict__ bias, float *__restrict__ out, \
        int m, int n, int k
#define GEMM_F32_ARGS a, w, bias, out, m, n, k
template <bool VEC16>
__device__ __forceinline__ void gemm_f32_3xtf32_cta(GEMM_F32_PARAMS) {
    extern __shared__ float4 tf32x3_smem[];
    int tile_m, tile_n;
    tf32x3_tile_of_cta((m + TF32X3_TILE_M - 1) / TF32X3_TILE_M, (n + TF32X3_TILE_N - 1) / TF32X3_TILE_N, tile_m,
                       tile_n);
    const Tf32x3WeightRows<VEC16> weights(w, n, tile_n * TF32X3_TILE_N, k);
    tf32x3_gemm_cta<VEC16, false>(reinterpret_cast<float*>(tf32x3_smem), a, weights, bias, out, m, n, k, tile_m,
                                  tile_n);
}

// Both variants; the suffixes are spelled out (PREFIX##_suffix) so launch_ex.rs's griddep check
// finds every entry point's body.
#define GEMM_F32_ENTRIES(PREFIX)                                                                               \
    extern "C" __global__ void __launch_bounds__(TF32X3_THREADS, 2) PREFIX##_vec16(GEMM_F32_PARAMS) {            \
        griddep_wait();                                                                                        \
        griddep_launch_dependents();                                                                           \
        gemm_f32_3xtf32_cta<true>(GEMM_F32_ARGS);                                                              \
    }                                                                                                          \
    extern "C" __global__ void __launch_bounds__(TF32X3_THREADS, 2) PREFIX##_any_k(GEMM_F32_PARAMS) {            \
        griddep_wait();                                                                                        \
        griddep_launch_dependents();                                                                           \
        gemm_f32_3xtf32_cta<false>(GEMM_F32_ARGS);                                                             \
    }

GEMM_F32_ENTRIES(gemm_f32_3xtf32)

// The plain-f32 paths below accumulate every output by FMA chains in f32 and sum the chains in a
// fixed order (no atomics: the same bits every run); their error bounds are in mod.rs.
// `_vec16`: K % 4 == 0 and a, w (and w2) 16-byte aligned (one float4 of a and of w per step);
// `_any_k`: scalar steps. Either way the lanes of a warp read consecutive addresses of one row.
// Both take an optional second matrix `w2` (null: none) of the same [N, K] shape against the same
// a, written to `out2` (one launch for two projections: Bonsai 2's alpha and beta); the grid
// covers 2N columns then, column c >= N being column c - N of w2 / out2. `bias` applies to the
// first matrix only (the launcher passes none with a second).
#define GEMM_F32_PLAIN_PARAMS                                                                                 \
    const float *__restrict__ a, const float *__restrict__ w, const float *__restrict__ bias, float *__restrict__ out, \
        const float *__restrict__ w2, float *__restrict__ out2, int m, int n, int k
#define GEMM_F32_PLAIN_ARGS a, w, bias, out, w2, out2, m, n, k

// One output column c of the 1 or 2 matrices (c < N, or c < 2N with a second): its weight row,
// output array and bias (null).
struct GemmF32Column {
    const float* w_row;
    float* out;
    const float* bias;
    int col;
    __device__ __forceinline__ GemmF32Column(int c, const float* w, const float* bias_, float* out_, const float* w2,
                                             float* out2, int n, int k) {
        const bool second = c >= n;
        col = second ? c - n : c;
        w_row = (second ? w2 : w) + (long long)col * k;
        out = second ? out2 : out_;
        bias = second ? nullptr : bias_;
    }
    __device__ __forceinline__ void store(int row, int n, float sum) const {
        out[(long long)row * n + col] = bias ? sum + bias[col] : sum;
    }
};

// Products a·w over the steps i = first + j·stride < count (a step is a float4 when VEC4, else a
// float), summed by one FMA chain in step order (within a float4: x, y, z, w). Loads go in
// batches of BATCH steps, all issued before their FMAs: one memory round trip per batch.
template <bool VEC4, int BATCH>
__device__ __forceinline__ float gemm_f32_chain(const float* __restrict__ ar, const float* __restrict__ wr,
                                                int count, int first, int stride) {
    float sum = 0.0f;
    for (int base = first; base < count; base += BATCH * stride) {
        if (VEC4) {
            float4 x[BATCH], y[BATCH];
#pragma unroll
            for (int j = 0; j < BATCH; ++j) {
                const int i = base + j * stride;
                x[j] = i < count ? __ldg(reinterpret_cast<const float4*>(ar) + i) : make_float4(0.f, 0.f, 0.f, 0.f);
                y[j] = i < count ? __ldg(reinterpret_cast<const float4*>(wr) + i) : make_float4(0.f, 0.f, 0.f, 0.f);
            }
#pragma unroll
            for (int j = 0; j < BATCH; ++j) {
                if (base + j * stride >= count) break;
                sum = fmaf(x[j].x, y[j].x, sum);
                sum = fmaf(x[j].y, y[j].y, sum);
                sum = fmaf(x[j].z, y[j].z, sum);
                sum = fmaf(x[j].w, y[j].w, sum);
            }
        } else {
            float x[BATCH], y[BATCH];
#pragma unroll
            for (int j = 0; j < BATCH; ++j) {
                const int i = base + j * stride;
                x[j] = i < count ? __ldg(ar + i) : 0.0f;
                y[j] = i < count ? __ldg(wr + i) : 0.0f;
            }
#pragma unroll
            for (int j = 0; j < BATCH; ++j) {
                if (base + j * stride >= count) break;
                sum = fmaf(x[j], y[j], sum);
            }
        }
    }
    return sum;
}

// The warp's butterfly sum: every lane ends with the same value (the same tree on every lane).
__device__ __forceinline__ float gemm_f32_warp_sum(float v) {
#pragma unroll
    for (int off = WARP_SIZE / 2; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

// Small M (a decode step: Bonsai 2's alpha/beta, M = 1, N = 48, K = 5120): one CTA per output
// column, all GEMM_F32_COLUMN_THREADS threads on its K, so N CTAs (2N with a second matrix) each
// read one weight row at once (a warp per row leaves each warp a long dependent walk over K).
// Thread t's chain covers steps t, t + THREADS, ... (K = 5120: 5 float4s, one load batch); then
// the warp's butterfly, then warps 0..WARPS-1's sums added in order by thread `row`.
// grid (N or 2N), block (GEMM_F32_COLUMN_THREADS), M <= GEMM_F32_COLUMN_MAX_M (the launcher
// checks).
#define GEMM_F32_COLUMN_THREADS 256
#define GEMM_F32_COLUMN_MAX_M 16
#define GEMM_F32_COLUMN_BATCH 8
template <bool VEC4>
__device__ __forceinline__ void gemm_f32_column_cta(GEMM_F32_PLAIN_PARAMS) {
    constexpr int WARPS = GEMM_F32_COLUMN_THREADS / WARP_SIZE;
    __shared__ float warp_sums[GEMM_F32_COLUMN_MAX_M][WARPS];
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const GemmF32Column column(blockIdx.x, w, bias, out, w2, out2, n, k);
    const int steps = VEC4 ? k / 4 : k;
    for (int row = 0; row < m; ++row) {
        const float sum = gemm_f32_warp_sum(gemm_f32_chain<VEC4, GEMM_F32_COLUMN_BATCH>(
            a + (long long)row * k, column.w_row, steps, threadIdx.x, GEMM_F32_COLUMN_THREADS));
        if (lane == 0) warp_sums[row][warp] = sum;
    }
    __syncthreads();
    if (threadIdx.x < m) {
        const int row = threadIdx.x;
        float sum = warp_sums[row][0];
#pragma unroll
        for (int i = 1; i < WARPS; ++i) sum += warp_sums[row][i];
        column.store(row, n, sum);
    }
}

// Large M, small N (a prefill's alpha/beta: M = 512, N = 48, K = 5120): the 128 x 128 tensor-core
// tile would leave the grid M/128 CTAs. Here a CTA tile of GEMM_F32_SMALL_N_TILE_M rows x
// GEMM_F32_SMALL_N_TILE_N columns (M = 512, N = 48: 32 x 4 = 128 CTAs; with a second matrix 256),
// one warp per GEMM_F32_SMALL_N_WARP_M x GEMM_F32_SMALL_N_WARP_N block of it; each lane keeps that
// block's accumulators and walks all of K at a lane stride (a warp step reads 512 contiguous
// bytes of each of its rows of a and w; the CTA's warps share rows through L1), two steps' loads
// in flight; then one butterfly per output. Rows and columns past the output read a valid row
// (the last) and store nothing.
// grid (tiles_m * tiles_n, the CTAs of one row tile adjacent), block (GEMM_F32_SMALL_N_THREADS).
#define GEMM_F32_SMALL_N_WARP_M 4
#define GEMM_F32_SMALL_N_WARP_N 6
#define GEMM_F32_SMALL_N_WARPS_M 4
#define GEMM_F32_SMALL_N_WARPS_N 2
#define GEMM_F32_SMALL_N_TILE_M (GEMM_F32_SMALL_N_WARP_M * GEMM_F32_SMALL_N_WARPS_M)
#define GEMM_F32_SMALL_N_TILE_N (GEMM_F32_SMALL_N_WARP_N * GEMM_F32_SMALL_N_WARPS_N)
#define GEMM_F32_SMALL_N_THREADS (GEMM_F32_SMALL_N_WARPS_M * GEMM_F32_SMALL_N_WARPS_N * WARP_SIZE)
template <bool VEC4>
__device__ __forceinline__ void gemm_f32_small_n_cta(GEMM_F32_PLAIN_PARAMS) {
    constexpr int WM = GEMM_F32_SMALL_N_WARP_M, WN = GEMM_F32_SMALL_N_WARP_N;
    const int cols = w2 ? 2 * n : n;
    const int tiles_n = (cols + GEMM_F32_SMALL_N_TILE_N - 1) / GEMM_F32_SMALL_N_TILE_N;
    const int tile_m = blockIdx.x / tiles_n, tile_n = blockIdx.x % tiles_n;
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const int row0 = tile_m * GEMM_F32_SMALL_N_TILE_M + (warp / GEMM_F32_SMALL_N_WARPS_N) * WM;
    const int col0 = tile_n * GEMM_F32_SMALL_N_TILE_N + (warp % GEMM_F32_SMALL_N_WARPS_N) * WN;
    if (row0 >= m || col0 >= cols) return;  // a whole warp outside the output (no CTA-wide sync below)
    const float* ar[WM];
    const float* wr[WN];
#pragma unroll
    for (int i = 0; i < WM; ++i) ar[i] = a + (long long)min(row0 + i, m - 1) * k;
#pragma unroll
    for (int j = 0; j < WN; ++j) wr[j] = GemmF32Column(min(col0 + j, cols - 1), w, bias, out, w2, out2, n, k).w_row;
    float acc[WM][WN];
    zero_fill(acc);
    if (VEC4) {
#pragma unroll 2
        for (int q = lane; q < k / 4; q += WARP_SIZE) {
            float4 x[WM], y[WN];
#pragma unroll
            for (int i = 0; i < WM; ++i) x[i] = __ldg(reinterpret_cast<const float4*>(ar[i]) + q);
#pragma unroll
            for (int j = 0; j < WN; ++j) y[j] = __ldg(reinterpret_cast<const float4*>(wr[j]) + q);
#pragma unroll
            for (int i = 0; i < WM; ++i)
#pragma unroll
                for (int j = 0; j < WN; ++j) {
                    acc[i][j] = fmaf(x[i].x, y[j].x, acc[i][j]);
                    acc[i][j] = fmaf(x[i].y, y[j].y, acc[i][j]);
                    acc[i][j] = fmaf(x[i].z, y[j].z, acc[i][j]);
                    acc[i][j] = fmaf(x[i].w, y[j].w, acc[i][j]);
                }
        }
    } else {
#pragma unroll 2
        for (int c = lane; c < k; c += WARP_SIZE) {
            float x[WM], y[WN];
#pragma unroll
            for (int i = 0; i < WM; ++i) x[i] = __ldg(ar[i] + c);
#pragma unroll
            for (int j = 0; j < WN; ++j) y[j] = __ldg(wr[j] + c);
#pragma unroll
            for (int i = 0; i < WM; ++i)
#pragma unroll
                for (int j = 0; j < WN; ++j) acc[i][j] = fmaf(x[i], y[j], acc[i][j]);
        }
    }
#pragma unroll
    for (int i = 0; i < WM; ++i)
#pragma unroll
        for (int j = 0; j < WN; ++j) {
            const float sum = gemm_f32_warp_sum(acc[i][j]);
            // Lane i·WN + j stores output (i, j): the stores spread over the warp.
            const int row = row0 + i, c = col0 + j;
            if (lane == i * WN + j && row < m && c < cols)
                GemmF32Column(c, w, bias, out, w2, out2, n, k).store(row, n, sum);
        }
}

// Both plain paths, both variants; suffixes spelled out for launch_ex.rs's griddep check.
extern "C" __global__ void __launch_bounds__(GEMM_F32_COLUMN_THREADS) gemm_f32_rows_column_cta_vec16(GEMM_F32_PLAIN_PARAMS) {
    griddep_wait();
    griddep_launch_dependents();
    gemm_f32_column_cta<true>(GEMM_F32_PLAIN_ARGS);
}
extern "C" __global__ void __launch_bounds__(GEMM_F32_COLUMN_THREADS) gemm_f32_rows_column_cta_any_k(GEMM_F32_PLAIN_PARAMS) {
    griddep_wait();
    griddep_launch_dependents();
    gemm_f32_column_cta<false>(GEMM_F32_PLAIN_ARGS);
}
extern "C" __global__ void __launch_bounds__(GEMM_F32_SMALL_N_THREADS) gemm_f32_small_n_vec16(GEMM_F32_PLAIN_PARAMS) {
    griddep_wait();
    griddep_launch_dependents();
    gemm_f32_small_n_cta<true>(GEMM_F32_PLAIN_ARGS);
}
extern "C" __global__ void __launch_bounds__(GEMM_F32_SMALL_N_THREADS) gemm_f32_small_n_any_k(GEMM_F32_PLAIN_PARAMS) {
    griddep_wait();
    griddep_launch_dependents();
    gemm_f32_small_n_cta<false>(GEMM_F32_PLAIN_ARGS);
}

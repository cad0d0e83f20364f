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
// `_vec16`: K % 4 == 0 and a, w 16-byte aligned (one float4 of a and of w per step); `_any_k`:
// scalar steps. Either way the lanes of a warp read consecutive addresses of one row.

// Products a·w over k = (first + j·stride) for j = 0.. (units of floats, or of float4s when VEC4),
// summed by one FMA chain in k order (within a float4: x, y, z, w).
template <bool VEC4>
__device__ __forceinline__ float gemm_f32_chain(const float* __restrict__ ar, const float* __restrict__ wr, int k,
                                                int first, int stride) {
    float sum = 0.0f;
    if (VEC4) {
        const float4* a4 = reinterpret_cast<const float4*>(ar);
        const float4* w4 = reinterpret_cast<const float4*>(wr);
#pragma unroll 4
        for (int i = first; i < k / 4; i += stride) {
            const float4 x = __ldg(a4 + i), y = __ldg(w4 + i);
            sum = fmaf(x.x, y.x, sum);
            sum = fmaf(x.y, y.y, sum);
            sum = fmaf(x.z, y.z, sum);
            sum = fmaf(x.w, y.w, sum);
        }
    } else {
#pragma unroll 4
        for (int i = first; i < k; i += stride) sum = fmaf(__ldg(ar + i), __ldg(wr + i), sum);
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
// column n, all GEMM_F32_COLUMN_THREADS threads on its K, so N CTAs each read one weight row
// (N = 48: 48 SMs issue every load of the 983 KB matrix at once; a warp per row leaves each warp
// a long dependent walk over K). Thread t's chain covers float4s (or floats) t, t + THREADS, ...;
// then the warp's butterfly, then warp 0..WARPS-1's sums added in order by thread `row`.
// grid (N), block (GEMM_F32_COLUMN_THREADS), M <= GEMM_F32_COLUMN_MAX_M (the launcher checks).
#define GEMM_F32_COLUMN_THREADS 256
#define GEMM_F32_COLUMN_MAX_M 16
template <bool VEC4>
__device__ __forceinline__ void gemm_f32_column_cta(GEMM_F32_PARAMS) {
    constexpr int WARPS = GEMM_F32_COLUMN_THREADS / WARP_SIZE;
    __shared__ float warp_sums[GEMM_F32_COLUMN_MAX_M][WARPS];
    const int col = blockIdx.x, lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const float* wr = w + (long long)col * k;
    for (int row = 0; row < m; ++row) {
        const float sum = gemm_f32_warp_sum(
            gemm_f32_chain<VEC4>(a + (long long)row * k, wr, k, threadIdx.x, GEMM_F32_COLUMN_THREADS));
        if (lane == 0) warp_sums[row][warp] = sum;
    }
    __syncthreads();
    if (threadIdx.x < m) {
        const int row = threadIdx.x;
        float sum = warp_sums[row][0];
#pragma unroll
        for (int i = 1; i < WARPS; ++i) sum += warp_sums[row][i];
        out[(long long)row * n + col] = bias ? sum + bias[col] : sum;
    }
}

// Large M, small N (a prefill's alpha/beta: M = 512, N = 48, K = 5120): the 128 x 128 tensor-core
// tile would leave the grid M/128 CTAs. Here a CTA tile of GEMM_F32_SMALL_N_TILE_M rows x
// GEMM_F32_SMALL_N_TILE_N columns (M = 512, N = 48: 32 x 4 = 128 CTAs), one warp per
// GEMM_F32_SMALL_N_WARP_M x GEMM_F32_SMALL_N_WARP_N block of it; each lane keeps that block's
// accumulators and walks all of K at a lane stride (a warp step reads 512 contiguous bytes of
// each of its rows of a and w; the CTA's warps share rows through L1), then one butterfly per
// output. Rows and columns past M and N read a valid row (the last) and store nothing.
// grid (tiles_m * tiles_n, CTAs of one row tile adjacent), block (GEMM_F32_SMALL_N_THREADS).
#define GEMM_F32_SMALL_N_WARP_M 4
#define GEMM_F32_SMALL_N_WARP_N 6
#define GEMM_F32_SMALL_N_WARPS_M 4
#define GEMM_F32_SMALL_N_WARPS_N 2
#define GEMM_F32_SMALL_N_TILE_M (GEMM_F32_SMALL_N_WARP_M * GEMM_F32_SMALL_N_WARPS_M)
#define GEMM_F32_SMALL_N_TILE_N (GEMM_F32_SMALL_N_WARP_N * GEMM_F32_SMALL_N_WARPS_N)
#define GEMM_F32_SMALL_N_THREADS (GEMM_F32_SMALL_N_WARPS_M * GEMM_F32_SMALL_N_WARPS_N * WARP_SIZE)
template <bool VEC4>
__device__ __forceinline__ void gemm_f32_small_n_cta(GEMM_F32_PARAMS) {
    constexpr int WM = GEMM_F32_SMALL_N_WARP_M, WN = GEMM_F32_SMALL_N_WARP_N;
    const int tiles_n = (n + GEMM_F32_SMALL_N_TILE_N - 1) / GEMM_F32_SMALL_N_TILE_N;
    const int tile_m = blockIdx.x / tiles_n, tile_n = blockIdx.x % tiles_n;
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const int row0 = tile_m * GEMM_F32_SMALL_N_TILE_M + (warp / GEMM_F32_SMALL_N_WARPS_N) * WM;
    const int col0 = tile_n * GEMM_F32_SMALL_N_TILE_N + (warp % GEMM_F32_SMALL_N_WARPS_N) * WN;
    if (row0 >= m || col0 >= n) return;  // a whole warp outside the output (no CTA-wide sync below)
    const float* ar[WM];
    const float* wr[WN];
#pragma unroll
    for (int i = 0; i < WM; ++i) ar[i] = a + (long long)min(row0 + i, m - 1) * k;
#pragma unroll
    for (int j = 0; j < WN; ++j) wr[j] = w + (long long)min(col0 + j, n - 1) * k;
    float acc[WM][WN];
    zero_fill(acc);
    if (VEC4) {
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
            const int row = row0 + i, col = col0 + j;
            if (lane == i * WN + j && row < m && col < n)
                out[(long long)row * n + col] = bias ? sum + bias[col] : sum;
        }
}

// Both plain paths, both variants; suffixes spelled out for launch_ex.rs's griddep check.
extern "C" __global__ void __launch_bounds__(GEMM_F32_COLUMN_THREADS) gemm_f32_rows_column_cta_vec16(GEMM_F32_PARAMS) {
    griddep_wait();
    griddep_launch_dependents();
    gemm_f32_column_cta<true>(GEMM_F32_ARGS);
}
extern "C" __global__ void __launch_bounds__(GEMM_F32_COLUMN_THREADS) gemm_f32_rows_column_cta_any_k(GEMM_F32_PARAMS) {
    griddep_wait();
    griddep_launch_dependents();
    gemm_f32_column_cta<false>(GEMM_F32_ARGS);
}
extern "C" __global__ void __launch_bounds__(GEMM_F32_SMALL_N_THREADS) gemm_f32_small_n_vec16(GEMM_F32_PARAMS) {
    griddep_wait();
    griddep_launch_dependents();
    gemm_f32_small_n_cta<true>(GEMM_F32_ARGS);
}
extern "C" __global__ void __launch_bounds__(GEMM_F32_SMALL_N_THREADS) gemm_f32_small_n_any_k(GEMM_F32_PARAMS) {
    griddep_wait();
    griddep_launch_dependents();
    gemm_f32_small_n_cta<false>(GEMM_F32_ARGS);
}

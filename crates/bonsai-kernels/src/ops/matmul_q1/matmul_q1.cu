// 1-bit matmul entry points, and the macro every quantized matmul file instantiates. The kernel
// templates are in matmul_gemv.cu + matmul_gemv_stream.cu (decode) and matmul_gemm.cu +
// matmul_gemm_f16.cu (prefill), concatenated before.

// gemv_stream's rows per warp and ring stages per bit width (the launcher's STREAM_* constants
// must match). Chosen in scripts/lab (docs/kernel-notes.md).
#define STREAM_ROWS 4
#define STREAM_STAGES 4

// Entry points. `n_out` is N for plain/add and F (features) for SwiGLU; y is [m, n_out].
#define DEFINE_MATMUL_ENTRY_POINTS(PREFIX, BITS, MODE)                                           \
    extern "C" __global__ void __launch_bounds__(STREAM_MAX_THREADS)                             \
        PREFIX##_gemv_stream(const u16* scales, const u32* payload, const float* x, float* y,    \
                             int n_out, int k, int splits) {                                     \
        griddep_wait();                                                                  \
        griddep_launch_dependents();                                                     \
        gemv_stream<BITS, MODE, STREAM_ROWS, STREAM_STAGES>(scales, payload, x, y, n_out, k,     \
                                                            splits);                             \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(GEMV_WARPS * WARP_SIZE)                         \
        PREFIX##_gemv_rows8_split_k(const u16* scales, const u32* payload, const float* x,       \
                                    int m, float* y, int n_out, int k) {                         \
        griddep_wait();                                                                  \
        griddep_launch_dependents();                                                     \
        gemv_rows8_split_k<BITS, MODE, 1>(scales, payload, x, m, y, n_out, k);                   \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(GEMV_WARPS * WARP_SIZE)                         \
        PREFIX##_gemv_rows8_split_k_tokens8(const u16* scales, const u32* payload,               \
                                            const float* x, int m, float* y, int n_out, int k) { \
        griddep_wait();                                                                  \
        griddep_launch_dependents();                                                     \
        gemv_rows8_split_k<BITS, MODE, GEMV_MAX_TOKENS>(scales, payload, x, m, y, n_out, k);     \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(GEMM_THREADS)                                   \
        PREFIX##_gemm_tile64_simt(const u16* scales, const u32* payload, const float* x, int m,  \
                                  float* y, int n_out, int k) {                                  \
        griddep_wait();                                                                  \
        griddep_launch_dependents();                                                     \
        gemm_tile64_simt<BITS, MODE>(scales, payload, x, m, y, n_out, k);                        \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(MMA_THREADS)                                    \
        PREFIX##_gemm_mma_bf16x3(const u16* scales, const u32* payload, const float* x, int m,   \
                                 float* y, int n_out, int k) {                                   \
        griddep_wait();                                                                  \
        griddep_launch_dependents();                                                     \
        gemm_mma_bf16x3<BITS, MODE>(scales, payload, x, m, y, n_out, k);                         \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(QG_WARPS_M * 2 * WARP_SIZE)                     \
        PREFIX##_gemm_f16_128x128(const u16* scales, const u32* payload, const u16* xh,          \
                                  const float* row_unscale, int m, float* y, int n_out, int k) { \
        griddep_wait();                                                                          \
        griddep_launch_dependents();                                                             \
        gemm_f16_mma<BITS, MODE, 2>(scales, payload, xh, row_unscale, m, y, n_out, k);           \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(QG_WARPS_M * 4 * WARP_SIZE)                     \
        PREFIX##_gemm_f16_128x256(const u16* scales, const u32* payload, const u16* xh,          \
                                  const float* row_unscale, int m, float* y, int n_out, int k) { \
        griddep_wait();                                                                          \
        griddep_launch_dependents();                                                             \
        gemm_f16_mma<BITS, MODE, 4>(scales, payload, xh, row_unscale, m, y, n_out, k);           \
    }

DEFINE_MATMUL_ENTRY_POINTS(matmul_q1, 1, MATMUL_STORE)
DEFINE_MATMUL_ENTRY_POINTS(matmul_q1_add, 1, MATMUL_ADD)

// Quantized matmul Y[m, N] (=|+=) X[m, K] . W[N, K]^T, W as uploaded by crate::cuda::weights:
// scales f16 [N * K/128] (row-major over groups), payload u32 words in the device layout of
// weight_layout.cu. This file holds the constants and epilogue modes shared by every quantized
// matmul (1-bit and 2-bit, plain, fused residual, fused gate|up SwiGLU); the kernels are
// matmul_gemv_b1.cu / matmul_gemv_tc.cu (one token, tensor cores; gemv_b1 also 2..8 tokens of a
// batched decode step), matmul_gemm_small.cu (2..32 tokens) and the prefill GEMMs: `gemm_mma_bf16x3` (matmul_gemm.cu), the
// f16 mma.sync GEMM (matmul_gemm_f16.cu) and the wgmma GEMM (matmul_gemm_wgmma.cu);
// matmul_q1.cu, matmul_q2.cu and the gate_up_swiglu files only instantiate them.

#define GROUP_SIZE 128
#define GEMV_MAX_TOKENS 1

// The split-K GEMMs' arrival (gemm_f16_mma, gemm_wgmma, gemm_small), after every thread stored
// its partial: counts the CTA in at `counter` (zeroed by the launcher) and returns true in every
// thread of the CTA that arrived last of `splits`, whose reads of the others' partials are then
// ordered after their stores; false in the others, which are done.
__device__ __forceinline__ bool split_k_arrived_last(unsigned* __restrict__ counter, unsigned splits) {
    __shared__ int arrived_last;
    __threadfence();  // this thread's partial is visible device-wide before the CTA is counted
    __syncthreads();
    if (threadIdx.x == 0) arrived_last = atomicAdd(counter, 1u) == splits - 1;
    __syncthreads();
    if (!arrived_last) return false;
    __threadfence();  // the other splits' partials, counted before this CTA, are read after it
    return true;
}

// How a matmul's result leaves the kernel.
#define MATMUL_STORE 0   // y = W.x
#define MATMUL_ADD 1     // y += W.x (fused residual)
#define MATMUL_SWIGLU 2  // rows [0, F) gate, [F, 2F) up; out[f] = silu(gate) * up

// Fused gate|up 1-bit matmul + SwiGLU: W [2F, K] (rows [0, F) gate, [F, 2F) up),
// out[i, f] = silu(gate) * up. Kernels in matmul_gemv.cu / matmul_gemm.cu (MATMUL_SWIGLU epilogue).
DEFINE_MATMUL_ENTRY_POINTS(gate_up_swiglu_q1, 1, MATMUL_SWIGLU)

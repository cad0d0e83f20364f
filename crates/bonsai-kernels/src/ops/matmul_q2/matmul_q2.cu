// 2-bit (code c -> (c - 1) * d) matmul entry points; the kernels live in matmul_gemv.cu and
// matmul_gemm.cu, the macro in matmul_q1.cu.
DEFINE_MATMUL_ENTRY_POINTS(matmul_q2, 2, MATMUL_STORE)
DEFINE_MATMUL_ENTRY_POINTS(matmul_q2_add, 2, MATMUL_ADD)
DEFINE_B1_ROPE_ENTRY_POINT(matmul_q2, 2)
DEFINE_B1_PAIR_ENTRY_POINT(matmul_q2, 2)
DEFINE_WGMMA_PAIR_ENTRY_POINTS(matmul_q2, 2)

// Fused gate|up 2-bit matmul + SwiGLU; see gate_up_swiglu_q1.cu.
DEFINE_MATMUL_ENTRY_POINTS(gate_up_swiglu_q2, 2, MATMUL_SWIGLU)

//! Which kernel serves a one-token decode GEMV.

use crate::launch::QWeightsView;

/// Bits per element of x in the binary GEMV's integer planes (B1_PLANES in matmul_gemv_b1.cu):
/// the quantization step verify's GEMV bound and `bonsai check`'s logit bound are derived from.
pub const B1_ACTIVATION_BITS: u32 = 8 * super::B1_WORDS as u32;

/// The kernel of a one-token GEMV (2 tokens and more run a GEMM).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GemvKernel {
    /// `*_gemv_b1` (matmul_gemv_b1.cu, the default): x quantized per 128-group to 16-bit
    /// integers (|error| <= s_G / 2 per element, s_G <= 2^-13 max|x_G|), dot products exact in
    /// integers on the binary tensor core (`mma.sync m16n8k128 b1 and.popc`), one f32 rounding
    /// per (row, group), then f32 sums.
    Binary,
    /// `*_gemv_tc` (matmul_gemv_tc.cu): bf16 mma with x split into three bf16 parts (f32-level).
    /// It serves the matrices the binary kernel cannot.
    Bf16x3,
}

/// The kernel a one-token GEMV of `w` runs: the binary kernel serves Q1 and ternary Q2 matrices
/// only, so a Q2 matrix with +2d weights (code 3, which Q2_0 allows) runs `gemv_tc`, whose
/// arithmetic covers every code.
pub fn gemv_for(w: &QWeightsView<'_>) -> GemvKernel {
    route(w.binary_gemv_ok())
}

fn route(binary_ok: bool) -> GemvKernel {
    if binary_ok {
        GemvKernel::Binary
    } else {
        GemvKernel::Bf16x3
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_matrices_the_binary_kernel_cannot_serve_take_gemv_tc() {
        assert_eq!(route(true), GemvKernel::Binary);
        assert_eq!(route(false), GemvKernel::Bf16x3);
    }
}

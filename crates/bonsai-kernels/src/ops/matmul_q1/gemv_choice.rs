//! Which kernel serves a one-token decode GEMV, and `BONSAI_GEMV`, the switch between them.

use std::sync::OnceLock;

use crate::launch::{shape, LaunchError, QWeightsView};

/// The environment variable that selects the one-token GEMV kernel.
pub const GEMV_VAR: &str = "BONSAI_GEMV";
/// Its one accepted value: the bf16 tensor-core kernel (`gemv_tc`), kept for comparison.
pub const GEMV_BF16X3: &str = "tc";

/// Bits per element of x in the binary GEMV's integer planes (B1_PLANES in matmul_gemv_b1.cu):
/// the quantization step verify's GEMV bound and `bonsai check`'s logit bound are derived from.
pub const B1_ACTIVATION_BITS: u32 = 8 * super::B1_WORDS as u32;

/// The kernel of a one-token GEMV (2..=8 tokens always run `gemv_tc_tokens8`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GemvKernel {
    /// `*_gemv_b1` (matmul_gemv_b1.cu, the default): x quantized per 128-group to 16-bit
    /// integers (|error| <= s_G / 2 per element, s_G <= 2^-13 max|x_G|), dot products exact in
    /// integers on the binary tensor core (`mma.sync m16n8k128 b1 and.popc`), one f32 rounding
    /// per (row, group), then f32 sums.
    Binary,
    /// `*_gemv_tc` (matmul_gemv_tc.cu): bf16 mma with x split into three bf16 parts (f32-level).
    Bf16x3,
}

/// The one-token GEMV kernel `BONSAI_GEMV` selects, read once per process.
pub fn gemv_kernel_from_env() -> Result<GemvKernel, LaunchError> {
    static CHOICE: OnceLock<Result<GemvKernel, String>> = OnceLock::new();
    let choice = CHOICE.get_or_init(|| parse_gemv_kernel(std::env::var(GEMV_VAR).ok().as_deref()));
    choice.clone().map_err(|detail| shape("matmul", detail))
}

/// The kernel a one-token GEMV of `w` runs by default when `choice` is the process's choice
/// ([`gemv_kernel_from_env`]): the binary kernel serves Q1 and ternary Q2 matrices only, so a Q2
/// matrix with +2d weights (code 3, which Q2_0 allows) runs `gemv_tc`, whose arithmetic covers
/// every code. An explicit kernel request is never rerouted (the binary launchers refuse such
/// a matrix instead).
pub fn gemv_for(choice: GemvKernel, w: &QWeightsView<'_>) -> GemvKernel {
    route(choice, w.binary_gemv_ok())
}

fn route(choice: GemvKernel, binary_ok: bool) -> GemvKernel {
    if choice == GemvKernel::Binary && !binary_ok {
        GemvKernel::Bf16x3
    } else {
        choice
    }
}

/// `None` (unset) is the binary kernel, `tc` the bf16 one; anything else an error message naming
/// the variable.
pub fn parse_gemv_kernel(value: Option<&str>) -> Result<GemvKernel, String> {
    match value {
        None => Ok(GemvKernel::Binary),
        Some(GEMV_BF16X3) => Ok(GemvKernel::Bf16x3),
        Some(other) => Err(format!("{GEMV_VAR}={other:?} is not supported (set it to {GEMV_BF16X3:?} or leave it unset)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_binary_choice_is_rerouted_and_only_for_matrices_it_cannot_serve() {
        assert_eq!(route(GemvKernel::Binary, true), GemvKernel::Binary);
        assert_eq!(route(GemvKernel::Binary, false), GemvKernel::Bf16x3);
        assert_eq!(route(GemvKernel::Bf16x3, true), GemvKernel::Bf16x3);
        assert_eq!(route(GemvKernel::Bf16x3, false), GemvKernel::Bf16x3);
    }

    #[test]
    fn the_switch_parses_its_values_and_rejects_others() {
        assert_eq!(parse_gemv_kernel(None), Ok(GemvKernel::Binary));
        assert_eq!(parse_gemv_kernel(Some("tc")), Ok(GemvKernel::Bf16x3));
        let err = parse_gemv_kernel(Some("b2")).expect_err("unknown value");
        assert!(err.contains("BONSAI_GEMV") && err.contains("b2"), "{err}");
    }
}

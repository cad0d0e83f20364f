//! Which kernel serves a one-token decode GEMV, and `BONSAI_GEMV`, the switch between them.

use std::sync::OnceLock;

use crate::launch::{shape, LaunchError};

/// The environment variable that selects the one-token GEMV kernel.
pub const GEMV_VAR: &str = "BONSAI_GEMV";
/// Its value for the bf16 tensor-core kernel (`gemv_tc`), kept for comparison.
pub const GEMV_BF16X3: &str = "tc";
/// Its value for the register-ring binary kernel (`gemv_b1`) at every shape.
pub const GEMV_BINARY_RING: &str = "b1";
/// Its value for the staged binary kernel (`gemv_b1s`) wherever its geometry fits.
pub const GEMV_BINARY_STAGED: &str = "b1s";

/// The kernel of a one-token GEMV (2..=8 tokens always run `gemv_tc_tokens8`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GemvKernel {
    /// `*_gemv_b1` (matmul_gemv_b1.cu, the default): x quantized per 128-group to 24-bit
    /// integers (|error| <= s_G / 2 per element, s_G <= 2^-21 max|x_G|), dot products exact in
    /// integers on the binary tensor core (`mma.sync m16n8k256 b1 and.popc`), one f32 rounding
    /// per (row, group), then f32 sums.
    Binary,
    /// `*_gemv_b1s` (matmul_gemv_b1_staged.cu): gemv_b1's arithmetic with the CTA's weights
    /// copied into shared memory before it waits for its input, half an SM per CTA, so the next
    /// GEMV's CTAs stage their weights while this one runs. Shapes without a staged geometry
    /// (`b1s_geometry`: K not a multiple of 512, the LM heads) run `*_gemv_b1`.
    BinaryStaged,
    /// `*_gemv_tc` (matmul_gemv_tc.cu): bf16 mma with x split into three bf16 parts (f32-level).
    Bf16x3,
}

/// The one-token GEMV kernel `BONSAI_GEMV` selects, read once per process.
pub fn gemv_kernel_from_env() -> Result<GemvKernel, LaunchError> {
    static CHOICE: OnceLock<Result<GemvKernel, String>> = OnceLock::new();
    let choice = CHOICE.get_or_init(|| parse_gemv_kernel(std::env::var(GEMV_VAR).ok().as_deref()));
    choice.clone().map_err(|detail| shape("matmul", detail))
}

/// `None` (unset) is the default binary kernel, `b1` / `b1s` / `tc` force one; anything else an
/// error message naming the variable.
pub fn parse_gemv_kernel(value: Option<&str>) -> Result<GemvKernel, String> {
    match value {
        None => Ok(DEFAULT_GEMV),
        Some(GEMV_BINARY_RING) => Ok(GemvKernel::Binary),
        Some(GEMV_BINARY_STAGED) => Ok(GemvKernel::BinaryStaged),
        Some(GEMV_BF16X3) => Ok(GemvKernel::Bf16x3),
        Some(other) => Err(format!(
            "{GEMV_VAR}={other:?} is not supported (set it to {GEMV_BINARY_RING:?}, {GEMV_BINARY_STAGED:?} or \
             {GEMV_BF16X3:?}, or leave it unset)"
        )),
    }
}

/// The one-token GEMV when `BONSAI_GEMV` is unset.
pub const DEFAULT_GEMV: GemvKernel = GemvKernel::Binary;

impl GemvKernel {
    /// Either binary kernel (the planes decode path takes both).
    pub fn is_binary(self) -> bool {
        matches!(self, GemvKernel::Binary | GemvKernel::BinaryStaged)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_switch_parses_its_values_and_rejects_others() {
        assert_eq!(parse_gemv_kernel(None), Ok(DEFAULT_GEMV));
        assert_eq!(parse_gemv_kernel(Some("b1")), Ok(GemvKernel::Binary));
        assert_eq!(parse_gemv_kernel(Some("b1s")), Ok(GemvKernel::BinaryStaged));
        assert_eq!(parse_gemv_kernel(Some("tc")), Ok(GemvKernel::Bf16x3));
        let err = parse_gemv_kernel(Some("b2")).expect_err("unknown value");
        assert!(err.contains("BONSAI_GEMV") && err.contains("b2"), "{err}");
    }
}

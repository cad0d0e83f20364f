//! `gated_rms_norm`: per head of d values (d = `weight.len()`),
//! `y_h = RMSNorm(x_h; weight, eps) ⊙ silu(z_h)`, i.e.
//! `y_j = x_j·w_j / sqrt(mean_h(x²) + eps) · z_j·sigmoid(z_j)` (the Gated DeltaNet's output norm,
//! reference/bonsai2.md §3.6 step 8; `ssm_norm.weight` is used as stored, with no +1).
//!
//! Shapes: `x, z, y: [rows·heads, d]` f32 (any number of heads, each normalised on its own),
//! `weight: [d]`, d > 0. Accumulation: reference in f64; CPU in f32 (`rms_norm`'s row kernel, then
//! `silu`'s f32 form).
//!
//! Tolerance (tests.rs): the norm's relative error is rms_norm's γ_{d+1}/2 + 7u (its doc), silu's
//! 5u, the product u and the reference's rounding u: the test allows (γ_{d+1} + 16u)·|y| plus the
//! smallest normal f32 (silu's subnormal tail, see `ops::silu`).
//!
//! Speed of light on the H200: 12 bytes per element (read x and z, write y): a decode row of
//! 48 heads of 128 is 74 KB -> 17 ns at 4.3 TB/s (launch-bound). CUDA (cuda.rs,
//! gated_rms_norm.cu): one warp per head.

mod cpu;
mod reference;
#[cfg(test)]
mod tests;

pub use cpu::cpu;
pub use reference::reference;

use crate::ops::{check_len, OpError};

/// The op's name in error messages.
pub(crate) const OP: &str = "gated_rms_norm";

/// Checks `weight: [d]`, d > 0, `x: [heads, d]`, `z` and `y` as long as x.
pub(crate) fn check_shapes(x: &[f32], z: &[f32], weight: &[f32], y: &[f32]) -> Result<(), OpError> {
    let d = weight.len();
    if d == 0 || x.len() % d != 0 {
        return Err(OpError::Shape { op: OP, detail: format!("x length {} is not a whole number of heads of {d}", x.len()) });
    }
    check_len(OP, "z", x.len(), z.len())?;
    check_len(OP, "y", x.len(), y.len())
}

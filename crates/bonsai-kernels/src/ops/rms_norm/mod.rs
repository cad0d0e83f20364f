//! `rms_norm`: per row of n, `y_j = x_j · w_j / sqrt(mean(x²) + eps)` (Qwen3RMSNorm).
//!
//! Shapes: `x, y: [rows, n]` f32, `weight: [n]` f32, n > 0.
//! Accumulation: reference in f64; CPU in f32 (8-lane sum of squares).
//!
//! Tolerance (tests.rs), relative to |x_j·w_j·r| with r the exact 1/sqrt(mean + eps): the sum of
//! n non-negative squares (each rounded) is within γ_{n+1} relative; /n, +eps: 2u; sqrt halves
//! the relative error and adds u; the reciprocal u; two multiplies 2u; the reference's rounding u.
//! So <= γ_{n+1}/2 + 7u; the test allows γ_{n+1} + 8u.
//!
//! Speed of light on the H200: 8 bytes per element (read x, write y; the weight stays cached):
//! hidden 4096 is 33 KB -> 8 ns at 4.3 TB/s (launch-bound; fuse where possible). CUDA: see cuda.rs.

mod cpu;
mod reference;
#[cfg(test)]
mod tests;

pub(crate) use cpu::normalize_row_generic;
pub use cpu::{cpu, cpu_at};
pub use reference::reference;

use crate::ops::{check_len, OpError};

/// The op's name in error messages.
pub(crate) const OP: &str = "rms_norm";

/// Checks `weight: [n]`, n > 0, `x: [rows, n]`, `y` as long as x.
pub(crate) fn check_shapes(x: &[f32], weight: &[f32], y: &[f32]) -> Result<(), OpError> {
    let n = weight.len();
    if n == 0 || x.len() % n != 0 {
        return Err(OpError::Shape {
            op: OP,
            detail: format!("x length {} is not a whole number of rows of {n}", x.len()),
        });
    }
    check_len(OP, "y", x.len(), y.len())
}

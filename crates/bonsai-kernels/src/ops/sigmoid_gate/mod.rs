//! `sigmoid_gate`: elementwise `y = x ⊙ sigmoid(g)`, the full-attention layer's output gate
//! (reference/bonsai2.md §3.5 step 5).
//!
//! Shapes: `x, g, y: [len]` f32, len may be 0. Form: with `e = exp(−|g|)` (never overflows),
//! `sigmoid(g) = 1/(1+e)` for g >= 0 and `e/(1+e)` below. Accumulation: reference in f64, one
//! rounding; CPU in f32.
//!
//! Tolerance (tests.rs): exp 2u, the add, the divide and the product u each: 5u·|y| to first
//! order, the reference's rounding u: the test allows 8u·|y| plus the smallest normal f32 (for
//! g below about −87, e is subnormal; see `ops::silu`).
//!
//! Speed of light on the H200: 12 bytes per element (read x and g, write y): a decode row of
//! 6144 is 74 KB -> 17 ns at 4.3 TB/s (launch-bound). CUDA (cuda.rs, sigmoid_gate.cu): a
//! grid-stride loop, the same stable form.

mod cpu;
mod reference;
#[cfg(test)]
mod tests;

pub use cpu::cpu;
pub use reference::reference;

use crate::ops::{check_len, OpError};

/// The op's name in error messages.
pub(crate) const OP: &str = "sigmoid_gate";

/// Checks `g` and `y` as long as `x`.
pub(crate) fn check_shapes(x: &[f32], g: &[f32], y: &[f32]) -> Result<(), OpError> {
    check_len(OP, "g", x.len(), g.len())?;
    check_len(OP, "y", x.len(), y.len())
}

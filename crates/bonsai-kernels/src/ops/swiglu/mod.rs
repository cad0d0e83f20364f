//! `swiglu`: `out[i, f] = silu(g)·u` with `g = gate_up[i, f]`, `u = gate_up[i, F + f]`,
//! `silu(g) = g / (1 + e^−g)`.
//!
//! Shapes: `gate_up: [M, 2F]` (each row: F gate values then F up values), `out: [M, F]`.
//! Accumulation: reference in f64, one rounding; CPU in f32.
//!
//! Tolerance (tests.rs): the f32 epilogue is exp (within 2u relative), an add, a divide and a
//! multiply: <= 5u relative to |out| to first order; the reference's rounding adds u; the test
//! allows 8u·|out| (+ the smallest normal, for results that underflow).
//!
//! Speed of light on the H200: 12 bytes per output (read g and u, write out): M = 1, F = 12288
//! is 147 KB -> 34 ns at 4.3 TB/s. CUDA: see cuda.rs.

mod cpu;
mod reference;
#[cfg(test)]
mod tests;

pub use cpu::{cpu, cpu_at};
pub use reference::reference;

use crate::ops::{check_len, OpError};

/// The op's name in error messages.
pub(crate) const OP: &str = "swiglu";

/// Checks `gate_up: [m, 2F]`, `out: [m, F]`; returns F.
pub(crate) fn check_shapes(gate_up: &[f32], m: usize, out: &[f32]) -> Result<usize, OpError> {
    if m == 0 {
        check_len(OP, "gate_up", 0, gate_up.len())?;
        check_len(OP, "out", 0, out.len())?;
        return Ok(0);
    }
    let f_len = out.len() / m;
    check_len(OP, "out", m * f_len, out.len())?;
    check_len(OP, "gate_up", 2 * m * f_len, gate_up.len())?;
    Ok(f_len)
}

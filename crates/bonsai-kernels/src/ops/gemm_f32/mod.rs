//! `gemm_f32`: `out[M, N] = A[M, K] · W[N, K]^T (+ bias[N])`, f32 in and out (the f32-accurate
//! GEMM of the Bonsai-Image text encoder and VAE).
//!
//! Shapes: `a: [M, K]` row-major (K contiguous), `w: [N, K]` (K contiguous, PyTorch Linear
//! layout), optional `bias: [N]`, `out: [M, N]`; M, N, K > 0.
//! Accumulation: reference in f64; CPU in f32 over `LANES` = 8 interleaved accumulators.
//!
//! Tolerance (tests.rs): the CPU sum of the K products plus the bias is an f32 summation tree of
//! height <= K/LANES + LANES + 2 <= K + LANES + 2, so it errs by at most
//! γ_{K+LANES+2}·(Σ_k |a·w| + |bias|) (Higham, any order, FMA or not); the reference's rounding
//! to f32 adds u·|out|.
//!
//! CPU: rayon over blocks of M rows × N columns (a W block stays in cache while each A row of the
//! block passes over it). CUDA: not yet.

mod cpu;
mod reference;
#[cfg(test)]
mod tests;

pub use cpu::{cpu, cpu_at};
pub use reference::reference;

use crate::ops::{check_len, OpError};

/// The op's name in error messages.
pub(crate) const OP: &str = "gemm_f32";

/// Matrix sizes: `out[m, n] = a[m, k] · w[n, k]^T`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmDims {
    pub m: usize,
    pub n: usize,
    pub k: usize,
}

/// Checks every length against `dims` and that no dimension is zero.
pub(crate) fn check_shapes(
    dims: GemmDims,
    a: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    out: &[f32],
) -> Result<(), OpError> {
    let GemmDims { m, n, k } = dims;
    if m == 0 || n == 0 || k == 0 {
        return Err(OpError::Shape { op: OP, detail: format!("empty shape {dims:?}") });
    }
    let too_big = || OpError::Shape { op: OP, detail: format!("shape {dims:?} overflows usize") };
    check_len(OP, "a", m.checked_mul(k).ok_or_else(too_big)?, a.len())?;
    check_len(OP, "w", n.checked_mul(k).ok_or_else(too_big)?, w.len())?;
    if let Some(b) = bias {
        check_len(OP, "bias", n, b.len())?;
    }
    check_len(OP, "out", m.checked_mul(n).ok_or_else(too_big)?, out.len())
}

//! `gate_up_swiglu_q2`: the fused FFN input, `out[i, f] = silu(g)·u` with
//! `g = Σ_k W[f, k]·x[i, k]` (gate) and `u = Σ_k W[F + f, k]·x[i, k]` (up),
//! `silu(g) = g / (1 + e^−g)`.
//!
//! Shapes: `W[2F, K]` a 2-bit [`Q2Matrix`](crate::weights::Q2Matrix) holding the gate rows 0..F then the up rows F..2F
//! (concatenated at load), `x: [M, K]` f32, `out: [M, F]` f32. N = 2F must be even.
//!
//! Accumulation: reference in f64 (g, u and silu(g)·u, one rounding); CPU as `matmul_q2` in f32,
//! then silu·u in f32.
//!
//! Tolerance (tests.rs): δg = 2γ_{K+128}·A_g + u|g| (the matmul bound, A_g = Σ|W·x| over the gate
//! row), δu likewise. |silu'| <= 1.1 everywhere, so the product errs by at most
//! 1.1·δg·(|u| + δu) + (|silu(g)| + 1.1·δg)·δu, plus the f32 epilogue (exp within 2u relative,
//! then an add, a divide and a multiply: <= 5u) and the reference's rounding: 8u·|out| allowed.
//!
//! Speed of light on the H200: the matmul's weight bytes, 0.2656 bytes/weight over 2F·K weights
//! (Bonsai-8B F = 12288, K = 4096: 26.7 MB -> 6.2 µs at 4.3 TB/s); prefill 4·M·F·K FLOPs.
//! CUDA: see cuda.rs.

#[cfg(test)]
mod tests;

/// The entry points, shared with the other weight format ([`crate::ops::quant_ops`]).
pub use crate::ops::quant_ops::gate_up_swiglu::{cpu, cpu_at, reference};

/// The op's name in error messages.
pub(crate) const OP: &str = "gate_up_swiglu_q2";

//! `joint_attention`: non-causal multi-head attention over one joint (text + image) sequence:
//! `out[i, h·hd + d] = Σ_j softmax_j(q[h, i]·k[h, j] / sqrt(hd)) · v[h, j, d]`, every query
//! attending to all `seq` keys of its head (Bonsai-Image's DiT and the VAE mid-block).
//!
//! Shapes: `q, k, v: [H, seq, hd]` f32 (head-major), `out: [seq, H·hd]` f32 (token-major);
//! H, seq, hd > 0. The image model uses hd ∈ {64, 128, 384, 512}; the CPU path takes any hd.
//! Accumulation: reference in f64 (exact softmax); CPU in f32 with an online softmax over
//! [`KEY_BLOCK`]-key blocks (one rescale per block at most).
//!
//! Tolerance (tests.rs), per query with S = max_j |s_j| (exact scores s_j) and
//! R = ceil(seq / KEY_BLOCK) rescales at most:
//! - a computed score errs by ε_s <= scale·γ_{hd+LANES+2}·Σ_d|q·k|·(1 + 2u) + 2u·|s_j| (dot
//!   product, the rounded 1/sqrt(hd), the multiply); `s − m` rounds by u·2S;
//! - a rescale factor exp(m_old − m_new) errs by 2u·S (argument) + 2u (exp, glibc expf < 1 ulp)
//!   and only the keys seen before it carry it, so after R rescales the effective logit of any
//!   key is off by at most ε = max ε_s + 2u·S + R·(2u·S + 2u) + 2u (its own exp);
//! - the normalised weights P̂_j then lie within e^{±2ε} of the exact P_j, so the weighted sum
//!   errs by (e^{2ε} − 1)·A_d with A_d = Σ_j P_j·|v[j, d]|;
//! - the f32 numerator (seq products, seq adds, R rescale multiplies) and denominator sums each
//!   add γ_{seq+R+1}·A_d·e^{2ε}, the final divide and the reference's rounding 2u·|out|.
//!
//! Total: (e^{2ε} − 1 + 2γ_{seq+R+1}·e^{2ε})·A_d + 2u·|out|.
//!
//! CPU: rayon over (head, [`QUERY_BLOCK`]-query block); each task streams its head's keys
//! and values once per block, keeping the running max, sum and accumulator of every query in
//! the block. CUDA: not yet.

mod cpu;
mod reference;
#[cfg(test)]
mod tests;

pub use cpu::{cpu, cpu_at, KEY_BLOCK, QUERY_BLOCK};
pub use reference::reference;

use crate::ops::{check_len, OpError};

/// The op's name in error messages.
pub(crate) const OP: &str = "joint_attention";

/// Heads, sequence length and head dimension of one attention call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttnDims {
    pub heads: usize,
    pub seq: usize,
    pub head_dim: usize,
}

impl AttnDims {
    /// The softmax scale 1/sqrt(hd).
    pub fn scale(&self) -> f64 {
        1.0 / (self.head_dim as f64).sqrt()
    }
}

/// Checks `q, k, v, out` all hold `heads·seq·hd` values and no dimension is zero.
pub(crate) fn check_shapes(
    dims: AttnDims,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    out: &[f32],
) -> Result<(), OpError> {
    let AttnDims { heads, seq, head_dim } = dims;
    if heads == 0 || seq == 0 || head_dim == 0 {
        return Err(OpError::Shape { op: OP, detail: format!("empty shape {dims:?}") });
    }
    let total = heads
        .checked_mul(seq)
        .and_then(|v| v.checked_mul(head_dim))
        .ok_or_else(|| OpError::Shape { op: OP, detail: format!("{dims:?} overflows usize") })?;
    check_len(OP, "q", total, q.len())?;
    check_len(OP, "k", total, k.len())?;
    check_len(OP, "v", total, v.len())?;
    check_len(OP, "out", total, out.len())
}

//! `qk_norm_rope`: in place, for token i (position p = pos0 + i) and every query and key head
//! `x` (hd values) of its qkv row:
//!
//! ```text
//! n_d = x_d · w_d / sqrt(mean(x²) + eps)        w = q_norm (query heads) or k_norm (key heads)
//! x_d        <- n_d · cos[p][d] − n_{d+hd/2} · sin[p][d]      d < hd/2  (NeoX half-split)
//! x_{d+hd/2} <- n_{d+hd/2} · cos[p][d] + n_d · sin[p][d]
//! ```
//! Value heads are untouched. One hd-long norm weight is shared by all heads of its kind.
//!
//! Shapes: `qkv: [M, (n_q + 2·n_kv)·hd]` f32, `q_norm, k_norm: [hd]`, `rope.head_dim == hd`,
//! `pos0 + M <= rope.max_pos` or [`OpError::Position`].
//! Accumulation: reference in f64 (table values are the f32 ones both paths read); CPU in f32.
//!
//! Tolerance (tests.rs): the normalised n_d carries the `rms_norm` relative error
//! ε = γ_{hd+1}/2 + 7u; each output is two products and a sum: error
//! <= (|n_d·cos| + |n_{d+h}·sin|)·(ε + 2u) + the reference's u·|out|. The test allows
//! (|n_d·cos| + |n_{d+h}·sin|)·(γ_{hd+1} + 10u) + u·|out|.
//!
//! Speed of light on the H200: 8 bytes per q/k element (read, write): M = 1 with 32 + 8 heads of
//! 128 is 41 KB -> 10 ns at 4.3 TB/s (launch-bound; fused with `kv_write` on the GPU).
//! CUDA: see cuda.rs.

mod cpu;
mod reference;
#[cfg(test)]
mod tests;

pub use cpu::{cpu, cpu_at};
pub use reference::reference;

use crate::ops::{check_len, check_positions, HeadShape, OpError};
use crate::rope::RopeTable;

/// The op's name in error messages.
pub(crate) const OP: &str = "qk_norm_rope";

/// The op's parameters: one layer's head shape, norm weights, epsilon and RoPE table (on the
/// host; the CUDA launchers take device weights and a device table view).
#[derive(Debug)]
pub struct Params<'a, W: ?Sized = [f32], R = RopeTable> {
    pub shape: HeadShape,
    pub q_norm: &'a W,
    pub k_norm: &'a W,
    pub eps: f32,
    pub rope: &'a R,
}

impl<W: ?Sized, R> Clone for Params<'_, W, R> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<W: ?Sized, R> Copy for Params<'_, W, R> {}

impl Params<'_> {
    /// Checks the head shape, `qkv` (`m` rows), both norm weights and the table's width and range.
    pub(crate) fn check(&self, qkv: &[f32], m: usize, pos0: usize) -> Result<(), OpError> {
        let Params { shape, q_norm, k_norm, rope, .. } = *self;
        shape.validate(OP)?;
        check_len(OP, "qkv", m * shape.qkv_row_len(), qkv.len())?;
        check_len(OP, "q_norm", shape.head_dim, q_norm.len())?;
        check_len(OP, "k_norm", shape.head_dim, k_norm.len())?;
        check_len(OP, "rope table head_dim", shape.head_dim, rope.head_dim)?;
        check_positions(OP, "RoPE table", pos0, m, rope.max_pos)
    }
}

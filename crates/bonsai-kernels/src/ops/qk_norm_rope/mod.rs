//! `qk_norm_rope`: in place, for token i (position p = pos0 + i) and every query and key head
//! `x` (hd values) of its qkv row:
//!
//! ```text
//! n_d = x_d · w_d / sqrt(mean(x²) + eps)        w = q_norm (query heads) or k_norm (key heads)
//! x_d        <- n_d · cos[p][d] − n_{d+r/2} · sin[p][d]       d < r/2  (NeoX half-split)
//! x_{d+r/2}  <- n_{d+r/2} · cos[p][d] + n_d · sin[p][d]
//! x_d        <- n_d                                          r <= d < hd (partial RoPE)
//! ```
//! with r = `rot_dims` (even, <= hd): Qwen3 rotates whole heads (r = hd), Qwen3.5 / Bonsai 2 the
//! first quarter (reference/bonsai2.md §3.5: r = 64 of 256). With r = hd every path computes
//! exactly what it computed before partial RoPE existed. Value heads are untouched. One hd-long
//! norm weight is shared by all heads of its kind.
//!
//! Shapes: `qkv: [M, (n_q + 2·n_kv)·hd]` f32, `q_norm, k_norm: [hd]`, the RoPE table built for r
//! dims (`rope.head_dim == rot_dims`: θ_d = pos·base^(−2d/r)), `pos0 + M <= rope.max_pos` or
//! [`OpError::Position`].
//! Accumulation: reference in f64 (table values are the f32 ones both paths read); CPU in f32.
//!
//! Tolerance (tests.rs): the normalised n_d carries the `rms_norm` relative error
//! ε = γ_{hd+1}/2 + 7u; each rotated output is two products and a sum: error
//! <= (|n_d·cos| + |n_{d+r/2}·sin|)·(ε + 2u) + the reference's u·|out|; a pass-through one is
//! |n_d|·ε + u·|out|. The test allows (|n_d·cos| + |n_{d+r/2}·sin|)·(γ_{hd+1} + 10u) + u·|out|
//! (with cos = 1, sin = 0 for the pass-through dims).
//!
//! Speed of light on the H200: 8 bytes per q/k element (read, write): M = 1 with 32 + 8 heads of
//! 128 is 41 KB -> 10 ns at 4.3 TB/s (launch-bound; fused with `kv_write` on the GPU); a 512-row
//! Bonsai-8B prefill layer moves 12.6 MB of q / k twice and 2 MB of f16 k / v: ~6.5 us. The fused
//! kernel takes 4 rows a CTA, their loads in flight together (qk_norm_rope.cu); cuda.rs launches.

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

/// The op's parameters: one layer's head shape, rotated dims, norm weights, epsilon and RoPE
/// table (on the host; the CUDA launchers take device weights and a device table view).
#[derive(Debug)]
pub struct Params<'a, W: ?Sized = [f32], R = RopeTable> {
    pub shape: HeadShape,
    /// Dims rotated per head (even, <= head_dim; head_dim for whole-head RoPE); the table is this
    /// wide.
    pub rot_dims: usize,
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
        let Params { shape, rot_dims, q_norm, k_norm, rope, .. } = *self;
        shape.validate(OP)?;
        check_rot_dims(OP, shape, rot_dims)?;
        check_len(OP, "qkv", m * shape.qkv_row_len(), qkv.len())?;
        check_len(OP, "q_norm", shape.head_dim, q_norm.len())?;
        check_len(OP, "k_norm", shape.head_dim, k_norm.len())?;
        check_len(OP, "rope table width (rot_dims)", rot_dims, rope.head_dim)?;
        check_positions(OP, "RoPE table", pos0, m, rope.max_pos)
    }
}

/// Fails unless `rot_dims` is positive, even and at most `head_dim`.
pub(crate) fn check_rot_dims(op: &'static str, shape: HeadShape, rot_dims: usize) -> Result<(), OpError> {
    if rot_dims == 0 || rot_dims % 2 != 0 || rot_dims > shape.head_dim {
        return Err(OpError::Shape {
            op,
            detail: format!("rot_dims = {rot_dims} must be even, positive and at most head_dim = {}", shape.head_dim),
        });
    }
    Ok(())
}

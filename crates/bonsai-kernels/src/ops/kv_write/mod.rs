//! `kv_write`: token i's key and value heads go to cache position `p = pos0 + i`, rounded to the
//! nearest f16: `k[table[p / KV_BLOCK]][h][p % KV_BLOCK][d] = f16(qkv[i][q_len + h·hd + d])`, and
//! likewise v from `qkv[i][q_len + kv_len + h·hd + d]`. Other positions are untouched.
//!
//! Shapes: `qkv: [M, (n_q + 2·n_kv)·hd]` f32, the paged cache of [`KvCache`] (pools
//! `[blocks][n_kv][KV_BLOCK][hd]` f16, the sequence's block table); `pos0 + M <= max_seq` or
//! [`OpError::Position`].
//!
//! Exact op (round to nearest even, the same `half` conversion): cpu == reference bitwise.
//!
//! Speed of light on the H200: 6 bytes per cached element (4 read, 2 written), for k and v:
//! M = 1, n_kv = 8, hd = 128 is 12 KB -> 3 ns at 4.3 TB/s (launch-bound; fuse into
//! `qk_norm_rope`). CUDA: see cuda.rs.

mod cpu;
mod reference;
#[cfg(test)]
mod tests;

pub use cpu::cpu;
pub use reference::reference;

use crate::ops::{KvCache, OpError, QkvRows};
use half::f16;

/// The op's name in error messages.
pub(crate) const OP: &str = "kv_write";

/// Checks the head shape, `qkv`, both caches and the position range.
pub(crate) fn check_shapes(rows: &QkvRows<'_>, cache: &KvCache<&mut [f16], &[u32]>) -> Result<(), OpError> {
    rows.check(OP)?;
    cache.check(OP, rows)
}

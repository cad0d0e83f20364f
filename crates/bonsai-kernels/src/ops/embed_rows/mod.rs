//! `embed_rows`: `out[i, :] = dequant(table[ids[i], :])`, the token embedding lookup.
//!
//! Shapes: `table: [vocab, hidden]` a [`QMatrix`] (Q1 or Q2, layout in [`crate::weights`]),
//! `ids: [M]`, `out: [M, hidden]` f32. An id >= vocab is [`OpError::TokenOutOfRange`] naming it.
//!
//! Exact op: every dequantized weight (±d or (c − 1)·d, d an f16 value) is an exact f32, so cpu
//! must equal reference bit for bit.
//!
//! Speed of light on the H200: per token one row, 0.14 (Q1) / 0.27 (Q2) bytes per weight read and
//! 4 bytes per weight written: hidden 4096 is ~17 KB -> 4 ns at 4.3 TB/s (launch-bound).
//! CUDA: see cuda.rs.
//!
//! [`QMatrix`]: crate::weights::QMatrix

mod cpu;
mod reference;
#[cfg(test)]
mod tests;

pub use cpu::{cpu, cpu_of};
pub use reference::reference;

use crate::ops::{check_len, OpError};
use crate::weights::QMatrix;

/// The op's name in error messages.
pub(crate) const OP: &str = "embed_rows";

/// Checks `out: [ids.len(), hidden]` and every id against the vocabulary.
pub(crate) fn check_shapes(table: &QMatrix, ids: &[u32], out: &[f32]) -> Result<(), OpError> {
    check_table_shapes(table.n(), table.k(), ids, out)
}

/// [`check_shapes`] of a `vocab x hidden` table.
pub(crate) fn check_table_shapes(vocab: usize, hidden: usize, ids: &[u32], out: &[f32]) -> Result<(), OpError> {
    check_len(OP, "out", ids.len() * hidden, out.len())?;
    match ids.iter().position(|&id| id as usize >= vocab) {
        Some(index) => Err(OpError::TokenOutOfRange { op: OP, id: ids[index], index, vocab }),
        None => Ok(()),
    }
}

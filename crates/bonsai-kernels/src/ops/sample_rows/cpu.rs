//! Fast CPU version: each row through the one-row CPU ops (argmax on the worker pool; the
//! sampler's partial selection with one scratch vector for every row).

use super::{check, id_or_no_pick, SeqPick};
use crate::ops::sample_top_k::Xoshiro256;
use crate::ops::{argmax, sample_top_k, OpError};

/// As [`super::reference`], into `out[..rows]`; `scratch` is reused between calls.
pub fn cpu(
    logits: &[f32],
    vocab: usize,
    row_seqs: &[u32],
    picks: &[SeqPick],
    rngs: &mut [Xoshiro256],
    scratch: &mut Vec<(u32, f32)>,
    out: &mut [u32],
) -> Result<(), OpError> {
    let rows = check(logits, vocab, row_seqs, picks, rngs.len())?;
    if out.len() < rows {
        return Err(OpError::Length { op: super::OP, what: "out", expected: rows, got: out.len() });
    }
    for (row, &seq) in row_seqs.iter().enumerate() {
        let x = &logits[row * vocab..(row + 1) * vocab];
        let id = match picks[seq as usize] {
            SeqPick::Greedy => argmax::cpu(x).map(|i| i as u32),
            SeqPick::Sample(params) => sample_top_k::cpu(x, &params, rngs[seq as usize].next_f64(), scratch),
        };
        out[row] = id_or_no_pick(id)?;
    }
    Ok(())
}

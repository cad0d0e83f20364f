//! The definition: each row through the one-row ops (argmax, sample_top_k) in row order.

use super::{check, id_or_no_pick, SeqPick};
use crate::ops::sample_top_k::Xoshiro256;
use crate::ops::{argmax, sample_top_k};

/// The pick of every row (see mod.rs); advances the generator of each sampled row's sequence.
pub fn reference(logits: &[f32], vocab: usize, row_seqs: &[u32], picks: &[SeqPick], rngs: &mut [Xoshiro256]) -> Result<Vec<u32>, crate::ops::OpError> {
    check(logits, vocab, row_seqs, picks, rngs.len())?;
    let mut out = Vec::with_capacity(row_seqs.len());
    for (row, &seq) in row_seqs.iter().enumerate() {
        let x = &logits[row * vocab..(row + 1) * vocab];
        let id = match picks[seq as usize] {
            SeqPick::Greedy => argmax::reference(x).map(|i| i as u32),
            SeqPick::Sample(params) => sample_top_k::reference(x, &params, rngs[seq as usize].next_f64()),
        };
        out.push(id_or_no_pick(id)?);
    }
    Ok(out)
}

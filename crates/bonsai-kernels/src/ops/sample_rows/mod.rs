//! `sample_rows`: the picks of one batched decode step. Row r of `logits` (`rows x vocab` f32)
//! belongs to sequence `row_seqs[r]`, which picks with its own setting ([`SeqPick`]):
//!
//! * [`SeqPick::Greedy`]: the argmax of the row under `ops::argmax`'s rules (ties -> lowest id,
//!   NaN never wins); its generator is not used;
//! * [`SeqPick::Sample`]: `ops::sample_top_k` of the row with `u` = the next draw of the
//!   sequence's own generator (`rngs[seq]`, advanced exactly once, as the host sampler does).
//!
//! A row with no candidate picks [`NO_PICK`]. Each sequence appears at most once (a batch holds a
//! sequence once), so the generators' order of use is defined. Shapes: `row_seqs: [rows]`,
//! `picks` and `rngs`: one per sequence of the batch state (`row_seqs` values below their length).
//!
//! Exact op: cpu must equal reference, and each row's pick must equal the one-row op's pick
//! (argmax, or sample_top_k with the same generator state); tests.rs checks both, verify checks
//! the CUDA kernel against both.
//!
//! Speed of light on the H200: one read of the logits, 4 bytes per element: 64 rows of the
//! 151669-entry vocabulary are 38.8 MB -> 9 us at 4.3 TB/s. The kernel sorts each 64th of a row
//! in shared memory (bitonic, as the one-row sampler does), so it is compute-bound well above that.

mod cpu;
mod reference;
#[cfg(test)]
mod tests;

pub use cpu::cpu;
pub use reference::reference;

use crate::ops::sample_top_k::SampleParams;
use crate::ops::OpError;

/// The op's name in error messages.
pub(crate) const OP: &str = "sample_rows";

/// What a row picks when it has no candidate (every logit NaN, or -inf too when sampling); the
/// model's token check rejects it.
pub const NO_PICK: u32 = u32::MAX;

/// u32 words of one sequence's setting on a device ([`SeqPick::device_words`]).
pub const SETTING_WORDS: usize = 4;

/// How one sequence picks its next token.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SeqPick {
    /// The argmax.
    Greedy,
    /// A draw with these settings from the sequence's generator.
    Sample(SampleParams),
}

impl SeqPick {
    /// The setting as the CUDA kernel reads it: inv_temperature's bits, top_k (0 = greedy),
    /// top_p's bits, min_p's bits. A sampled top_k must fit the device (1..=MAX_DEVICE_TOP_K).
    pub fn device_words(&self) -> Result<[u32; SETTING_WORDS], OpError> {
        match self {
            SeqPick::Greedy => Ok([1.0f32.to_bits(), 0, 1.0f32.to_bits(), 0.0f32.to_bits()]),
            SeqPick::Sample(p) => {
                p.validate()?;
                if !p.fits_device() {
                    return Err(OpError::Shape {
                        op: OP,
                        detail: format!("top_k = {} must be in 1..={} on the GPU", p.top_k, crate::ops::sample_top_k::MAX_DEVICE_TOP_K),
                    });
                }
                Ok([p.inv_temperature.to_bits(), p.top_k as u32, p.top_p.to_bits(), p.min_p.to_bits()])
            }
        }
    }
}

/// Checks the shapes and that no sequence appears twice; the number of rows.
pub(crate) fn check(logits: &[f32], vocab: usize, row_seqs: &[u32], picks: &[SeqPick], rngs: usize) -> Result<usize, OpError> {
    let bad = |detail: String| OpError::Shape { op: OP, detail };
    let rows = row_seqs.len();
    if vocab == 0 {
        return Err(bad("a vocabulary of 0".into()));
    }
    if logits.len() < rows * vocab {
        return Err(OpError::Length { op: OP, what: "logits", expected: rows * vocab, got: logits.len() });
    }
    if picks.len() != rngs {
        return Err(bad(format!("{} settings but {rngs} generators", picks.len())));
    }
    let mut seen = vec![false; picks.len()];
    for &s in row_seqs {
        let Some(was) = seen.get_mut(s as usize) else {
            return Err(bad(format!("row of sequence {s}, but settings for {} sequences", picks.len())));
        };
        if std::mem::replace(was, true) {
            return Err(bad(format!("sequence {s} has two rows (its generator would draw twice)")));
        }
    }
    for p in picks {
        if let SeqPick::Sample(params) = p {
            params.validate()?;
        }
    }
    Ok(rows)
}

/// A one-row op's pick, with "no candidate" as [`NO_PICK`] (any other error stays one).
pub(crate) fn id_or_no_pick(id: Result<u32, OpError>) -> Result<u32, OpError> {
    match id {
        Err(OpError::NoCandidate { .. }) => Ok(NO_PICK),
        other => other,
    }
}

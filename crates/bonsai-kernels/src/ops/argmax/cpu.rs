//! Fast CPU version: rayon scans chunks, the per-chunk winners are reduced with the same rule
//! (ties -> lowest index), so the result is identical to the sequential scan.

use super::{beats, OP};
use crate::ops::OpError;
use rayon::prelude::*;

/// Elements per rayon task.
const CHUNK: usize = 1 << 14;

pub fn cpu(x: &[f32]) -> Result<usize, OpError> {
    x.par_chunks(CHUNK)
        .enumerate()
        .map(|(c, chunk)| {
            let mut best: Option<(usize, f32)> = None;
            for (j, &v) in chunk.iter().enumerate() {
                // Within a chunk indices only increase, so "strictly greater" keeps the lowest.
                if best.is_none_or(|(_, b)| v > b) && !v.is_nan() {
                    best = Some((c * CHUNK + j, v));
                }
            }
            best
        })
        .reduce(
            || None,
            |a, b| match (a, b) {
                (Some(x), Some((i, v))) => Some(if beats(i, v, Some(x)) { (i, v) } else { x }),
                (x, None) | (None, x) => x,
            },
        )
        .map(|(i, _)| i)
        .ok_or(OpError::NoCandidate { op: OP })
}

//! Fast CPU version: the CPU pool scans contiguous ranges; the per-range winners are merged with
//! the same rule (ties -> lowest index), a strict total order, so the result is identical to the
//! sequential scan whatever the split and the merge order.

use std::sync::Mutex;

use super::{beats, OP};
use crate::cpu::pool::{self, Split};
use crate::ops::OpError;

pub fn cpu(x: &[f32]) -> Result<usize, OpError> {
    let best: Mutex<Option<(usize, f32)>> = Mutex::new(None);
    pool::for_each_part(x.len(), Split::new(16, pool::MIN_ELEMENTS_PER_PART), &|range| {
        let offset = range.start;
        let mut part_best: Option<(usize, f32)> = None;
        for (j, &v) in x[range].iter().enumerate() {
            // Within a range indices only increase, so "strictly greater" keeps the lowest.
            if part_best.is_none_or(|(_, b)| v > b) && !v.is_nan() {
                part_best = Some((offset + j, v));
            }
        }
        if let Some((i, v)) = part_best {
            let mut best = best.lock().unwrap_or_else(|e| e.into_inner());
            if beats(i, v, *best) {
                *best = Some((i, v));
            }
        }
    });
    let best = best.into_inner().unwrap_or_else(|e| e.into_inner());
    best.map(|(i, _)| i).ok_or(OpError::NoCandidate { op: OP })
}

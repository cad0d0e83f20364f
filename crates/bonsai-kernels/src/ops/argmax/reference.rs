//! The definition: one scan, first strictly-greater value wins.

use super::{beats, OP};
use crate::ops::OpError;

pub fn reference(x: &[f32]) -> Result<usize, OpError> {
    let mut best: Option<(usize, f32)> = None;
    for (i, &v) in x.iter().enumerate() {
        if beats(i, v, best) {
            best = Some((i, v));
        }
    }
    best.map(|(i, _)| i).ok_or(OpError::NoCandidate { op: OP })
}

//! Fast CPU version: a partial selection of the top k (O(n)) before sorting only those, reusing
//! the caller's scratch vector. Same candidates, same order, same draw as the reference.

use super::{candidate_order, draw_from_ordered, SampleParams, OP};
use crate::ops::OpError;

/// As [`super::reference`]; `scratch` is reused between calls to avoid a vocabulary-sized
/// allocation per token.
pub fn cpu(logits: &[f32], params: &SampleParams, u: f64, scratch: &mut Vec<(u32, f32)>) -> Result<u32, OpError> {
    params.validate()?;
    scratch.clear();
    scratch.extend(
        logits.iter().enumerate().filter(|(_, &l)| l > f32::NEG_INFINITY).map(|(i, &l)| (i as u32, l * params.inv_temperature)),
    );
    if scratch.is_empty() {
        return Err(OpError::NoCandidate { op: OP });
    }
    let k = params.top_k;
    if k > 0 && k < scratch.len() {
        scratch.select_nth_unstable_by(k - 1, candidate_order);
        scratch.truncate(k);
    }
    scratch.sort_unstable_by(candidate_order);
    Ok(draw_from_ordered(scratch, params, u))
}

//! The definition: scale, full sort, cut, draw (see mod.rs for the steps).

use super::{candidate_order, draw_from_ordered, SampleParams, OP};
use crate::ops::OpError;

/// The sampled id for uniform `u` in [0, 1); [`OpError::NoCandidate`] when no logit is > -inf.
pub fn reference(logits: &[f32], params: &SampleParams, u: f64) -> Result<u32, OpError> {
    params.validate()?;
    let mut candidates: Vec<(u32, f32)> = logits
        .iter()
        .enumerate()
        .filter(|(_, &l)| l > f32::NEG_INFINITY)
        .map(|(i, &l)| (i as u32, l * params.inv_temperature))
        .collect();
    if candidates.is_empty() {
        return Err(OpError::NoCandidate { op: OP });
    }
    candidates.sort_by(candidate_order);
    if params.top_k > 0 {
        candidates.truncate(params.top_k);
    }
    Ok(draw_from_ordered(&candidates, params, u))
}

//! `sample_top_k`: draws one token id from logits with temperature, top-k, top-p (nucleus) and
//! min-p, given a uniform number `u` in [0, 1). This is THE definition of bonsai's sampling step
//! (the host `Sampler` of bonsai-model calls [`cpu`]; the CUDA kernel must agree with it), in the
//! order llama.cpp uses:
//!
//! 1. candidates: every id whose logit is > -inf and not NaN, with value `logit * inv_temperature`
//!    (f32 multiply);
//! 2. ordered by value descending, ties by lower id; top-k keeps the first `top_k` (0 = all);
//! 3. weights `p_i = exp(v_i - v_0)` in f32, `sum` = their f64 sum;
//! 4. top-p: keep the shortest prefix whose cumulative `p_i / sum` (f64) reaches `top_p`;
//! 5. min-p: of those, keep the leading ones with `p_i >= min_p` (at least one);
//! 6. draw: `target = u * total` (f64, total = the kept weights' sum); the first kept candidate
//!    whose running f64 sum exceeds `target` wins (the last kept one if rounding leaves none).
//!
//! Exact op: cpu must equal reference for the same `u`.
//!
//! The random number comes from [`Xoshiro256`] (`next_f64`), which the CUDA kernel mirrors bit for
//! bit on its device-resident state, so a seed reproduces a run on every backend.
//!
//! Speed of light on the H200 (CUDA, top_k <= [`MAX_DEVICE_TOP_K`]): the 151669 logits are 607 KB,
//! 0.14 us at 4.3 TB/s; in practice two short launches (per-CTA candidate sort, final merge).

mod cpu;
mod reference;
mod rng;
#[cfg(test)]
mod tests;

pub use cpu::cpu;
pub use reference::reference;
pub use rng::Xoshiro256;

use crate::ops::OpError;

/// The op's name in error messages.
pub(crate) const OP: &str = "sample_top_k";

/// The largest top-k the CUDA kernel supports (each CTA keeps this many candidates).
pub const MAX_DEVICE_TOP_K: usize = 64;

/// Sampling settings of one draw (already validated by the caller's config).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SampleParams {
    /// 1 / temperature (> 0).
    pub inv_temperature: f32,
    /// Keep the k best candidates; 0 = all.
    pub top_k: usize,
    /// Nucleus mass in (0, 1]; 1 = off.
    pub top_p: f32,
    /// Minimum weight relative to the best, in [0, 1]; 0 = off.
    pub min_p: f32,
}

impl SampleParams {
    /// Whether the CUDA kernel can run these settings (top-k between 1 and [`MAX_DEVICE_TOP_K`]).
    pub fn fits_device(&self) -> bool {
        (1..=MAX_DEVICE_TOP_K).contains(&self.top_k)
    }

    pub(crate) fn validate(&self) -> Result<(), OpError> {
        let bad = |detail: String| OpError::Shape { op: OP, detail };
        if !(self.inv_temperature > 0.0 && self.inv_temperature.is_finite()) {
            return Err(bad(format!("inv_temperature = {} must be finite and > 0", self.inv_temperature)));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(bad(format!("top_p = {} must be in (0, 1]", self.top_p)));
        }
        if !(0.0..=1.0).contains(&self.min_p) {
            return Err(bad(format!("min_p = {} must be in [0, 1]", self.min_p)));
        }
        Ok(())
    }
}

/// Steps 3 to 6 on candidates already ordered and cut to top-k: (id, value) pairs.
/// Shared by reference and cpu, which differ only in how they find the ordered candidates.
pub(crate) fn draw_from_ordered(candidates: &[(u32, f32)], params: &SampleParams, u: f64) -> u32 {
    let max = candidates[0].1;
    let weights: Vec<f32> = candidates.iter().map(|c| (c.1 - max).exp()).collect();
    let sum: f64 = weights.iter().map(|&w| w as f64).sum();
    let mut keep = weights.len();
    if params.top_p < 1.0 {
        let mut cumulative = 0.0f64;
        for (i, &w) in weights.iter().enumerate() {
            cumulative += w as f64 / sum;
            if cumulative >= params.top_p as f64 {
                keep = i + 1;
                break;
            }
        }
    }
    if params.min_p > 0.0 {
        // The top candidate has weight exp(0) = 1, so min_p compares directly.
        let above = weights[..keep].iter().take_while(|&&w| w >= params.min_p).count();
        keep = above.max(1);
    }
    let total: f64 = weights[..keep].iter().map(|&w| w as f64).sum();
    let target = u * total;
    let mut cumulative = 0.0f64;
    for (c, &w) in candidates[..keep].iter().zip(&weights) {
        cumulative += w as f64;
        if target < cumulative {
            return c.0;
        }
    }
    candidates[keep - 1].0
}

/// Candidate order: value descending, ties by lower id.
pub(crate) fn candidate_order(a: &(u32, f32), b: &(u32, f32)) -> std::cmp::Ordering {
    b.1.total_cmp(&a.1).then(a.0.cmp(&b.0))
}

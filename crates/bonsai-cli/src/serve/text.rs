//! Turning one sequence's sampled tokens into the text a client sees: stop strings matched across
//! token boundaries (text that might begin a stop string is held back until it cannot), OpenAI's
//! frequency and presence penalties, and log-probabilities.

use std::collections::HashMap;

use super::api::TokenLogprob;

/// Releases generated text, holding back any tail that could still grow into a stop string.
#[derive(Debug, Default)]
pub struct StopMatcher {
    stops: Vec<String>,
    pending: String,
}

/// What one push released.
#[derive(Debug, PartialEq, Eq)]
pub enum Released {
    /// Text that can be sent (possibly empty); generation goes on.
    Text(String),
    /// A stop string was reached: the text before it, the last text of the choice.
    Stopped(String),
}

impl StopMatcher {
    pub fn new(stops: Vec<String>) -> Self {
        Self { stops, pending: String::new() }
    }

    pub fn push(&mut self, text: &str) -> Released {
        self.pending.push_str(text);
        // The earliest stop string wins (the text before it is all the client gets).
        if let Some(at) = self.stops.iter().filter_map(|s| self.pending.find(s.as_str())).min() {
            self.pending.truncate(at);
            return Released::Stopped(std::mem::take(&mut self.pending));
        }
        let keep_from = self.hold_from();
        let rest = self.pending.split_off(keep_from);
        Released::Text(std::mem::replace(&mut self.pending, rest))
    }

    /// The held-back text, once generation ended for another reason.
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.pending)
    }

    /// The first byte of the longest tail of `pending` that is a proper prefix of a stop string.
    fn hold_from(&self) -> usize {
        let p = &self.pending;
        (0..p.len())
            .filter(|&i| p.is_char_boundary(i))
            .find(|&i| self.stops.iter().any(|s| s.len() > p.len() - i && s.starts_with(&p[i..])))
            .unwrap_or(p.len())
    }
}

/// OpenAI's penalties: `logit -= frequency · count + presence · [count > 0]` over the tokens the
/// request generated so far.
#[derive(Debug, Default)]
pub struct Penalties {
    frequency: f32,
    presence: f32,
    counts: HashMap<u32, u32>,
}

impl Penalties {
    pub fn new(frequency: f32, presence: f32) -> Self {
        Self { frequency, presence, counts: HashMap::new() }
    }
    pub fn active(&self) -> bool {
        self.frequency != 0.0 || self.presence != 0.0
    }
    pub fn record(&mut self, id: u32) {
        if self.active() {
            *self.counts.entry(id).or_default() += 1;
        }
    }
    pub fn apply(&self, logits: &mut [f32]) {
        for (&id, &n) in &self.counts {
            if let Some(l) = logits.get_mut(id as usize) {
                *l -= self.frequency * n as f32 + self.presence;
            }
        }
    }
}

/// The log-probability of `chosen` under softmax(`logits`) and the `top` most likely tokens, each
/// with its bytes from `bytes_of`. Computed in f64 (a vocabulary of 150k terms summed in f32 loses
/// ~1e-3 relative in the log-sum-exp).
pub fn logprobs(logits: &[f32], chosen: u32, top: usize, bytes_of: impl Fn(u32) -> Vec<u8>) -> TokenLogprob {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let lse = max + logits.iter().map(|&l| (l as f64 - max).exp()).sum::<f64>().ln();
    let lp = |id: u32| (logits[id as usize] as f64 - lse) as f32;
    let mut best: Vec<u32> = Vec::with_capacity(top + 1);
    if top > 0 {
        for (id, &l) in logits.iter().enumerate() {
            if best.len() < top || l > logits[*best.last().unwrap_or(&0) as usize] {
                let at = best.partition_point(|&b| logits[b as usize] >= l);
                best.insert(at, id as u32);
                best.truncate(top);
            }
        }
    }
    TokenLogprob { token: bytes_of(chosen), logprob: lp(chosen), top: best.into_iter().map(|id| (bytes_of(id), lp(id))).collect() }
}

#[cfg(test)]
#[path = "text_tests.rs"]
mod tests;

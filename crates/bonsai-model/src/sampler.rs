//! Token sampling: greedy, temperature, top-k, top-p, min-p and repetition penalty, driven by a
//! small seeded PRNG (xoshiro256** seeded through splitmix64) so a seed reproduces a run exactly.
//!
//! Order of the steps (the order llama.cpp uses, so settings mean what users expect):
//! repetition penalty -> (greedy: argmax) -> temperature -> top-k -> softmax -> top-p -> min-p
//! -> draw. The draw itself (temperature onwards) is `bonsai_kernels::ops::sample_top_k`, shared
//! with the GPU kernel.

use std::collections::HashSet;

use bonsai_kernels::ops::sample_top_k::{self, SampleParams};

/// Temperatures at or below this are treated as greedy decoding.
pub const GREEDY_TEMPERATURE: f32 = 0.0;
/// How many recent tokens the repetition penalty looks at by default (llama.cpp's default).
pub const DEFAULT_REPEAT_LAST_N: usize = 64;

/// Why sampling failed.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SamplerError {
    #[error("sampler: {name} = {value} is out of range ({range})")]
    BadSetting { name: &'static str, value: f64, range: &'static str },
    #[error("sampler: logits are empty")]
    Empty,
    #[error("sampler: logit {index} is NaN (the model produced garbage)")]
    NaN { index: usize },
    #[error("sampler: every logit is -inf, nothing can be sampled")]
    AllMasked,
}

/// User-facing sampling settings. `Default` is greedy with no penalty.
#[derive(Clone, Debug, PartialEq)]
pub struct SamplerConfig {
    /// 0 = greedy (argmax); otherwise logits are divided by it.
    pub temperature: f32,
    /// Keep only the k most likely tokens; 0 = off.
    pub top_k: usize,
    /// Keep the smallest set whose probability reaches p; 1 = off.
    pub top_p: f32,
    /// Drop tokens with probability below min_p times the top probability; 0 = off.
    pub min_p: f32,
    /// Divide positive / multiply negative logits of recently seen tokens; 1 = off.
    pub repeat_penalty: f32,
    /// How many of the latest tokens the penalty considers.
    pub repeat_last_n: usize,
    pub seed: u64,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        Self {
            temperature: GREEDY_TEMPERATURE,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            repeat_penalty: 1.0,
            repeat_last_n: DEFAULT_REPEAT_LAST_N,
            seed: 0,
        }
    }
}

impl SamplerConfig {
    fn validate(&self) -> Result<(), SamplerError> {
        let bad = |name, value: f32, range| SamplerError::BadSetting { name, value: value as f64, range };
        if !(self.temperature >= 0.0 && self.temperature.is_finite()) {
            return Err(bad("temperature", self.temperature, ">= 0"));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(bad("top_p", self.top_p, "(0, 1]"));
        }
        if !(0.0..=1.0).contains(&self.min_p) {
            return Err(bad("min_p", self.min_p, "[0, 1]"));
        }
        if !(self.repeat_penalty > 0.0 && self.repeat_penalty.is_finite()) {
            return Err(bad("repeat_penalty", self.repeat_penalty, "> 0"));
        }
        Ok(())
    }

    /// The draw settings of the shared sampling op (temperature > 0).
    pub fn sample_params(&self) -> SampleParams {
        SampleParams { inv_temperature: 1.0 / self.temperature, top_k: self.top_k, top_p: self.top_p, min_p: self.min_p }
    }

    pub fn is_greedy(&self) -> bool {
        self.temperature <= GREEDY_TEMPERATURE || self.top_k == 1
    }
}

/// The sampling PRNG (xoshiro256**), shared with the kernels so device draws match host draws.
pub use bonsai_kernels::ops::sample_top_k::Xoshiro256 as Rng;

/// A stateful sampler: owns the PRNG and scratch space reused across tokens.
pub struct Sampler {
    config: SamplerConfig,
    rng: Rng,
    candidates: Vec<(u32, f32)>,
}

impl Sampler {
    pub fn new(config: SamplerConfig) -> Result<Self, SamplerError> {
        config.validate()?;
        let rng = Rng::new(config.seed);
        Ok(Self { config, rng, candidates: Vec::new() })
    }

    pub fn config(&self) -> &SamplerConfig {
        &self.config
    }

    /// The generator state (to continue the same stream of draws on a backend).
    pub fn rng_state(&self) -> [u64; 4] {
        self.rng.state()
    }

    /// Continues from a generator state a backend advanced.
    pub fn set_rng_state(&mut self, state: [u64; 4]) {
        self.rng = Rng::from_state(state);
    }

    /// The pick a backend can make on its own for these settings, or None when the host must
    /// sample: a repetition penalty (needs the history) or a top-k the device kernel does not
    /// take (0 = all, or above `MAX_DEVICE_TOP_K`).
    pub fn device_pick(&self) -> Option<crate::DevicePick> {
        if self.config.repeat_penalty != 1.0 {
            return None;
        }
        if self.config.is_greedy() {
            return Some(crate::DevicePick::Greedy);
        }
        let params = self.config.sample_params();
        params.fits_device().then_some(crate::DevicePick::Sample(params))
    }

    /// Picks the next token from `logits` (modified in place by the penalty), given the tokens
    /// seen so far (prompt and generated) in `history`.
    pub fn sample(&mut self, logits: &mut [f32], history: &[u32]) -> Result<u32, SamplerError> {
        if logits.is_empty() {
            return Err(SamplerError::Empty);
        }
        if let Some(index) = logits.iter().position(|l| l.is_nan()) {
            return Err(SamplerError::NaN { index });
        }
        self.apply_repeat_penalty(logits, history);
        if self.config.is_greedy() {
            return argmax(logits);
        }
        let u = self.rng.next_f64();
        sample_top_k::cpu(logits, &self.config.sample_params(), u, &mut self.candidates).map_err(|_| SamplerError::AllMasked)
    }

    fn apply_repeat_penalty(&self, logits: &mut [f32], history: &[u32]) {
        let r = self.config.repeat_penalty;
        if r == 1.0 || self.config.repeat_last_n == 0 {
            return;
        }
        let start = history.len().saturating_sub(self.config.repeat_last_n);
        let seen: HashSet<u32> = history[start..].iter().copied().collect();
        for id in seen {
            if let Some(l) = logits.get_mut(id as usize) {
                *l = if *l > 0.0 { *l / r } else { *l * r };
            }
        }
    }
}

/// Index of the largest logit, ties to the lowest index. Caller has rejected NaN.
pub fn argmax(logits: &[f32]) -> Result<u32, SamplerError> {
    let mut best: Option<(usize, f32)> = None;
    for (i, &l) in logits.iter().enumerate() {
        if best.is_none_or(|(_, b)| l > b) {
            best = Some((i, l));
        }
    }
    match best {
        Some((i, l)) if l > f32::NEG_INFINITY => Ok(i as u32),
        Some(_) => Err(SamplerError::AllMasked),
        None => Err(SamplerError::Empty),
    }
}

#[cfg(test)]
#[path = "sampler_tests.rs"]
mod tests;

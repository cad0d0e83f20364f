//! Token sampling: greedy, temperature, top-k, top-p, min-p and repetition penalty, driven by a
//! small seeded PRNG (xoshiro256** seeded through splitmix64) so a seed reproduces a run exactly.
//!
//! Order of the steps (the order llama.cpp uses, so settings mean what users expect):
//! repetition penalty -> (greedy: argmax) -> temperature -> top-k -> softmax -> top-p -> min-p
//! -> draw.

use std::collections::HashSet;

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

    pub fn is_greedy(&self) -> bool {
        self.temperature <= GREEDY_TEMPERATURE || self.top_k == 1
    }
}

/// xoshiro256** (Blackman & Vigna), seeded by expanding a u64 through splitmix64.
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        let mut sm = seed;
        // splitmix64 never yields four zero words in a row, so the state is never all-zero.
        Self { s: [splitmix64(&mut sm), splitmix64(&mut sm), splitmix64(&mut sm), splitmix64(&mut sm)] }
    }

    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1) with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        const MANTISSA_BITS: u32 = 53;
        (self.next_u64() >> (64 - MANTISSA_BITS)) as f64 * (1.0 / (1u64 << MANTISSA_BITS) as f64)
    }
}

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
        self.collect_candidates(logits)?;
        let probs_total = self.softmax_and_truncate();
        Ok(self.draw(probs_total))
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

    /// Fills `candidates` with (id, logit / T), sorted by logit descending, top-k applied.
    fn collect_candidates(&mut self, logits: &[f32]) -> Result<(), SamplerError> {
        let inv_t = 1.0 / self.config.temperature;
        self.candidates.clear();
        self.candidates.extend(
            logits.iter().enumerate().filter(|(_, l)| **l > f32::NEG_INFINITY).map(|(i, l)| (i as u32, l * inv_t)),
        );
        if self.candidates.is_empty() {
            return Err(SamplerError::AllMasked);
        }
        // Descending by logit, ties by lower id, so the order is fully deterministic.
        let order = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        let k = self.config.top_k;
        if k > 0 && k < self.candidates.len() {
            self.candidates.select_nth_unstable_by(k - 1, order);
            self.candidates.truncate(k);
        }
        self.candidates.sort_unstable_by(order);
        Ok(())
    }

    /// Turns candidate logits into probabilities (in place), applies top-p and min-p, and returns
    /// the total probability mass kept (the draw is scaled by it instead of renormalising).
    fn softmax_and_truncate(&mut self) -> f64 {
        let max = self.candidates[0].1;
        let mut sum = 0.0f64;
        for c in self.candidates.iter_mut() {
            c.1 = (c.1 - max).exp();
            sum += c.1 as f64;
        }
        // Always keep at least the top candidate.
        let mut keep = self.candidates.len();
        if self.config.top_p < 1.0 {
            let mut cumulative = 0.0f64;
            for (i, c) in self.candidates.iter().enumerate() {
                cumulative += c.1 as f64 / sum;
                if cumulative >= self.config.top_p as f64 {
                    keep = i + 1;
                    break;
                }
            }
        }
        if self.config.min_p > 0.0 {
            // The top candidate has unnormalised weight exp(0) = 1.
            let threshold = self.config.min_p;
            let above = self.candidates[..keep].iter().take_while(|c| c.1 >= threshold).count();
            keep = above.max(1);
        }
        self.candidates.truncate(keep);
        self.candidates.iter().map(|c| c.1 as f64).sum()
    }

    fn draw(&mut self, total: f64) -> u32 {
        let target = self.rng.next_f64() * total;
        let mut cumulative = 0.0f64;
        for c in &self.candidates {
            cumulative += c.1 as f64;
            if target < cumulative {
                return c.0;
            }
        }
        // Rounding can leave target == total; the last kept candidate owns that edge.
        self.candidates[self.candidates.len() - 1].0
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

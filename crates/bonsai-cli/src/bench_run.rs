//! The measurements behind `bonsai bench` and their report (table or JSON).
//!
//! pp: a random prompt of `n_prompt` tokens in one forward call from position 0, timed from a
//! synchronised start to a synchronised end on the host clock. tg: the cache filled to a depth
//! (prefill in chunks, untimed), then `n_gen` greedy steps through `Qwen3::decode_run` (graph
//! replays on CUDA, queued one ahead of the host; each step's 4-byte id comes back to the host, as
//! in generation). Each test runs once untimed (warm-up: first launches, graph capture) and then
//! `repetitions` times.

use std::time::Instant;

use bonsai_model::backend::median;
use bonsai_model::sampler::Rng;
use bonsai_model::{Backend, DevicePick, ModelError, Qwen3, Qwen3State};
use serde_json::json;

/// Prefill chunk when filling the cache to a depth.
const DEPTH_FILL_CHUNK: usize = 512;

/// What to measure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BenchPlan {
    /// Print the kernel plans before measuring.
    pub verbose: bool,
    pub n_prompt: usize,
    pub n_gen: usize,
    pub repetitions: usize,
    pub depths: Vec<usize>,
    /// Batches of independent sequences to decode together (the server's decode step); empty:
    /// only the one-sequence test.
    pub batches: Vec<usize>,
    pub ctx: usize,
    pub seed: u64,
}

/// Median and spread of tokens/s over repetitions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rates {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Rates {
    pub fn of(mut samples: Vec<f64>) -> Self {
        let min = samples.iter().copied().fold(f64::INFINITY, f64::min);
        let max = samples.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Self { median: median(&mut samples), min, max }
    }
}

/// One row of the report.
#[derive(Clone, Debug, PartialEq)]
pub struct TestResult {
    /// "pp" or "tg".
    pub kind: &'static str,
    pub tokens: usize,
    pub depth: usize,
    /// Sequences decoding together (None: the one-sequence decode loop).
    pub batch: Option<usize>,
    pub rates: Rates,
}

impl TestResult {
    pub fn label(&self) -> String {
        let mut label = format!("{}{}", self.kind, self.tokens);
        if let Some(b) = self.batch {
            label += &format!(" x{b}");
        }
        if self.depth > 0 {
            label += &format!(" @ d{}", self.depth);
        }
        label
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct BenchReport {
    pub model: String,
    pub backend: String,
    pub ctx: usize,
    pub repetitions: usize,
    pub weight_bytes_per_token: usize,
    /// Measured memory bandwidth, bytes/s, as `bandwidth_method` says.
    pub bandwidth: f64,
    /// How `bandwidth` was measured (a GPU copy, read + write counted; the CPU's streaming read).
    pub bandwidth_method: String,
    /// (used, total) device memory in bytes; None on the CPU.
    pub memory: Option<(usize, usize)>,
    /// Device bytes bonsai allocated (model, cache, states, scratch); None on the CPU.
    pub allocated: Option<usize>,
    pub results: Vec<TestResult>,
}

impl BenchReport {
    /// Decode tokens/s if every token only streamed its weights at the measured bandwidth.
    pub fn bandwidth_limit_tok_per_s(&self) -> f64 {
        self.bandwidth / self.weight_bytes_per_token.max(1) as f64
    }

    /// A tg rate as a percentage of the bandwidth limit (None for pp).
    pub fn percent_of_limit(&self, r: &TestResult) -> Option<f64> {
        (r.kind == "tg" && r.batch.is_none()).then(|| 100.0 * r.rates.median / self.bandwidth_limit_tok_per_s())
    }

    pub fn to_json(&self) -> serde_json::Value {
        let results: Vec<_> = self
            .results
            .iter()
            .map(|r| {
                json!({
                    "test": r.label(), "kind": r.kind, "tokens": r.tokens, "depth": r.depth, "batch": r.batch,
                    "tok_per_s_median": r.rates.median, "tok_per_s_min": r.rates.min, "tok_per_s_max": r.rates.max,
                    "percent_of_bandwidth_limit": self.percent_of_limit(r),
                })
            })
            .collect();
        json!({
            "model": self.model, "backend": self.backend, "ctx": self.ctx, "repetitions": self.repetitions,
            "weight_bytes_per_token": self.weight_bytes_per_token,
            "bandwidth_bytes_per_s": self.bandwidth, "bandwidth_method": self.bandwidth_method,
            "bandwidth_limit_tok_per_s": self.bandwidth_limit_tok_per_s(),
            "memory_used_bytes": self.memory.map(|m| m.0), "memory_total_bytes": self.memory.map(|m| m.1),
            "allocated_bytes": self.allocated,
            "results": results,
        })
    }

    pub fn to_table(&self) -> String {
        let mut s = format!("model: {} | backend: {} | ctx {}\n", self.model, self.backend, self.ctx);
        s += &format!(
            "weights read per token: {:.1} MB | {}: {:.1} GB/s | decode limit {:.1} tok/s\n",
            self.weight_bytes_per_token as f64 / 1e6,
            self.bandwidth_method,
            self.bandwidth / 1e9,
            self.bandwidth_limit_tok_per_s()
        );
        s += &format!("| {:<16} | {:>14} | {:>23} | {:>12} |\n", "test", "tok/s (median)", "min - max", "% of limit");
        s += &format!("|{:-<18}|{:-<16}|{:-<25}|{:-<14}|\n", "", "", "", "");
        for r in &self.results {
            let pct = self.percent_of_limit(r).map_or(String::new(), |p| format!("{p:.1} %"));
            let spread = format!("{:.1} - {:.1}", r.rates.min, r.rates.max);
            s += &format!("| {:<16} | {:>14.1} | {:>23} | {:>12} |\n", r.label(), r.rates.median, spread, pct);
        }
        s += &format!("({} repetitions each, after one warm-up)\n", self.repetitions);
        if let Some((used, total)) = self.memory {
            let ours = self.allocated.map_or(String::new(), |a| format!(" (bonsai allocated {:.1} MB)", a as f64 / 1e6));
            s += &format!("GPU memory used: {:.1} MB of {:.1} MB{ours}\n", used as f64 / 1e6, total as f64 / 1e6);
        }
        s
    }
}

fn random_tokens(rng: &mut Rng, n: usize, vocab: usize) -> Vec<u32> {
    (0..n).map(|_| (rng.next_u64() % vocab as u64) as u32).collect()
}

fn rate(tokens: usize, secs: f64) -> f64 {
    tokens as f64 / secs.max(1e-9)
}

/// Runs every test of `plan` on `model`.
pub fn measure<B: Backend>(model: &Qwen3<B>, name: &str, bytes_per_token: usize, plan: &BenchPlan) -> Result<BenchReport, ModelError> {
    let b = model.backend();
    let vocab = model.config().vocab;
    let mut rng = Rng::new(plan.seed);
    let batch = plan.n_prompt.max(1).min(plan.ctx);
    let mut state = model.new_state(batch.max(DEPTH_FILL_CHUNK.min(plan.ctx)), false)?;
    let mut results = Vec::new();
    if plan.n_prompt > 0 {
        let prompt = random_tokens(&mut rng, plan.n_prompt, vocab);
        let mut samples = Vec::with_capacity(plan.repetitions);
        for rep in 0..=plan.repetitions {
            model.rewind(&mut state, 0)?;
            b.synchronize()?;
            let start = Instant::now();
            model.prefill(&mut state, &prompt)?;
            b.synchronize()?;
            if rep > 0 {
                samples.push(rate(plan.n_prompt, start.elapsed().as_secs_f64()));
            }
        }
        results.push(TestResult { kind: "pp", tokens: plan.n_prompt, depth: 0, batch: None, rates: Rates::of(samples) });
    }
    if plan.n_gen > 0 {
        for &depth in &plan.depths {
            let rates = measure_decode(model, &mut state, &mut rng, depth, plan)?;
            results.push(TestResult { kind: "tg", tokens: plan.n_gen, depth, batch: None, rates });
            for &sequences in &plan.batches {
                let rates = measure_batch_decode(model, &mut rng, sequences, depth, plan)?;
                results.push(TestResult { kind: "tg", tokens: plan.n_gen, depth, batch: Some(sequences), rates });
            }
        }
    }
    // Memory first: the bandwidth test's buffers, freed stream-ordered, must not count.
    let (memory, allocated) = (b.memory_in_use()?, b.allocated_bytes());
    Ok(BenchReport {
        model: name.to_string(),
        backend: b.describe(),
        ctx: plan.ctx,
        repetitions: plan.repetitions,
        weight_bytes_per_token: bytes_per_token,
        bandwidth: b.measure_copy_bandwidth()?,
        bandwidth_method: b.bandwidth_method(),
        memory,
        allocated,
        results,
    })
}

fn measure_decode<B: Backend>(
    model: &Qwen3<B>,
    state: &mut Qwen3State<B>,
    rng: &mut Rng,
    depth: usize,
    plan: &BenchPlan,
) -> Result<Rates, ModelError> {
    let b = model.backend();
    let vocab = model.config().vocab;
    model.rewind(state, 0)?;
    let fill = random_tokens(rng, depth, vocab);
    if depth > 0 {
        model.prefill(state, &fill)?;
    }
    let first = random_tokens(rng, 1, vocab)[0];
    let mut samples = Vec::with_capacity(plan.repetitions);
    for rep in 0..=plan.repetitions {
        // The cache up to `depth` stays valid: each repetition decodes from the same point. A
        // recurrent (qwen35) state cannot drop the decoded tokens: it refills (untimed).
        if model.rewind_point(state, 0, depth) == depth {
            model.rewind(state, depth)?;
        } else {
            model.rewind(state, 0)?;
            model.prefill(state, &fill)?;
        }
        model.set_next_token(state, first)?;
        b.synchronize()?;
        let start = Instant::now();
        model.decode_run(state, DevicePick::Greedy, plan.n_gen, |_| Ok(true))?;
        b.synchronize()?;
        if rep > 0 {
            samples.push(rate(plan.n_gen, start.elapsed().as_secs_f64()));
        }
    }
    Ok(Rates::of(samples))
}

/// Aggregate tok/s of `sequences` sequences decoding together, each from `depth` cached tokens:
/// one forward call of one token per sequence per step, greedy picks on the backend, ids read
/// back every step (the server's decode step).
fn measure_batch_decode<B: Backend>(model: &Qwen3<B>, rng: &mut Rng, sequences: usize, depth: usize, plan: &BenchPlan) -> Result<Rates, ModelError> {
    let b = model.backend();
    let vocab = model.config().vocab;
    let mut state = model.new_batch_state(sequences, sequences.max(DEPTH_FILL_CHUNK.min(plan.ctx)), false)?;
    let fill = random_tokens(rng, depth, vocab);
    let fill_seq = |state: &mut Qwen3State<B>, s: usize| -> Result<(), ModelError> {
        for chunk in fill.chunks(DEPTH_FILL_CHUNK) {
            model.forward_batch(state, &[(s, chunk)], bonsai_model::LogitRows::Last)?;
        }
        Ok(())
    };
    for s in 0..sequences {
        fill_seq(&mut state, s)?;
    }
    let first = random_tokens(rng, sequences, vocab);
    let mut samples = Vec::with_capacity(plan.repetitions);
    for rep in 0..=plan.repetitions {
        for s in 0..sequences {
            // As in `measure_decode`: a recurrent state refills instead (untimed).
            if model.rewind_point(&state, s, depth) == depth {
                model.rewind_seq(&mut state, s, depth)?;
            } else {
                model.rewind_seq(&mut state, s, 0)?;
                fill_seq(&mut state, s)?;
            }
        }
        let mut next = first.clone();
        b.synchronize()?;
        let start = Instant::now();
        for _ in 0..plan.n_gen {
            let batch: Vec<(usize, &[u32])> = next.iter().enumerate().map(|(s, id)| (s, std::slice::from_ref(id))).collect();
            next = model.forward_batch_pick(&mut state, &batch, DevicePick::Greedy)?;
        }
        if rep > 0 {
            samples.push(rate(sequences * plan.n_gen, start.elapsed().as_secs_f64()));
        }
    }
    Ok(Rates::of(samples))
}

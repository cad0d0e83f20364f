//! `bonsai check`: the same model on the CPU and on the GPU must agree. Runs greedy generation on
//! both (the GPU through graph-replayed `decode_run` steps, paused once half-way), reports the
//! first divergent step, the largest logit difference against a derived bound for the first step
//! (prefill) and, when the tokens agree, for the last one (a decode step), and the perplexity of
//! the prompt on both, plus (informational) a sampled run with one seed, which the GPU must
//! reproduce exactly when paused half-way. Exits 1 on a mismatch. `--synthetic`
//! checks a random-weight model of a real geometry instead of a file (same seed on both
//! backends).
//!
//! The logit bound (both backends compute in f32, with different summation orders):
//! * a dot product of K terms of random sign, accumulated in f32 in any order, differs from the
//!   exact sum by about sqrt(K)·u relative to its typical magnitude (the random-walk estimate
//!   of rounding, u = 2^-24; pairwise/split-K orders do better, sequential ones reach it);
//! * the residual stream takes one such relative error per sublayer (2 per layer); RMSNorm keeps
//!   errors relative, so they add up across the 2·L sublayers, plus one for the LM head;
//! * a logit error is then that relative error times the logits' own scale (their RMS).
//!
//! * the GPU's one-token GEMVs also quantize x per 128-group to P-bit integers (`gemv_b1`,
//!   P = 16): each element moves by a uniform e with |e| <= s_G / 2, s_G = 2^(E - P + 2),
//!   2^E in (max|x_G|, 2 max|x_G|], so ~1.4 max|x_G| ~ 1.4 · 2.6 · rms(x) for a 128-group of
//!   roughly normal activations; a dot of random-sign weights then moves by rms(e) / rms(x) =
//!   s_G / (sqrt(12) · rms(x)) ~ 2^(2 - P) relative. These errors are zero-mean and independent
//!   across groups and sublayers, so they add as a random walk: sqrt(2·L + 1) · 2^(2 - P).
//!
//! * a forward call of at least `F16_GEMM_MIN_TOKENS` rows (a long prompt, or a batch of
//!   sequences) runs its GEMMs on f16 activations: each row is scaled by a power of two and each
//!   element rounded to the nearest f16, an error uniform within half an ulp, so at most
//!   2^-11 relative and 2^-11 / sqrt(3) in rms; a dot of random-sign weights moves by that
//!   relative to its scale, once per sublayer, zero-mean and independent: sqrt(2·L + 1) ·
//!   2^-11 / sqrt(3). Its keys and values stay in the cache, so every later logit carries it.
//!
//! bound = SLACK · ((2·L + 1) · sqrt(K_max) · u + sqrt(2·L + 1) · (2^(2 - P) + [f16] 2^-11 / sqrt(3)))
//! · rms(logits), K_max the longest dot product (hidden, ffn, or n_q·head_dim), [f16] 1 once a
//! forward call reached the f16 GEMM. Measured on the H200 with synthetic Bonsai-8B, the P
//! term behaves as derived: P = 24 -> 16 moved the first-step difference from 0.152 to 0.163 of
//! the rounding-only bound, P = 8 to 13.7x it (~4 · rms · 2^(2 - P) in all).
//! SLACK = 16 covers what the estimate leaves out: correlated
//! rounding, O(1) conditioning of softmax, SiLU and rsqrt, and the f16 KV cache rounding a value
//! to the neighbouring f16 on one side only. That last one is not rare: a K/V element whose two
//! f32 versions differ by ~sqrt(K)·u relative lands on different f16 values with probability
//! ~sqrt(K)·u / 2^-11 = sqrt(K)·2^-13 (~1e-3 to 1e-2), and each such flip moves the element by
//! 2^-11 relative; attention dilutes it over the keys and dimensions, which keeps it inside the
//! slack on the real geometries (H200 runs: 0.05-0.16 of the bound) but not always on toy ones
//! with few keys (`--synthetic tiny`: 1.6x the bound at head_dim 64 under the CPU emulator; at
//! head_dim 128, 1.0x there and 1.15x on the H200, while greedy, sampled tokens and perplexity
//! agree). A rigorous term for it is still to derive.

use std::io::Write;

use anyhow::Context;
use bonsai_model::backend::cuda::is_absent_device;
use bonsai_model::loader::{open_model, LoadedModel};
use bonsai_kernels::launch::matmul::{B1_ACTIVATION_BITS, F16_GEMM_MIN_TOKENS};
use bonsai_kernels::ops::sample_top_k::{SampleParams, Xoshiro256};
use bonsai_model::{Backend, CpuBackend, CudaBackend, DevicePick, LogitRows, Qwen3, Qwen3State};

use bonsai_model::synthetic::{random_host_weights, random_qwen35_host_weights};

use crate::bench::BENCH_SEED;
use crate::perplexity::negative_log_likelihood;

/// f32 unit roundoff.
const F32_UNIT_ROUNDOFF: f64 = 1.0 / (1u64 << 24) as f64;
/// Headroom of the logit bound over the random-walk estimate (see the module doc).
const BOUND_SLACK: f64 = 16.0;
/// Largest relative perplexity difference accepted (0.1 %).
const PERPLEXITY_REL_LIMIT: f64 = 1e-3;
/// Prompt used when no ids are given.
const DEFAULT_PROMPT: &str = "<|im_start|>user\nA tree?<|im_end|>\n<|im_start|>assistant\n";
/// Random prompt length for --synthetic (more than one GEMV batch: exercises the prefill GEMM).
const SYNTHETIC_PROMPT_LEN: usize = 26;
/// Prompt tokens per forward call.
const CHUNK: usize = 512;

#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    #[command(flatten)]
    pub source: crate::bench::ModelSource,
    /// Greedy steps to compare
    #[arg(short = 'n', long = "n-predict", default_value_t = 64)]
    pub n: usize,
    /// Prompt as token ids (comma-separated); default: a short ChatML prompt, tokenized
    #[arg(long = "prompt-tokens", value_delimiter = ',')]
    pub prompt_tokens: Option<Vec<u32>>,
}

/// What one backend produced.
struct Outcome {
    first_logits: Vec<f32>,
    tokens: Vec<u32>,
    /// The logits that picked the last token (a decode step's when n >= 2).
    last_logits: Vec<f32>,
    perplexity: f64,
}

/// The logit bound for `logits` of a model with `config`'s geometry after forward calls of at
/// most `max_rows` rows each (see the module doc).
pub fn logit_bound(n_layers: usize, k_max: usize, max_rows: usize, logits: &[f32]) -> f64 {
    let mean_square = logits.iter().map(|&l| (l as f64).powi(2)).sum::<f64>() / logits.len().max(1) as f64;
    let sublayers = (2 * n_layers + 1) as f64;
    let rounding = sublayers * (k_max as f64).sqrt() * F32_UNIT_ROUNDOFF;
    let mut activations = 2f64.powi(2 - B1_ACTIVATION_BITS as i32);
    if max_rows >= F16_GEMM_MIN_TOKENS {
        activations += 2f64.powi(-11) / 3f64.sqrt();
    }
    BOUND_SLACK * (rounding + sublayers.sqrt() * activations) * mean_square.sqrt()
}

/// Largest |a - b| (NaN anywhere counts as infinite).
pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(&x, &y)| if x.is_nan() || y.is_nan() { f64::INFINITY } else { (x as f64 - y as f64).abs() }).fold(0.0, f64::max)
}

/// Top-1 minus top-2 logit: how close a greedy pick is to a tie.
pub fn top2_gap(logits: &[f32]) -> f64 {
    let (mut a, mut b) = (f64::NEG_INFINITY, f64::NEG_INFINITY);
    for &l in logits {
        let l = l as f64;
        if l > a {
            b = a;
            a = l;
        } else if l > b {
            b = l;
        }
    }
    a - b
}

fn run_backend<B: Backend>(model: &Qwen3<B>, prompt: &[u32], n: usize, cpu_steps: Option<&mut Vec<Vec<f32>>>) -> anyhow::Result<Outcome> {
    let vocab = model.config().vocab;
    let mut state = model.new_state(prompt.len().min(CHUNK), true)?;
    // Perplexity over the prompt: every row's logits.
    let (mut nll, mut offset) = (0.0f64, 0usize);
    let mut row_logits = vec![0.0f32; vocab];
    for chunk in prompt.chunks(CHUNK) {
        model.forward_chunk(&mut state, chunk, LogitRows::All)?;
        for row in 0..chunk.len() {
            if let Some(&next) = prompt.get(offset + row + 1) {
                model.logits(&state, row, &mut row_logits)?;
                nll += negative_log_likelihood(&row_logits, next);
            }
        }
        offset += chunk.len();
    }
    let perplexity = (nll / (prompt.len() - 1) as f64).exp();
    // Greedy generation from a fresh prefill (the path `generate` takes).
    model.rewind(&mut state, 0)?;
    model.prefill(&mut state, prompt)?;
    let mut first_logits = vec![0.0f32; vocab];
    model.logits(&state, 0, &mut first_logits)?;
    let mut tokens = Vec::with_capacity(n);
    let mut last_logits = first_logits.clone();
    match cpu_steps {
        // The reference keeps every step's logits (for near-tie judgement) and picks on the host.
        Some(steps) => {
            let mut logits = first_logits.clone();
            while tokens.len() < n {
                let id = bonsai_model::sampler::argmax(&logits)?;
                steps.push(logits.clone());
                tokens.push(id);
                if tokens.len() == n {
                    break;
                }
                model.set_next_token(&mut state, id)?;
                model.forward_decode(&mut state)?;
                model.logits(&state, 0, &mut logits)?;
            }
            last_logits = logits;
        }
        None => {
            if n > 0 {
                tokens.push(model.argmax_to_next_token(&mut state)?);
                decode_paused(model, &mut state, DevicePick::Greedy, n, &mut tokens)?;
            }
            if n > 1 {
                // The resumed run ran to its end: nothing was undone after its last step.
                model.logits(&state, 0, &mut last_logits)?;
            }
        }
    }
    Ok(Outcome { first_logits, tokens, last_logits, perplexity })
}

/// The sampled comparison's settings (the CLI defaults at temperature 0.8) and seed.
const SAMPLE_SETTINGS: &str = "T 0.8, top-k 40, top-p 0.95, min-p 0.05, seed 1";
const SAMPLE_PARAMS: SampleParams = SampleParams { inv_temperature: 1.0 / 0.8, top_k: 40, top_p: 0.95, min_p: 0.05 };
const SAMPLE_SEED: u64 = 1;

/// `n` tokens sampled on the backend (the path `generate --temp 0.8` takes), paused half-way
/// or not (see [`decode_paused`]), and the logits of the last step.
fn sampled_run<B: Backend>(model: &Qwen3<B>, prompt: &[u32], n: usize, pause: bool) -> anyhow::Result<(Vec<u32>, Vec<f32>)> {
    let mut state = model.new_state(prompt.len().min(CHUNK), false)?;
    model.seed_sampler(&mut state, Xoshiro256::new(SAMPLE_SEED).state())?;
    model.prefill(&mut state, prompt)?;
    let pick = DevicePick::Sample(SAMPLE_PARAMS);
    let mut tokens = Vec::with_capacity(n);
    if n > 0 {
        tokens.push(model.pick_to_next_token(&mut state, pick)?);
        if pause {
            decode_paused(model, &mut state, pick, n, &mut tokens)?;
        } else {
            model.decode_run(&mut state, pick, n - 1, |id| {
                tokens.push(id);
                Ok(true)
            })?;
        }
    }
    let mut logits = vec![0.0f32; model.config().vocab];
    model.logits(&state, 0, &mut logits)?;
    Ok((tokens, logits))
}

/// Decodes until `tokens` holds `n` ids with one pause half-way: the first `decode_run` is
/// stopped by its caller while the backend may still have the next step queued (CUDA), which the
/// run then undoes (position, next input, generator), and a second run goes on from there. Any
/// flaw in that undo shows as a divergence from the CPU or from an unpaused run.
fn decode_paused<B: Backend>(model: &Qwen3<B>, state: &mut Qwen3State<B>, pick: DevicePick, n: usize, tokens: &mut Vec<u32>) -> anyhow::Result<()> {
    let pause_at = tokens.len() + (n - tokens.len()) / 2;
    model.decode_run(state, pick, n - tokens.len(), |id| {
        tokens.push(id);
        Ok(tokens.len() < pause_at)
    })?;
    let rest = n - tokens.len();
    model.decode_run(state, pick, rest, |id| {
        tokens.push(id);
        Ok(true)
    })?;
    Ok(())
}

pub fn run(args: CheckArgs, config: &bonsai_kernels::Config) -> anyhow::Result<()> {
    let gpu = CudaBackend::open(config).map_err(|e| {
        let why = if is_absent_device(&e) { "no CUDA device found" } else { "the GPU did not open" };
        anyhow::Error::new(e).context(format!("bonsai check compares the CPU with the GPU, but {why}"))
    })?;
    let model = args.source.path()?;
    match (&model, args.source.synthetic) {
        (Some(path), _) => {
            let cpu_model: LoadedModel<CpuBackend> =
                open_model(path, CpuBackend, None).with_context(|| format!("loading {} on the CPU", path.display()))?;
            let prompt = match (&args.prompt_tokens, &cpu_model.tokenizer) {
                (Some(ids), _) => ids.clone(),
                (None, Some(tokenizer)) => tokenizer.encode(DEFAULT_PROMPT)?,
                (None, None) => {
                    eprintln!("note: {} has no tokenizer: the prompt is {SYNTHETIC_PROMPT_LEN} random token ids", path.display());
                    random_prompt(cpu_model.model.config().vocab)
                }
            };
            let ctx = cpu_model.model.max_seq();
            check_prompt(&prompt, args.n, cpu_model.model.config().vocab, ctx)?;
            let gpu_model = open_model(path, gpu, Some(ctx)).with_context(|| format!("loading {} on the GPU", path.display()))?;
            compare(&cpu_model.model, &gpu_model.model, &path.display().to_string(), &prompt, args.n)
        }
        (None, Some(synthetic)) => {
            let vocab = match (synthetic.qwen35(BENCH_SEED), synthetic.geometry()) {
                (Some(config), _) => config.vocab,
                (None, Some(g)) => g.vocab,
                (None, None) => anyhow::bail!("{} has neither a Qwen3 nor a qwen35 geometry", synthetic.name()),
            };
            let prompt = match &args.prompt_tokens {
                Some(ids) => ids.clone(),
                None => random_prompt(vocab),
            };
            let ctx = prompt.len() + args.n;
            check_prompt(&prompt, args.n, vocab, ctx)?;
            let name = format!("{} (synthetic)", synthetic.name());
            // The same seed twice: identical weights on both backends.
            if let Some(config) = synthetic.qwen35(BENCH_SEED) {
                let build = || random_qwen35_host_weights(&config, BENCH_SEED);
                let cpu_model = Qwen3::new_qwen35(CpuBackend, config.clone(), build()?, ctx)?;
                let gpu_model = Qwen3::new_qwen35(gpu, config.clone(), build()?, ctx)?;
                return compare(&cpu_model, &gpu_model, &name, &prompt, args.n);
            }
            let g = synthetic.geometry().context("a Qwen3 synthetic model")?;
            let build = || random_host_weights(&g, synthetic.kind(), BENCH_SEED);
            let cpu_model = Qwen3::new(CpuBackend, g.config(), build()?, ctx)?;
            let gpu_model = Qwen3::new(gpu, g.config(), build()?, ctx)?;
            compare(&cpu_model, &gpu_model, &name, &prompt, args.n)
        }
        (None, None) => anyhow::bail!("give a model file (-m), a repository (-hf) or --synthetic"),
    }
}

/// [`SYNTHETIC_PROMPT_LEN`] random ids below `vocab` (fixed seed).
fn random_prompt(vocab: usize) -> Vec<u32> {
    let mut rng = bonsai_model::sampler::Rng::new(BENCH_SEED);
    (0..SYNTHETIC_PROMPT_LEN).map(|_| (rng.next_u64() % vocab as u64) as u32).collect()
}

fn check_prompt(prompt: &[u32], n: usize, vocab: usize, ctx: usize) -> anyhow::Result<()> {
    if prompt.len() < 2 {
        anyhow::bail!("bonsai check needs a prompt of at least 2 tokens (perplexity), got {}", prompt.len());
    }
    if let Some(&bad) = prompt.iter().find(|&&id| id as usize >= vocab) {
        anyhow::bail!("prompt token {bad} is outside the vocabulary of {vocab} tokens");
    }
    if prompt.len() + n > ctx {
        anyhow::bail!("a prompt of {} tokens and {n} steps exceed the context of {ctx} tokens", prompt.len());
    }
    Ok(())
}

fn compare(cpu_model: &Qwen3<CpuBackend>, gpu_model: &Qwen3<CudaBackend>, name: &str, prompt: &[u32], n: usize) -> anyhow::Result<()> {
    let config = cpu_model.config().clone();
    let mut report = ReportOut::default();
    report.line(format_args!("check: {name} | cpu: {} | gpu: {}", cpu_model.backend().describe(), gpu_model.backend().describe()));
    report.line(format_args!("prompt: {} tokens | greedy steps: {n}", prompt.len()));
    let mut cpu_steps = Vec::new();
    let cpu = run_backend(cpu_model, prompt, n, Some(&mut cpu_steps)).context("running on the CPU")?;
    let gpu = run_backend(gpu_model, prompt, n, None).context("running on the GPU")?;

    let k_max = config.hidden.max(config.ffn).max(config.n_q_heads * config.head_dim);
    // qwen35: the DeltaNet output projection reads value_dim (the conv, the recurrence's
    // head-sized dots and the Hadamard blocks are shorter than hidden).
    let k_max = cpu_model.hybrid_config().map_or(k_max, |h| k_max.max(h.ssm_value_dim()));
    // The largest forward call: the prompt's first chunk (decode steps are single rows).
    let prompt_rows = prompt.len().min(CHUNK);
    let mut failures = Vec::new();
    // The GPU's logits against the CPU's, within the bound derived in the module doc.
    let mut compare_logits = |report: &mut ReportOut, what: &str, cpu: &[f32], gpu: &[f32]| {
        let diff = max_abs_diff(cpu, gpu);
        let bound = logit_bound(config.n_layers, k_max, prompt_rows, cpu);
        let verdict = if diff <= bound { "ok" } else { "MISMATCH" };
        report.line(format_args!("{what} logits: max |cpu - gpu| = {diff:.3e}, bound {bound:.3e} ({:.3} of it) -> {verdict}", diff / bound));
        if diff > bound {
            failures.push(format!("{what} logits differ by {diff:.3e} > bound {bound:.3e}"));
        }
    };
    compare_logits(&mut report, "first-step", &cpu.first_logits, &gpu.first_logits);
    match cpu.tokens.iter().zip(&gpu.tokens).position(|(a, b)| a != b) {
        None => {
            report.line(format_args!("greedy: identical for {} steps", cpu.tokens.len()));
            // The last step's logits came through the decode path (on the GPU the captured step,
            // its fused layers and LM head), same inputs on both sides, same bound.
            if n > 1 {
                compare_logits(&mut report, "last-step", &cpu.last_logits, &gpu.last_logits);
            }
        }
        Some(step) => {
            let logits = &cpu_steps[step];
            let (gap, tie_bound) = (top2_gap(logits), logit_bound(config.n_layers, k_max, prompt_rows, logits));
            let near_tie = gap <= 2.0 * tie_bound;
            report.line(format_args!(
                "greedy: first divergence at step {step}: cpu {} gpu {} (cpu top-2 gap {gap:.3e}, 2x bound {:.3e}: {})",
                cpu.tokens[step],
                gpu.tokens[step],
                2.0 * tie_bound,
                if near_tie { "a near tie, within rounding" } else { "MISMATCH" }
            ));
            if !near_tie {
                failures.push(format!("greedy tokens diverge at step {step}"));
            }
        }
    }
    // Sampling on each backend with one seed. Informational: the draws themselves are checked
    // exactly by `bonsai kernels verify` (sample_top_k); here logits that differ within the bound
    // can move a draw that lands within ~1e-5 of a cumulative boundary, so a late divergence is
    // possible without any bug.
    let (cpu_sampled, _) = sampled_run(cpu_model, prompt, n, false).context("sampling on the CPU")?;
    let (gpu_sampled, gpu_last_logits) = sampled_run(gpu_model, prompt, n, false).context("sampling on the GPU")?;
    match cpu_sampled.iter().zip(&gpu_sampled).position(|(a, b)| a != b) {
        None => report.line(format_args!("sampled ({SAMPLE_SETTINGS}): identical for {} steps", cpu_sampled.len())),
        Some(step) => report.line(format_args!(
            "sampled ({SAMPLE_SETTINGS}): first divergence at step {step}: cpu {} gpu {} (informational)",
            cpu_sampled[step], gpu_sampled[step]
        )),
    }
    // Where the host paused must change nothing on one backend, to the bit: the same kernels see
    // the same inputs at the same positions with the same draws (a position or generator off by
    // one step changes the last logits even where the tokens happen to agree).
    let (gpu_paused, paused_last_logits) = sampled_run(gpu_model, prompt, n, true).context("sampling on the GPU with a pause")?;
    let logits_equal = paused_last_logits.iter().zip(&gpu_last_logits).all(|(a, b)| a.to_bits() == b.to_bits());
    if gpu_paused == gpu_sampled && logits_equal {
        report.line(format_args!("sampled on the gpu, paused half-way and resumed: identical tokens and last logits for {} steps", gpu_paused.len()));
    } else {
        report.line(format_args!("sampled on the gpu, paused half-way and resumed: differs from the unpaused run -> MISMATCH"));
        failures.push("a paused and resumed run differs from an unpaused one".to_string());
    }
    // Independent sequences in one batch on the GPU against each sequence alone on the CPU: a
    // prefill of different lengths, then one decode step of each.
    let mut batch_worst = 0.0f64;
    let prompts = batch_prompts(prompt);
    let batch_rows = prompts.iter().map(|p| p.len()).sum();
    for (what, cpu_rows, gpu_rows) in batch_logits(cpu_model, gpu_model, &prompts)? {
        for (c, g) in cpu_rows.iter().zip(&gpu_rows) {
            let ratio = max_abs_diff(c, g) / logit_bound(config.n_layers, k_max, batch_rows, c);
            batch_worst = batch_worst.max(ratio);
            if ratio > 1.0 {
                failures.push(format!("{what} of a batch of {BATCH_SEQUENCES} sequences differs by {ratio:.3} of the bound"));
            }
        }
    }
    let verdict = if batch_worst <= 1.0 { "ok" } else { "MISMATCH" };
    report.line(format_args!(
        "a batch of {BATCH_SEQUENCES} sequences (prefill, then decode steps of {BATCH_SCHEDULE:?}) against each alone on the cpu: {batch_worst:.3} of the bound -> {verdict}"
    ));
    let rel = (cpu.perplexity - gpu.perplexity).abs() / cpu.perplexity;
    let verdict = if rel <= PERPLEXITY_REL_LIMIT { "ok" } else { "MISMATCH" };
    report.line(format_args!("perplexity over the prompt: cpu {:.6} gpu {:.6}, relative difference {:.2e} (limit {PERPLEXITY_REL_LIMIT:.0e}) -> {verdict}", cpu.perplexity, gpu.perplexity, rel));
    if rel > PERPLEXITY_REL_LIMIT {
        failures.push(format!("perplexity differs by {:.3} %", rel * 100.0));
    }
    if !failures.is_empty() {
        anyhow::bail!("check failed: {}", failures.join("; "));
    }
    report.line(format_args!("check passed"));
    Ok(report.finish()?)
}

/// Sequences in the batch check.
const BATCH_SEQUENCES: usize = 3;

/// The batch check's prompts: suffixes of `prompt` of different lengths.
fn batch_prompts(prompt: &[u32]) -> Vec<&[u32]> {
    (0..BATCH_SEQUENCES).map(|b| &prompt[b * prompt.len() / (2 * BATCH_SEQUENCES)..]).collect()
}

/// Decode steps of the batch check after the prefill: the sequences each takes. The last two
/// have the same shape but other sequences, so a plan (and its graph) made for one set of
/// sequences must serve another.
const BATCH_SCHEDULE: [&[usize]; 3] = [&[0, 1, 2], &[0, 2], &[1, 2]];

/// Per stage (the prefill, then each decode step of [`BATCH_SCHEDULE`]): each sequence's last
/// logits alone on the CPU and in one batch on the GPU (one forward call of all prompts, then
/// decode steps of the scheduled sequences, each fed the CPU's greedy pick).
fn batch_logits(
    cpu_model: &Qwen3<CpuBackend>,
    gpu_model: &Qwen3<CudaBackend>,
    prompts: &[&[u32]],
) -> anyhow::Result<Vec<(String, Vec<Vec<f32>>, Vec<Vec<f32>>)>> {
    let vocab = cpu_model.config().vocab;
    let logits_of = |download: &dyn Fn(&mut [f32]) -> Result<(), bonsai_model::ModelError>| -> anyhow::Result<Vec<f32>> {
        let mut out = vec![0.0f32; vocab];
        download(&mut out)?;
        Ok(out)
    };
    let greedy = |logits: &[f32]| logits.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map_or(0, |(i, _)| i as u32);
    // Alone on the CPU: each sequence's logits after its prompt and after each decode step it
    // takes, and the greedy pick fed into each step.
    let steps_of = |b: usize| BATCH_SCHEDULE.iter().filter(|s| s.contains(&b)).count();
    let (mut cpu_logits, mut cpu_picks) = (Vec::new(), Vec::new());
    for (b, p) in prompts.iter().enumerate() {
        let mut state = cpu_model.new_state(CHUNK, false)?;
        cpu_model.prefill(&mut state, p)?;
        let mut logits = vec![logits_of(&|out| cpu_model.logits(&state, 0, out))?];
        let mut picks = Vec::new();
        for _ in 0..steps_of(b) {
            let id = greedy(logits.last().expect("the prefill's"));
            picks.push(id);
            cpu_model.set_next_token(&mut state, id)?;
            cpu_model.forward_decode(&mut state)?;
            logits.push(logits_of(&|out| cpu_model.logits(&state, 0, out))?);
        }
        cpu_logits.push(logits);
        cpu_picks.push(picks);
    }
    // Batched on the GPU.
    let total: usize = prompts.iter().map(|p| p.len()).sum();
    let mut state = gpu_model.new_batch_state(BATCH_SEQUENCES, total, false)?;
    let chunks: Vec<(usize, &[u32])> = prompts.iter().copied().enumerate().collect();
    gpu_model.forward_batch(&mut state, &chunks, LogitRows::Last).context("a batched prefill on the GPU")?;
    let rows = |state: &bonsai_model::Qwen3State<CudaBackend>, n: usize| -> anyhow::Result<Vec<Vec<f32>>> {
        (0..n).map(|b| logits_of(&|out| gpu_model.logits(state, b, out))).collect()
    };
    let cpu_prefill = cpu_logits.iter().map(|l| l[0].clone()).collect();
    let mut stages = vec![("prefill".to_string(), cpu_prefill, rows(&state, BATCH_SEQUENCES)?)];
    let mut taken = [0usize; BATCH_SEQUENCES];
    for seqs in BATCH_SCHEDULE {
        let steps: Vec<(usize, &[u32])> = seqs.iter().map(|&b| (b, std::slice::from_ref(&cpu_picks[b][taken[b]]))).collect();
        gpu_model.forward_batch(&mut state, &steps, LogitRows::Last).with_context(|| format!("a batched decode step of sequences {seqs:?} on the GPU"))?;
        let cpu_rows = seqs.iter().map(|&b| cpu_logits[b][taken[b] + 1].clone()).collect();
        seqs.iter().for_each(|&b| taken[b] += 1);
        stages.push((format!("decode step of sequences {seqs:?}"), cpu_rows, rows(&state, seqs.len())?));
    }
    Ok(stages)
}

/// Stdout that keeps its first write error instead of returning it at once, so a reader that
/// closes the pipe early cannot hide a mismatch: the verdict (exit 1) wins, and only a passing
/// check ends with the write error (BrokenPipe, which main treats as a quiet success).
#[derive(Default)]
struct ReportOut {
    first_error: Option<std::io::Error>,
}

impl ReportOut {
    fn line(&mut self, text: std::fmt::Arguments) {
        if self.first_error.is_none() {
            if let Err(e) = writeln!(std::io::stdout().lock(), "{text}") {
                self.first_error = Some(e);
            }
        }
    }

    fn finish(self) -> std::io::Result<()> {
        self.first_error.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bound_scales_with_layers_length_and_logit_size() {
        let logits = [3.0f32, -4.0, 0.0, 5.0];
        let b = logit_bound(2, 256, 1, &logits);
        // rms = sqrt((9 + 16 + 0 + 25) / 4) = sqrt(12.5); 16 · ((2·2 + 1) · sqrt(256) · 2^-24
        // + sqrt(5) · 2^(2 - P)) · rms.
        let quantization = 5f64.sqrt() * 2f64.powi(2 - B1_ACTIVATION_BITS as i32);
        let want = 16.0 * (5.0 * 16.0 * F32_UNIT_ROUNDOFF + quantization) * 12.5f64.sqrt();
        assert!((b - want).abs() < 1e-15, "{b} vs {want}");
        assert!(logit_bound(4, 256, 1, &logits) > b && logit_bound(2, 1024, 1, &logits) > b);
        let doubled: Vec<f32> = logits.iter().map(|l| 2.0 * l).collect();
        assert!((logit_bound(2, 256, 1, &doubled) - 2.0 * b).abs() < 1e-15);
        // Up to one row short of the f16 GEMM nothing changes; from there on its term adds
        // 16 · sqrt(5) · 2^-11 / sqrt(3) · rms.
        assert_eq!(logit_bound(2, 256, F16_GEMM_MIN_TOKENS - 1, &logits), b);
        let f16 = 16.0 * 5f64.sqrt() * 2f64.powi(-11) / 3f64.sqrt() * 12.5f64.sqrt();
        assert!((logit_bound(2, 256, F16_GEMM_MIN_TOKENS, &logits) - (b + f16)).abs() < 1e-12);
    }

    /// The two paths `check` compares, both on the CPU: host-picked greedy with every step's
    /// logits vs `decode_greedy`; same tokens, same logits, same perplexity, and a finite bound.
    #[test]
    fn host_and_device_greedy_paths_agree_on_the_cpu() {
        use bonsai_model::synthetic::{random_host_weights, Geometry, WeightKind};
        let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64);
        let g = Geometry::tiny();
        let host = random_host_weights(&g, WeightKind::Ternary, seed).expect("weights");
        let model = Qwen3::new(CpuBackend, g.config(), host, 64).expect("model");
        let prompt: Vec<u32> = (0..9u32).map(|i| (i * 37 + seed as u32) % g.vocab as u32).collect();
        let mut steps = Vec::new();
        let host_path = run_backend(&model, &prompt, 12, Some(&mut steps)).expect("host path");
        let device_path = run_backend(&model, &prompt, 12, None).expect("device path");
        assert_eq!(host_path.tokens, device_path.tokens, "seed {seed}");
        assert_eq!(steps.len(), 12, "seed {seed}");
        assert_eq!(max_abs_diff(&host_path.first_logits, &device_path.first_logits), 0.0, "seed {seed}");
        assert_eq!(host_path.perplexity, device_path.perplexity, "seed {seed}");
        assert!(host_path.perplexity.is_finite() && host_path.perplexity > 1.0, "seed {seed}");
        let bound = logit_bound(g.n_layers, g.ffn, prompt.len(), &host_path.first_logits);
        assert!(bound > 0.0 && bound.is_finite(), "seed {seed}");
    }

    #[test]
    fn diffs_gaps_and_nan() {
        assert_eq!(max_abs_diff(&[1.0, 2.0, 3.0], &[1.0, 2.5, 2.0]), 1.0);
        assert_eq!(max_abs_diff(&[1.0, f32::NAN], &[1.0, 0.0]), f64::INFINITY);
        assert_eq!(top2_gap(&[0.5, 2.0, 1.25, -1.0]), 0.75);
        assert_eq!(top2_gap(&[2.0, 1.0, 2.0]), 0.0, "a tie has no gap");
    }
}

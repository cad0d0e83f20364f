//! The generation loop on a tiny random model: device-side greedy equals host greedy, stop
//! tokens and budgets end it, sampling is reproducible per seed, and limits are checked first.

mod common;

use bonsai_model::generate::{generate, Event, GenerateOptions, GenerationStats, StopReason};
use bonsai_model::qwen3::HostWeights;
use bonsai_model::sampler::{Sampler, SamplerConfig};
use bonsai_model::synthetic::{random_tensors, WeightKind};
use bonsai_model::{CpuBackend, ModelError, Qwen3};
use common::{fresh_seed, tiny_geometry};

const PROMPT: [u32; 4] = [3, 1, 4, 1];

fn model(seed: u64) -> Qwen3<CpuBackend> {
    let g = tiny_geometry();
    let host = HostWeights::load(&g.config(), random_tensors(&g, WeightKind::OneBit, seed).unwrap()).unwrap();
    Qwen3::new(CpuBackend, g.config(), host, g.context_len).unwrap()
}

fn run(model: &Qwen3<CpuBackend>, config: SamplerConfig, options: &GenerateOptions) -> Result<(GenerationStats, usize), ModelError> {
    let mut state = model.new_state(PROMPT.len(), false)?;
    let mut sampler = Sampler::new(config)?;
    let mut logit_events = 0;
    let mut streamed = Vec::new();
    let stats = generate(model, &mut state, &mut sampler, &PROMPT, &mut Vec::new(), options, |e| {
        match e {
            Event::Logits(l) => {
                assert_eq!(l.len(), model.config().vocab);
                logit_events += 1;
            }
            Event::Token(id) => streamed.push(id),
        }
        Ok(())
    })?;
    assert_eq!(streamed, stats.generated);
    assert_eq!(state.n_past(), PROMPT.len() + stats.decode_steps);
    Ok((stats, logit_events))
}

fn options(n: usize, want_logits: bool) -> GenerateOptions {
    GenerateOptions { max_new_tokens: n, stop_ids: Vec::new(), want_logits }
}

#[test]
fn device_greedy_equals_host_greedy() {
    let seed = fresh_seed();
    let m = model(seed);
    let (device, events) = run(&m, SamplerConfig::default(), &options(10, false)).unwrap();
    assert_eq!(events, 0);
    let (host, events) = run(&m, SamplerConfig::default(), &options(10, true)).unwrap();
    assert_eq!(events, 10);
    assert_eq!(device.generated, host.generated, "seed {seed}");
    assert_eq!(device.stop, StopReason::MaxTokens);
    assert_eq!(device.decode_steps, 9);
}

#[test]
fn stop_token_ends_generation_and_is_reported() {
    let seed = fresh_seed();
    let m = model(seed);
    let (free, _) = run(&m, SamplerConfig::default(), &options(6, false)).unwrap();
    let stop = free.generated[2];
    let first = free.generated.iter().position(|&t| t == stop).unwrap();
    let stopped = GenerateOptions { stop_ids: vec![stop], ..options(6, false) };
    let (stats, _) = run(&m, SamplerConfig::default(), &stopped).unwrap();
    assert_eq!(stats.generated, free.generated[..=first], "seed {seed}");
    assert_eq!(stats.stop, StopReason::StopToken(stop));
}

#[test]
fn sampling_is_reproducible_per_seed() {
    let seed = fresh_seed();
    let m = model(seed);
    let config = SamplerConfig { temperature: 1.0, top_k: 50, top_p: 0.9, seed, ..SamplerConfig::default() };
    let (a, _) = run(&m, config.clone(), &options(12, false)).unwrap();
    let (b, _) = run(&m, config, &options(12, false)).unwrap();
    assert_eq!(a.generated, b.generated, "seed {seed}");
}

#[test]
fn backend_sampling_equals_host_sampling_and_hands_the_generator_back() {
    let seed = fresh_seed();
    let m = model(seed);
    let config = SamplerConfig { temperature: 0.9, top_k: 40, top_p: 0.95, min_p: 0.05, seed, ..SamplerConfig::default() };
    assert!(Sampler::new(config.clone()).unwrap().device_pick().is_some(), "these settings must sample on the backend");
    // want_logits forces the host sampler; without it the backend draws with the same generator.
    let (device, events) = run(&m, config.clone(), &options(12, false)).unwrap();
    assert_eq!(events, 0);
    let (host, _) = run(&m, config.clone(), &options(12, true)).unwrap();
    assert_eq!(device.generated, host.generated, "seed {seed}");

    // Two turns on one state: the second continues the stream of draws whichever side samples.
    let turns = |want_logits: bool| {
        let mut state = m.new_state(PROMPT.len(), false).unwrap();
        let mut sampler = Sampler::new(config.clone()).unwrap();
        let mut history = Vec::new();
        let mut out = Vec::new();
        for _ in 0..2 {
            let stats = generate(&m, &mut state, &mut sampler, &PROMPT, &mut history, &options(5, want_logits), |_| Ok(())).unwrap();
            out.extend(stats.generated);
        }
        (out, sampler.rng_state())
    };
    assert_eq!(turns(false), turns(true), "seed {seed}");
}

#[test]
fn budget_beyond_the_context_is_refused_before_running() {
    let m = model(fresh_seed());
    let ctx = m.max_seq();
    // Prompt 4 + 61 new tokens feeds 4 + 60 = 64 = ctx: fits. One more does not.
    assert!(run(&m, SamplerConfig::default(), &options(ctx - PROMPT.len() + 1, false)).is_ok());
    let err = run(&m, SamplerConfig::default(), &options(ctx - PROMPT.len() + 2, false)).unwrap_err();
    assert!(matches!(err, ModelError::ContextFull { need: 65, ctx: 64 }), "{err}");
}

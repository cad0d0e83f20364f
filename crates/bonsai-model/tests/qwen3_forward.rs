//! Whole-model checks on tiny random models, 1-bit and ternary: the CPU backend against a plain
//! f64 forward, batched prefill against token-by-token decode, chunking, rewind, and limits.
//!
//! Bound used throughout (derivation): both sides compute the same function with the same f16
//! KV cache; the engine accumulates in f32. A K-term f32 dot product is off by at most
//! γ_K ≈ K·2^-24 ≈ 3e-5 (K ≤ 512) relative to Σ|terms|; a layer chains ~10 such ops, so two
//! layers compound to ≲ 6e-4 relative at first order, and the rare f16 rounding flip of a cached
//! element (2^-11 of one value, averaged down by the softmax) stays below that. We allow
//! `LOGIT_TOL = 1e-3` of the largest |logit| (≈1.6x the first-order worst case) and print the
//! measured error.

mod common;

use bonsai_model::synthetic::{random_tensors, Geometry, WeightKind};
use bonsai_model::qwen3::HostWeights;
use bonsai_model::sampler::Rng;
use bonsai_model::{CpuBackend, LogitRows, ModelError, Qwen3};
use common::{fresh_seed, naive_forward, tiny_geometry};

const LOGIT_TOL: f64 = 1e-3;
const KINDS: [WeightKind; 2] = [WeightKind::OneBit, WeightKind::Ternary];
const PROMPT_LEN: usize = 12;

fn cpu_model(g: &Geometry, kind: WeightKind, seed: u64) -> Qwen3<CpuBackend> {
    let host = HostWeights::load(&g.config(), random_tensors(g, kind, seed).unwrap()).unwrap();
    Qwen3::new(CpuBackend, g.config(), host, g.context_len).unwrap()
}

fn random_tokens(rng: &mut Rng, n: usize, vocab: usize) -> Vec<u32> {
    (0..n).map(|_| (rng.next_u64() % vocab as u64) as u32).collect()
}

/// All-row logits of one batched forward.
fn batched_logits(model: &Qwen3<CpuBackend>, tokens: &[u32]) -> Vec<Vec<f32>> {
    let vocab = model.config().vocab;
    let mut state = model.new_state(tokens.len(), true).unwrap();
    model.forward_chunk(&mut state, tokens, LogitRows::All).unwrap();
    (0..tokens.len())
        .map(|row| {
            let mut out = vec![0.0; vocab];
            model.logits(&state, row, &mut out).unwrap();
            out
        })
        .collect()
}

/// Largest |a - b| over all rows, and the largest |b|.
fn max_diff(a: &[Vec<f32>], b: &[Vec<f64>]) -> (f64, f64) {
    let mut diff = 0.0f64;
    let mut scale = 0.0f64;
    for (ra, rb) in a.iter().zip(b) {
        for (&x, &y) in ra.iter().zip(rb) {
            assert!(x.is_finite(), "non-finite logit");
            diff = diff.max((x as f64 - y).abs());
            scale = scale.max(y.abs());
        }
    }
    (diff, scale)
}

fn widen(rows: &[Vec<f32>]) -> Vec<Vec<f64>> {
    rows.iter().map(|r| r.iter().map(|&x| x as f64).collect()).collect()
}

#[test]
fn cpu_forward_matches_plain_f64_forward() {
    let g = tiny_geometry();
    for kind in KINDS {
        let seed = fresh_seed();
        let mut rng = Rng::new(seed);
        let tokens = random_tokens(&mut rng, PROMPT_LEN, g.vocab);
        let want = naive_forward(&g, &random_tensors(&g, kind, seed).unwrap(), &tokens);
        let got = batched_logits(&cpu_model(&g, kind, seed), &tokens);
        let (diff, scale) = max_diff(&got, &want);
        println!("{kind:?}: max |cpu - f64| = {diff:.3e} (max |logit| {scale:.3})");
        assert!(scale > 0.1, "seed {seed}: logits suspiciously flat ({scale})");
        assert!(diff <= LOGIT_TOL * scale, "seed {seed} {kind:?}: diff {diff:e} > {LOGIT_TOL} x {scale}");
    }
}

#[test]
fn batched_prefill_matches_token_by_token_decode() {
    let g = tiny_geometry();
    for kind in KINDS {
        let seed = fresh_seed();
        let mut rng = Rng::new(seed);
        let tokens = random_tokens(&mut rng, PROMPT_LEN, g.vocab);
        let model = cpu_model(&g, kind, seed);
        let batched = batched_logits(&model, &tokens);

        let mut state = model.new_state(1, false).unwrap();
        let mut stepped = Vec::new();
        for (i, &t) in tokens.iter().enumerate() {
            if i == 0 {
                model.prefill(&mut state, &[t]).unwrap();
            } else {
                model.set_next_token(&mut state, t).unwrap();
                model.forward_decode(&mut state).unwrap();
            }
            let mut out = vec![0.0; g.vocab];
            model.logits(&state, 0, &mut out).unwrap();
            stepped.push(out);
        }
        let (diff, scale) = max_diff(&stepped, &widen(&batched));
        println!("{kind:?}: max |decode - prefill| = {diff:.3e} (max |logit| {scale:.3})");
        assert!(diff <= LOGIT_TOL * scale, "seed {seed} {kind:?}: diff {diff:e}");
    }
}

#[test]
fn chunked_prefill_and_rewind_reproduce_the_same_logits() {
    let g = tiny_geometry();
    let seed = fresh_seed();
    let mut rng = Rng::new(seed);
    let tokens = random_tokens(&mut rng, PROMPT_LEN, g.vocab);
    let model = cpu_model(&g, WeightKind::OneBit, seed);
    let last = |state: &bonsai_model::Qwen3State<CpuBackend>| {
        let mut out = vec![0.0; g.vocab];
        model.logits(state, 0, &mut out).unwrap();
        vec![out]
    };
    let mut whole = model.new_state(PROMPT_LEN, false).unwrap();
    model.prefill(&mut whole, &tokens).unwrap();
    let want = widen(&last(&whole));

    // Chunks of 5 (not a divisor of 12) exercise a partial last chunk.
    let mut chunked = model.new_state(5, false).unwrap();
    model.prefill(&mut chunked, &tokens).unwrap();
    assert_eq!(chunked.n_past(), PROMPT_LEN);
    let (diff, scale) = max_diff(&last(&chunked), &want);
    assert!(diff <= LOGIT_TOL * scale, "seed {seed}: chunked diff {diff:e}");

    // Rewind to a shared prefix, feed a different tail, then the original tail again.
    let keep = PROMPT_LEN / 2;
    model.rewind(&mut chunked, keep).unwrap();
    model.prefill(&mut chunked, &random_tokens(&mut rng, 3, g.vocab)).unwrap();
    model.rewind(&mut chunked, keep).unwrap();
    model.prefill(&mut chunked, &tokens[keep..]).unwrap();
    let (diff, scale) = max_diff(&last(&chunked), &want);
    assert!(diff <= LOGIT_TOL * scale, "seed {seed}: rewind diff {diff:e}");
}

#[test]
fn tied_embeddings_use_token_embd_as_the_head() {
    let g = tiny_geometry();
    let seed = fresh_seed();
    let mut rng = Rng::new(seed);
    let tokens = random_tokens(&mut rng, 5, g.vocab);
    let mut tensors = random_tensors(&g, WeightKind::OneBit, seed).unwrap();
    tensors.tensors.remove("output.weight");
    let want = naive_forward(&g, &tensors, &tokens);
    let mut config = g.config();
    config.tied_embeddings = true;
    let host = HostWeights::load(&config, tensors).unwrap();
    assert!(host.output.is_none());
    let model = Qwen3::new(CpuBackend, config, host, g.context_len).unwrap();
    let (diff, scale) = max_diff(&batched_logits(&model, &tokens), &want);
    assert!(diff <= LOGIT_TOL * scale, "seed {seed}: diff {diff:e}");
}

#[test]
fn context_overflow_is_a_typed_error() {
    let g = Geometry { context_len: 8, ..tiny_geometry() };
    let model = cpu_model(&g, WeightKind::OneBit, fresh_seed());
    let mut state = model.new_state(4, false).unwrap();
    let err = model.prefill(&mut state, &[1; 9]).unwrap_err();
    assert!(matches!(err, ModelError::ContextFull { need: 9, ctx: 8 }), "{err}");
    model.prefill(&mut state, &[1; 8]).unwrap();
    model.set_next_token(&mut state, 2).unwrap();
    assert!(matches!(model.forward_decode(&mut state), Err(ModelError::ContextFull { .. })));
    assert!(model.forward_chunk(&mut state, &[], LogitRows::Last).is_err());
}

#[test]
fn yarn_rope_scaling_is_honoured_and_linear_is_refused() {
    use bonsai_gguf::{RopeScaling, RopeScalingKind};
    let g = tiny_geometry();
    let seed = fresh_seed();
    let mut rng = Rng::new(seed);
    let tokens = random_tokens(&mut rng, PROMPT_LEN, g.vocab);
    let build = |scaling: Option<RopeScaling>| {
        let mut config = g.config();
        config.rope_scaling = scaling;
        let host = HostWeights::load(&config, random_tensors(&g, WeightKind::OneBit, seed).unwrap()).unwrap();
        Qwen3::new(CpuBackend, config, host, g.context_len)
    };
    // Factor 4 over an original context of 16, as Bonsai-8B asks (4 over 16,384), scaled down.
    let yarn = RopeScaling { kind: RopeScalingKind::Yarn, factor: 4.0, original_context_len: 16, beta_fast: 32.0, beta_slow: 1.0 };
    let scaled = batched_logits(&build(Some(yarn.clone())).unwrap(), &tokens);
    let plain = batched_logits(&build(None).unwrap(), &tokens);
    assert!(scaled.iter().flatten().all(|v| v.is_finite()));
    // YaRN changes the rotation (and scales cos/sin), so logits differ from plain RoPE.
    let (diff, _) = max_diff(&scaled, &widen(&plain));
    assert!(diff > 1e-3, "seed {seed}: YaRN had no effect ({diff:e})");
    let linear = RopeScaling { kind: RopeScalingKind::Linear, ..yarn };
    assert!(matches!(build(Some(linear)), Err(ModelError::Unsupported(_))));
}

/// [`LOGIT_TOL`]'s derivation for any geometry: 2 layers x ~10 chained ops, each a dot product
/// of at most `k_max` f32 terms off by γ_K ≈ K·2^-24, times the same 1.6 of headroom (at
/// K = 512 this is `LOGIT_TOL`).
fn logit_tol(g: &Geometry) -> f64 {
    let k_max = g.hidden.max(g.ffn).max(g.n_q_heads * g.head_dim).max(512);
    1.6 * (g.n_layers * 10) as f64 * k_max as f64 / (1u64 << 24) as f64
}

/// The GQA groups and head dims the GPU must run as the CPU does (`bonsai check --synthetic
/// gG-hdD` on a GPU): the CPU backend against the plain f64 forward on each.
#[test]
fn every_test_geometry_matches_plain_f64_forward() {
    for (group, head_dim) in [(1, 64), (3, 128), (4, 256), (5, 128), (8, 64)] {
        let g = Geometry::gqa_test(group, head_dim);
        assert_eq!(g.n_q_heads % g.n_kv_heads, 0);
        let seed = fresh_seed();
        let mut rng = Rng::new(seed);
        let tokens = random_tokens(&mut rng, PROMPT_LEN, g.vocab);
        let want = naive_forward(&g, &random_tensors(&g, WeightKind::OneBit, seed).unwrap(), &tokens);
        let got = batched_logits(&cpu_model(&g, WeightKind::OneBit, seed), &tokens);
        let (diff, scale) = max_diff(&got, &want);
        let tol = logit_tol(&g);
        println!("g{group} hd{head_dim}: max |cpu - f64| = {diff:.3e} (max |logit| {scale:.3}, bound {tol:.2e} of it)");
        assert!(diff <= tol * scale, "seed {seed} g{group} hd{head_dim}: diff {diff:e} > {tol:e} x {scale}");
    }
}

/// Independent sequences in one batch give each the logits it gets alone (the program's
/// per-sequence positions, caches and last rows), for prefill chunks of different lengths and
/// then for a decode step of one token each. Batched and alone run the matmuls at different
/// row counts (other CPU tiles), so they agree within the bound, not bit for bit.
#[test]
fn a_batch_of_sequences_gives_each_its_logits_alone() {
    let g = tiny_geometry();
    let seed = fresh_seed();
    let mut rng = Rng::new(seed);
    let model = cpu_model(&g, WeightKind::OneBit, seed);
    let prompts: Vec<Vec<u32>> = [5, 3, 7].iter().map(|&n| random_tokens(&mut rng, n, g.vocab)).collect();
    let next: Vec<u32> = random_tokens(&mut rng, prompts.len(), g.vocab);
    let logits_of = |state: &bonsai_model::Qwen3State<CpuBackend>, row: usize| {
        let mut out = vec![0.0; g.vocab];
        model.logits(state, row, &mut out).unwrap();
        out
    };

    let mut batch = model.new_batch_state(prompts.len(), 16, false).unwrap();
    let chunks: Vec<(usize, &[u32])> = prompts.iter().enumerate().map(|(s, p)| (s, p.as_slice())).collect();
    model.forward_batch(&mut batch, &chunks, LogitRows::Last).unwrap();
    let prefilled: Vec<Vec<f32>> = (0..prompts.len()).map(|b| logits_of(&batch, b)).collect();
    let steps: Vec<(usize, &[u32])> = next.iter().enumerate().map(|(s, t)| (s, std::slice::from_ref(t))).collect();
    model.forward_batch(&mut batch, &steps, LogitRows::Last).unwrap();
    let decoded: Vec<Vec<f32>> = (0..prompts.len()).map(|b| logits_of(&batch, b)).collect();
    // The same calls with the pick on the backend give each sequence its logits' argmax.
    let mut picking = model.new_batch_state(prompts.len(), 16, false).unwrap();
    let argmaxes = |rows: &[Vec<f32>]| rows.iter().map(|l| bonsai_model::sampler::argmax(l).unwrap()).collect::<Vec<u32>>();
    for (call, want) in [(&chunks, &prefilled), (&steps, &decoded)] {
        let picked = model.forward_batch_pick(&mut picking, call, bonsai_model::DevicePick::Greedy).unwrap();
        assert_eq!(picked, argmaxes(want), "seed {seed}");
    }

    for (s, prompt) in prompts.iter().enumerate() {
        assert_eq!(batch.n_past_of(s), prompt.len() + 1);
        let mut alone = model.new_state(16, false).unwrap();
        model.prefill(&mut alone, prompt).unwrap();
        let want_prefill = widen(&[logits_of(&alone, 0)]);
        model.set_next_token(&mut alone, next[s]).unwrap();
        model.forward_decode(&mut alone).unwrap();
        let want_decode = widen(&[logits_of(&alone, 0)]);
        for (what, got, want) in [("prefill", &prefilled[s], &want_prefill), ("decode", &decoded[s], &want_decode)] {
            let (diff, scale) = max_diff(std::slice::from_ref(got), want);
            assert!(diff <= LOGIT_TOL * scale, "seed {seed} sequence {s} {what}: diff {diff:e}");
        }
    }
    // A batch must name its sequences once each, in order, within the state.
    assert!(model.forward_batch(&mut batch, &[(1, &next[..1]), (0, &next[..1])], LogitRows::Last).is_err());
    assert!(model.forward_batch(&mut batch, &[(3, &next[..1])], LogitRows::Last).is_err());
}


/// A prompt prefix copied from another sequence's cache (the server's shared system prompt)
/// continues exactly like the donor: after copying all of the donor's tokens, the same suffix
/// fed to donor and copy in calls of the same shape gives bit-identical logits. A copy of part
/// of the donor's tokens, then the rest of the prompt, gives the logits of the prompt run alone
/// within the bound. Copies beyond the donor's tokens, onto itself or to a missing sequence are
/// refused.
#[test]
fn a_copied_prefix_continues_like_its_donor() {
    let g = tiny_geometry();
    let seed = fresh_seed();
    let mut rng = Rng::new(seed);
    let model = cpu_model(&g, WeightKind::OneBit, seed);
    let prompt = random_tokens(&mut rng, 9, g.vocab);
    let suffix = random_tokens(&mut rng, 3, g.vocab);
    let logits_of = |state: &bonsai_model::Qwen3State<CpuBackend>, row: usize| {
        let mut out = vec![0.0; g.vocab];
        model.logits(state, row, &mut out).unwrap();
        out
    };
    let mut state = model.new_batch_state(3, 16, false).unwrap();
    model.forward_batch(&mut state, &[(0, &prompt[..])], LogitRows::Last).unwrap();
    assert_eq!(model.copy_point(&state, 0, 20), prompt.len());
    model.copy_prefix(&mut state, 0, 1, prompt.len()).unwrap();
    assert_eq!(state.n_past_of(1), prompt.len());
    // Row 0 holds the logits of a call's first (here only) sequence.
    model.forward_batch(&mut state, &[(0, &suffix[..])], LogitRows::Last).unwrap();
    let donor = logits_of(&state, 0);
    model.forward_batch(&mut state, &[(1, &suffix[..])], LogitRows::Last).unwrap();
    assert_eq!(logits_of(&state, 0), donor, "seed {seed}: the copy continues differently");

    // Part of the donor (which now holds prompt + suffix): the first 5 tokens, then the rest.
    model.copy_prefix(&mut state, 0, 2, 5).unwrap();
    model.forward_batch(&mut state, &[(2, &prompt[5..])], LogitRows::Last).unwrap();
    let mut alone = model.new_state(16, false).unwrap();
    model.prefill(&mut alone, &prompt).unwrap();
    let (diff, scale) = max_diff(&[logits_of(&state, 0)], &widen(&[logits_of(&alone, 0)]));
    assert!(diff <= LOGIT_TOL * scale, "seed {seed}: partial copy differs by {diff:e}");

    let held = state.n_past_of(0);
    assert!(model.copy_prefix(&mut state, 0, 1, held + 1).is_err(), "more tokens than the donor holds");
    assert!(model.copy_prefix(&mut state, 1, 1, 2).is_err(), "a copy onto itself");
    assert!(model.copy_prefix(&mut state, 0, 3, 2).is_err(), "a sequence the state lacks");
}

/// The paged KV cache: a sequence takes blocks as it grows and gives them back when it rewinds; a
/// prefix taken from another sequence shares the donor's blocks, and the block a sequence writes
/// next is copied first when shared, so donor and taker each continue as if alone; a call the
/// free blocks cannot hold fails before it runs and leaves every sequence as it was.
#[test]
fn the_paged_cache_shares_prefix_blocks_and_runs_out_cleanly() {
    let g = Geometry { context_len: 256, ..tiny_geometry() };
    let seed = fresh_seed();
    let mut rng = Rng::new(seed);
    let model = cpu_model(&g, WeightKind::OneBit, seed);
    // 150 tokens: blocks of 64, 64 and 22 positions; then 3 and 100 more.
    let prompt = random_tokens(&mut rng, 150, g.vocab);
    let suffix = random_tokens(&mut rng, 3, g.vocab);
    let more = random_tokens(&mut rng, 100, g.vocab);
    let logits_of = |state: &bonsai_model::Qwen3State<CpuBackend>| {
        let mut out = vec![0.0; g.vocab];
        model.logits(state, 0, &mut out).unwrap();
        out
    };
    let alone = |tokens: &[u32]| {
        let mut state = model.new_state(160, false).unwrap();
        model.prefill(&mut state, tokens).unwrap();
        widen(&[logits_of(&state)])
    };
    let close = |what: &str, got: Vec<f32>, want: &[Vec<f64>]| {
        let (diff, scale) = max_diff(&[got], want);
        assert!(diff <= LOGIT_TOL * scale, "seed {seed}: {what} differs by {diff:e}");
    };

    let mut state = model.new_pooled_state(2, 160, false, 5).unwrap();
    assert_eq!(state.kv_blocks(), (5, 5));
    model.forward_batch(&mut state, &[(0, &prompt[..])], LogitRows::Last).unwrap();
    assert_eq!((state.kv_blocks(), state.kv_blocks_of(0)), ((2, 5), 3));
    model.copy_prefix(&mut state, 0, 1, prompt.len()).unwrap();
    assert_eq!((state.kv_blocks(), state.kv_blocks_of(1)), ((2, 5), 3), "shared, not copied");

    // The taker writes into the shared third block first: it gets its own copy.
    model.forward_batch(&mut state, &[(1, &suffix[..])], LogitRows::Last).unwrap();
    let taker = logits_of(&state);
    assert_eq!(state.kv_blocks().0, 1, "one block copied");
    model.forward_batch(&mut state, &[(0, &suffix[..])], LogitRows::Last).unwrap();
    assert_eq!(state.kv_blocks().0, 1, "the donor's third block is its own again: written in place");
    assert_eq!(logits_of(&state), taker, "seed {seed}: donor and taker continue differently");
    let both = [&prompt[..], &suffix[..]].concat();
    close("the taker after the shared prefix", taker, &alone(&both));

    // The donor takes the last free block; the taker's next call finds none and changes nothing.
    model.forward_batch(&mut state, &[(0, &more[..])], LogitRows::Last).unwrap();
    let err = model.forward_batch(&mut state, &[(1, &more[..])], LogitRows::Last).expect_err("no free block");
    assert!(matches!(err, ModelError::KvFull { need: 1, free: 0, total: 5, .. }), "{err}");
    assert_eq!((state.n_past_of(1), state.kv_blocks_of(1)), (153, 3));

    // The donor starting over frees its own blocks (the two the taker shares stay held).
    model.rewind_seq(&mut state, 0, 0).unwrap();
    assert_eq!((state.kv_blocks().0, state.kv_blocks_of(0)), (2, 0));
    model.forward_batch(&mut state, &[(1, &more[..])], LogitRows::Last).unwrap();
    close("the taker after running out once", logits_of(&state), &alone(&[&both[..], &more[..]].concat()));
}

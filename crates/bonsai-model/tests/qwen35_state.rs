//! qwen35 per-sequence state on the CPU (a random `qwen35_tiny` model, Hadamard fold included):
//! sequences of one batch keep separate conv / DeltaNet states and KV caches, a restart from 0
//! reproduces a fresh sequence exactly, and a rewind into the middle of a sequence is refused
//! (a recurrent state cannot drop tokens).

use bonsai_model::synthetic::{qwen35_tiny_config, random_qwen35_host_weights};
use bonsai_model::{CpuBackend, LogitRows, Qwen3, Qwen3State};

const SEED: u64 = 35;
const CTX: usize = 64;

fn model() -> Qwen3<CpuBackend> {
    let config = qwen35_tiny_config(SEED);
    let host = random_qwen35_host_weights(&config, SEED).expect("random weights");
    Qwen3::new_qwen35(CpuBackend, config, host, CTX).expect("model")
}

fn logits(model: &Qwen3<CpuBackend>, state: &Qwen3State<CpuBackend>, row: usize) -> Vec<f32> {
    let mut out = vec![0.0; model.config().vocab];
    model.logits(state, row, &mut out).expect("logits");
    out
}

/// Last-token logits of `tokens` run through a fresh one-sequence state.
fn alone(model: &Qwen3<CpuBackend>, tokens: &[u32]) -> Vec<f32> {
    let mut state = model.new_state(tokens.len(), false).expect("state");
    model.forward_chunk(&mut state, tokens, LogitRows::Last).expect("forward");
    logits(model, &state, 0)
}

#[test]
fn batched_sequences_keep_separate_states() {
    let model = model();
    let (a, b): (Vec<u32>, Vec<u32>) = ((1..9).collect(), (100..105).collect());
    let mut state = model.new_batch_state(2, 16, false).expect("batch state");
    model.forward_batch(&mut state, &[(0, &a[..]), (1, &b[..])], LogitRows::Last).expect("batch");
    let (batch_a, batch_b) = (logits(&model, &state, 0), logits(&model, &state, 1));
    // The batch runs 13 rows through the matmuls where a lone sequence runs 8 or 5: the same
    // function evaluated in f32 by possibly different row-blocked paths. The golden tests measure
    // such path differences (token-by-token decode against batched prefill) at 4e-5 on logits up
    // to 16.6, 2.4e-6 relative; allow 1e-5 of the largest |logit| (4x that). A state mixed up
    // between sequences moves the logits by O(1).
    for (batch, tokens) in [(&batch_a, &a), (&batch_b, &b)] {
        let lone = alone(&model, tokens);
        let scale = lone.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let diff = batch.iter().zip(&lone).fold(0.0f32, |m, (x, y)| m.max((x - y).abs()));
        assert!(diff <= 1e-5 * scale, "a batched sequence differs from running alone by {diff}");
    }
    assert_ne!(batch_a, batch_b);
    // One decode step of both: each continues its own state.
    model.forward_batch(&mut state, &[(0, &[9][..]), (1, &[105][..])], LogitRows::Last).expect("step");
    let mut a_next = a.clone();
    a_next.push(9);
    let lone = alone(&model, &a_next);
    let diff = logits(&model, &state, 0).iter().zip(&lone).fold(0.0f32, |m, (x, y)| m.max((x - y).abs()));
    let scale = lone.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    assert!(diff <= 1e-5 * scale, "sequence 0 after a batched step differs by {diff}");
}

#[test]
fn restart_from_zero_is_a_fresh_sequence_and_mid_rewinds_are_refused() {
    let model = model();
    let tokens: Vec<u32> = (20..32).collect();
    let mut state = model.new_state(tokens.len(), false).expect("state");
    model.forward_chunk(&mut state, &tokens, LogitRows::Last).expect("first run");
    let first = logits(&model, &state, 0);
    // Into the middle: refused, and the state is left as it was.
    let err = model.rewind(&mut state, 5).expect_err("mid-sequence rewind").to_string();
    assert!(err.contains("recurrent state"), "{err}");
    assert_eq!(state.n_past(), tokens.len());
    assert_eq!(model.rewind_point(&state, 0, 5), 0);
    assert_eq!(model.rewind_point(&state, 0, 40), tokens.len());
    // Rewinding to the current length is a no-op.
    model.rewind(&mut state, tokens.len()).expect("rewind to the end");
    // Back to 0 and the same tokens again: bit for bit the first run.
    model.rewind(&mut state, 0).expect("restart");
    model.forward_chunk(&mut state, &tokens, LogitRows::Last).expect("second run");
    assert_eq!(logits(&model, &state, 0), first);
}

/// A hybrid sequence copies all of another's tokens (KV caches and conv / DeltaNet states) or
/// none: the copy then continues bit for bit like its donor, and a copy of part is refused.
#[test]
fn a_recurrent_sequence_is_copied_whole() {
    let model = model();
    let tokens: Vec<u32> = (40..50).collect();
    let mut state = model.new_batch_state(2, 16, false).expect("batch state");
    model.forward_batch(&mut state, &[(0, &tokens[..])], LogitRows::Last).expect("donor");
    assert_eq!(model.copy_point(&state, 0, 4), 0);
    assert_eq!(model.copy_point(&state, 0, 30), tokens.len());
    let err = model.copy_prefix(&mut state, 0, 1, 4).expect_err("a partial copy").to_string();
    assert!(err.contains("recurrent state"), "{err}");
    model.copy_prefix(&mut state, 0, 1, tokens.len()).expect("whole copy");
    // Row 0 holds the logits of a call's first (here only) sequence.
    let [donor, copy] = [0, 1].map(|seq| {
        model.forward_batch(&mut state, &[(seq, &[7, 8][..])], LogitRows::Last).expect("continue");
        logits(&model, &state, 0)
    });
    assert_eq!(copy, donor);
}

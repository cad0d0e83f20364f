//! Reading the committed transformers goldens (`tests/golden/`) and running a loaded model over
//! them on the CPU backend: the pieces both golden tests share.

use std::path::{Path, PathBuf};

use bonsai_model::loader::LoadedModel;
use bonsai_model::{CpuBackend, LogitRows, Qwen3State};
use serde_json::Value;

/// `tests/golden/<folder>`.
pub fn golden_dir(folder: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden").join(folder)
}

/// A golden's JSON file; `maker` names the script that writes it (for the panic message).
pub fn read_json(path: &Path, maker: &str) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e} (run scripts/reference/{maker})", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The token-id list `key` of meta.json.
pub fn ids(meta: &Value, key: &str) -> Vec<u32> {
    let list = meta[key].as_array().unwrap_or_else(|| panic!("meta.json lacks '{key}'"));
    list.iter().map(|v| v.as_u64().unwrap_or_else(|| panic!("meta.json '{key}': {v}")) as u32).collect()
}

/// A logits file: raw little-endian floats of `width` bytes (4: f32, 8: f64), row-major
/// `[n_tokens, vocab]`.
pub fn read_logits(path: &Path, n_tokens: usize, vocab: usize, width: usize) -> Vec<Vec<f64>> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(bytes.len(), n_tokens * vocab * width, "{}: size vs meta.json shape", path.display());
    let flat: Vec<f64> = match width {
        4 => bytes.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")) as f64).collect(),
        8 => bytes.chunks_exact(8).map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes"))).collect(),
        _ => panic!("logits of {width}-byte floats"),
    };
    flat.chunks(vocab).map(<[f64]>::to_vec).collect()
}

/// Logits row `row` of the last forward call, checked finite.
pub fn row_logits(loaded: &LoadedModel<CpuBackend>, state: &Qwen3State<CpuBackend>, row: usize) -> Vec<f64> {
    let mut out = vec![0.0f32; loaded.model.config().vocab];
    loaded.model.logits(state, row, &mut out).expect("logits");
    assert!(out.iter().all(|v| v.is_finite()), "non-finite logit in row {row}");
    out.into_iter().map(f64::from).collect()
}

/// Every position's logits from one batched prefill.
pub fn batched_logits(loaded: &LoadedModel<CpuBackend>, tokens: &[u32]) -> Vec<Vec<f64>> {
    let mut state = loaded.model.new_state(tokens.len(), true).expect("state");
    loaded.model.forward_chunk(&mut state, tokens, LogitRows::All).expect("batched prefill");
    (0..tokens.len()).map(|row| row_logits(loaded, &state, row)).collect()
}

/// Logits of each position from a token-by-token decode (batch of one).
pub fn stepwise_logits(loaded: &LoadedModel<CpuBackend>, tokens: &[u32]) -> Vec<Vec<f64>> {
    let mut state = loaded.model.new_state(1, false).expect("state");
    tokens
        .iter()
        .map(|&id| {
            loaded.model.forward_chunk(&mut state, &[id], LogitRows::Last).expect("decode step");
            row_logits(loaded, &state, 0)
        })
        .collect()
}

/// Greedy continuation of `n` tokens after `prompt`, argmax on the backend.
pub fn greedy(loaded: &LoadedModel<CpuBackend>, prompt: &[u32], n: usize) -> Vec<u32> {
    let model = &loaded.model;
    let mut state = model.new_state(prompt.len(), false).expect("state");
    model.prefill(&mut state, prompt).expect("prefill");
    let mut out = Vec::with_capacity(n);
    for step in 0..n {
        out.push(model.argmax_to_next_token(&mut state).expect("argmax"));
        if step + 1 < n {
            model.forward_decode(&mut state).expect("decode");
        }
    }
    out
}

pub fn max_abs(rows: &[Vec<f64>]) -> f64 {
    rows.iter().flatten().fold(0.0, |m, v| m.max(v.abs()))
}

pub fn max_diff(a: &[Vec<f64>], b: &[Vec<f64>]) -> f64 {
    a.iter().zip(b).flat_map(|(ra, rb)| ra.iter().zip(rb).map(|(x, y)| (x - y).abs())).fold(0.0, f64::max)
}

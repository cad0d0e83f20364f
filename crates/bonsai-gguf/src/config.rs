//! The Qwen3 geometry, read from `qwen3.*` metadata. Nothing is derived that the file states:
//! head_dim comes from `attention.key_length`, never hidden / heads.

use crate::error::GgufError;
use crate::keys::{self, tensor};
use crate::reader::GgufFile;

/// YaRN's default ramp bounds (llama.cpp / the YaRN paper) when the file gives none.
pub const YARN_DEFAULT_BETA_FAST: f64 = 32.0;
pub const YARN_DEFAULT_BETA_SLOW: f64 = 1.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RopeScalingKind {
    Yarn,
    Linear,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RopeScaling {
    pub kind: RopeScalingKind,
    pub factor: f64,
    pub original_context_len: usize,
    pub beta_fast: f64,
    pub beta_slow: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Qwen3Config {
    pub n_layers: usize,
    pub hidden: usize,
    pub ffn: usize,
    pub n_q_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    pub vocab: usize,
    pub context_len: usize,
    pub rope_theta: f64,
    pub rms_eps: f32,
    pub rope_scaling: Option<RopeScaling>,
    /// True when the file has no `output.weight`: the LM head is `token_embd`.
    pub tied_embeddings: bool,
}

pub(crate) fn out_of_range(key: &str, value: impl ToString, reason: &str) -> GgufError {
    GgufError::OutOfRange {
        key: key.to_string(),
        value: value.to_string(),
        reason: reason.to_string(),
    }
}

/// A dimension: present, an integer, and non-zero.
pub(crate) fn dim(file: &GgufFile, key: &str) -> Result<usize, GgufError> {
    let v = file.get_usize(key)?;
    if v == 0 {
        return Err(out_of_range(key, v, "must be positive"));
    }
    Ok(v)
}

fn rope_scaling(file: &GgufFile) -> Result<Option<RopeScaling>, GgufError> {
    let kind = match file.get(keys::QWEN3_ROPE_SCALING_TYPE) {
        None => return Ok(None),
        Some(_) => file.get_str(keys::QWEN3_ROPE_SCALING_TYPE)?,
    };
    let kind = match kind {
        "none" => return Ok(None),
        "yarn" => RopeScalingKind::Yarn,
        "linear" => RopeScalingKind::Linear,
        other => {
            let shown = crate::parse::escape_for_message(other);
            return Err(out_of_range(
                keys::QWEN3_ROPE_SCALING_TYPE,
                shown,
                "bonsai supports yarn, linear or none",
            ));
        }
    };
    let factor = file.get_f64(keys::QWEN3_ROPE_SCALING_FACTOR)?;
    if !(factor.is_finite() && factor >= 1.0) {
        return Err(out_of_range(
            keys::QWEN3_ROPE_SCALING_FACTOR,
            factor,
            "must be finite and >= 1",
        ));
    }
    let original_context_len = match kind {
        RopeScalingKind::Yarn => dim(file, keys::QWEN3_ROPE_SCALING_ORIG_CTX)?,
        // Linear scaling does not use it; record it when present.
        RopeScalingKind::Linear => match file.get(keys::QWEN3_ROPE_SCALING_ORIG_CTX) {
            Some(_) => dim(file, keys::QWEN3_ROPE_SCALING_ORIG_CTX)?,
            None => 0,
        },
    };
    let optional_f64 = |key: &str, default: f64| match file.get(key) {
        Some(_) => file.get_f64(key),
        None => Ok(default),
    };
    Ok(Some(RopeScaling {
        kind,
        factor,
        original_context_len,
        beta_fast: optional_f64(keys::QWEN3_ROPE_SCALING_YARN_BETA_FAST, YARN_DEFAULT_BETA_FAST)?,
        beta_slow: optional_f64(keys::QWEN3_ROPE_SCALING_YARN_BETA_SLOW, YARN_DEFAULT_BETA_SLOW)?,
    }))
}

/// Vocabulary size from the `token_embd` shape `[hidden, vocab]` (`hidden` read from
/// `hidden_key`), or, for a file without that tensor, from the tokenizer's token list.
pub(crate) fn vocab_size(file: &GgufFile, hidden: usize, hidden_key: &str) -> Result<usize, GgufError> {
    let Some(embd) = file.tensor_info(tensor::TOKEN_EMBD) else {
        return match file.get(keys::TOKENIZER_TOKENS) {
            Some(_) => Ok(file.get_array(keys::TOKENIZER_TOKENS)?.1.len()),
            None => Err(GgufError::MissingTensor(tensor::TOKEN_EMBD.to_string())),
        };
    };
    let bad = |reason: String| GgufError::BadTensorInfo { name: embd.name.clone(), reason };
    let (embd_hidden, vocab) = match embd.shape[..] {
        [h, v] => (h, v),
        _ => return Err(bad(format!("shape {:?} is not 2-D [hidden, vocab]", embd.shape))),
    };
    if embd_hidden != hidden as u64 {
        return Err(bad(format!("row length {embd_hidden} differs from {hidden_key} = {hidden}")));
    }
    usize::try_from(vocab).map_err(|_| bad(format!("vocab {vocab} too large")))
}

/// (query heads, kv heads) from their keys; the kv heads must divide the query heads
/// (grouped-query attention).
pub(crate) fn gqa_heads(file: &GgufFile, q_key: &str, kv_key: &str) -> Result<(usize, usize), GgufError> {
    let (n_q_heads, n_kv_heads) = (dim(file, q_key)?, dim(file, kv_key)?);
    if n_q_heads % n_kv_heads != 0 {
        return Err(out_of_range(kv_key, n_kv_heads, &format!("must divide the {n_q_heads} query heads (grouped-query attention)")));
    }
    Ok((n_q_heads, n_kv_heads))
}

impl Qwen3Config {
    pub fn from_gguf(file: &GgufFile) -> Result<Qwen3Config, GgufError> {
        let arch = file.get_str(keys::GENERAL_ARCHITECTURE)?;
        if arch != keys::ARCH_QWEN3 {
            return Err(GgufError::UnsupportedArchitecture(crate::parse::escape_for_message(arch)));
        }
        let hidden = dim(file, keys::QWEN3_EMBEDDING_LENGTH)?;
        let (n_q_heads, n_kv_heads) = gqa_heads(file, keys::QWEN3_HEAD_COUNT, keys::QWEN3_HEAD_COUNT_KV)?;
        let rope_theta = file.get_f64(keys::QWEN3_ROPE_FREQ_BASE)?;
        if !(rope_theta.is_finite() && rope_theta > 0.0) {
            return Err(out_of_range(
                keys::QWEN3_ROPE_FREQ_BASE,
                rope_theta,
                "must be finite and positive",
            ));
        }
        let rms_eps = file.get_f32(keys::QWEN3_RMS_EPS)?;
        if !(rms_eps.is_finite() && rms_eps > 0.0) {
            return Err(out_of_range(keys::QWEN3_RMS_EPS, rms_eps, "must be finite and positive"));
        }
        let vocab = vocab_size(file, hidden, keys::QWEN3_EMBEDDING_LENGTH)?;
        Ok(Qwen3Config {
            n_layers: dim(file, keys::QWEN3_BLOCK_COUNT)?,
            hidden,
            ffn: dim(file, keys::QWEN3_FEED_FORWARD_LENGTH)?,
            n_q_heads,
            n_kv_heads,
            head_dim: dim(file, keys::QWEN3_KEY_LENGTH)?,
            vocab,
            context_len: dim(file, keys::QWEN3_CONTEXT_LENGTH)?,
            rope_theta,
            rms_eps,
            rope_scaling: rope_scaling(file)?,
            tied_embeddings: file.tensor_info(tensor::OUTPUT).is_none(),
        })
    }
}

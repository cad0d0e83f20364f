//! `config.json` of a Hugging Face Qwen3 checkpoint: the geometry the GGUF metadata carries.
//!
//! Accepts both the transformers 4.x spelling (`rope_theta`, `rope_scaling`) and the 5.x one
//! (`rope_parameters: { rope_theta, rope_type, factor, ... }`).

use serde_json::{Map, Value};

use super::error::ConvertError;

/// The only `model_type` this converter writes.
pub const QWEN3_MODEL_TYPE: &str = "qwen3";
/// transformers' `Qwen3Config` default for `head_dim` when the key is absent (it is not
/// hidden / heads for Qwen3; the converter never derives it).
const QWEN3_DEFAULT_HEAD_DIM: u64 = 128;
/// `rope_type` / `type` values meaning "no scaling".
const ROPE_TYPE_DEFAULT: &str = "default";

/// RoPE context extension, as llama.cpp writes it under `qwen3.rope.scaling.*`.
#[derive(Debug, Clone, PartialEq)]
pub enum RopeScalingSpec {
    Yarn {
        factor: f64,
        original_context_len: u64,
        /// Written only when config.json states them (readers default to 32 / 1).
        beta_fast: Option<f64>,
        beta_slow: Option<f64>,
    },
    Linear {
        factor: f64,
    },
}

/// The fields of config.json that the GGUF needs.
#[derive(Debug, Clone, PartialEq)]
pub struct HfQwen3Config {
    pub n_layers: u64,
    pub hidden: u64,
    pub ffn: u64,
    pub n_q_heads: u64,
    pub n_kv_heads: u64,
    pub head_dim: u64,
    pub vocab: u64,
    pub context_len: u64,
    pub rope_theta: f64,
    pub rms_eps: f64,
    pub tie_word_embeddings: bool,
    pub rope_scaling: Option<RopeScalingSpec>,
    /// `bos_token_id` / `eos_token_id` / `pad_token_id` (fallbacks for the tokenizer's ids).
    pub bos_token_id: Option<u64>,
    pub eos_token_id: Option<u64>,
    pub pad_token_id: Option<u64>,
}

fn missing(key: &str, expected: &'static str) -> ConvertError {
    ConvertError::ConfigKey { key: key.to_string(), expected }
}

fn req_u64(obj: &Map<String, Value>, key: &str) -> Result<u64, ConvertError> {
    obj.get(key).and_then(Value::as_u64).ok_or_else(|| missing(key, "a non-negative integer"))
}

fn req_positive(obj: &Map<String, Value>, key: &str) -> Result<u64, ConvertError> {
    match req_u64(obj, key)? {
        0 => Err(missing(key, "a positive integer")),
        v => Ok(v),
    }
}

fn opt_u64(obj: &Map<String, Value>, key: &str) -> Result<Option<u64>, ConvertError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or_else(|| missing(key, "a non-negative integer")),
    }
}

fn opt_f64(obj: &Map<String, Value>, key: &str) -> Result<Option<f64>, ConvertError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_f64().map(Some).ok_or_else(|| missing(key, "a number")),
    }
}

impl HfQwen3Config {
    pub fn from_json_text(text: &str) -> Result<Self, ConvertError> {
        let value: Value = serde_json::from_str(text)
            .map_err(|source| ConvertError::Json { path: "config.json".into(), source })?;
        Self::from_json(&value)
    }

    pub fn from_json(value: &Value) -> Result<Self, ConvertError> {
        let obj = value.as_object().ok_or_else(|| missing("(root)", "a JSON object"))?;
        let model_type = obj
            .get("model_type")
            .and_then(Value::as_str)
            .ok_or_else(|| missing("model_type", "a string"))?;
        if model_type != QWEN3_MODEL_TYPE {
            return Err(ConvertError::UnsupportedArchitecture(model_type.to_string()));
        }
        let n_q_heads = req_positive(obj, "num_attention_heads")?;
        let rope_params = obj.get("rope_parameters").and_then(Value::as_object);
        let rope_theta = match (opt_f64(obj, "rope_theta")?, rope_params) {
            (Some(theta), _) => theta,
            (None, Some(params)) => opt_f64(params, "rope_theta")?
                .ok_or_else(|| missing("rope_parameters.rope_theta", "a number"))?,
            (None, None) => return Err(missing("rope_theta", "a number")),
        };
        let scaling_obj = match obj.get("rope_scaling") {
            Some(Value::Object(map)) => Some(map),
            Some(Value::Null) | None => rope_params,
            Some(_) => return Err(missing("rope_scaling", "an object or null")),
        };
        let config = HfQwen3Config {
            n_layers: req_positive(obj, "num_hidden_layers")?,
            hidden: req_positive(obj, "hidden_size")?,
            ffn: req_positive(obj, "intermediate_size")?,
            n_q_heads,
            n_kv_heads: opt_u64(obj, "num_key_value_heads")?.unwrap_or(n_q_heads),
            head_dim: opt_u64(obj, "head_dim")?.unwrap_or(QWEN3_DEFAULT_HEAD_DIM),
            vocab: req_positive(obj, "vocab_size")?,
            context_len: req_positive(obj, "max_position_embeddings")?,
            rope_theta,
            rms_eps: opt_f64(obj, "rms_norm_eps")?
                .ok_or_else(|| missing("rms_norm_eps", "a number"))?,
            tie_word_embeddings: match obj.get("tie_word_embeddings") {
                None | Some(Value::Null) => false, // Qwen3Config's default
                Some(v) => v.as_bool().ok_or_else(|| missing("tie_word_embeddings", "a bool"))?,
            },
            rope_scaling: scaling_obj.map(parse_rope_scaling).transpose()?.flatten(),
            bos_token_id: opt_u64(obj, "bos_token_id").ok().flatten(),
            eos_token_id: opt_u64(obj, "eos_token_id").ok().flatten(),
            pad_token_id: opt_u64(obj, "pad_token_id").ok().flatten(),
        };
        if config.n_kv_heads == 0 || config.n_q_heads % config.n_kv_heads != 0 {
            return Err(missing(
                "num_key_value_heads",
                "a positive divisor of num_attention_heads",
            ));
        }
        if config.head_dim == 0 {
            return Err(missing("head_dim", "a positive integer"));
        }
        Ok(config)
    }
}

/// Like llama.cpp: scaling is written only when the object states a `factor`; `None` for the
/// "default" type.
fn parse_rope_scaling(
    params: &Map<String, Value>,
) -> Result<Option<RopeScalingSpec>, ConvertError> {
    let kind = params
        .get("rope_type")
        .or_else(|| params.get("type"))
        .and_then(Value::as_str)
        .unwrap_or(ROPE_TYPE_DEFAULT);
    let Some(factor) = opt_f64(params, "factor")? else {
        return Ok(None);
    };
    match kind {
        ROPE_TYPE_DEFAULT => Ok(None),
        "linear" => Ok(Some(RopeScalingSpec::Linear { factor })),
        "yarn" => Ok(Some(RopeScalingSpec::Yarn {
            factor,
            original_context_len: opt_u64(params, "original_max_position_embeddings")?.ok_or_else(
                || missing("rope_scaling.original_max_position_embeddings", "an integer"),
            )?,
            beta_fast: opt_f64(params, "beta_fast")?,
            beta_slow: opt_f64(params, "beta_slow")?,
        })),
        other => Err(ConvertError::UnsupportedRopeScaling(other.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn base() -> Value {
        json!({
            "model_type": "qwen3", "num_hidden_layers": 2, "hidden_size": 128,
            "intermediate_size": 384, "num_attention_heads": 4, "num_key_value_heads": 2,
            "head_dim": 64, "vocab_size": 259, "max_position_embeddings": 512,
            "rope_theta": 1000000.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": false,
            "bos_token_id": 256, "eos_token_id": 258
        })
    }

    #[test]
    fn reads_v4_config() {
        let c = HfQwen3Config::from_json(&base()).unwrap();
        assert_eq!((c.n_layers, c.hidden, c.ffn, c.n_q_heads, c.n_kv_heads), (2, 128, 384, 4, 2));
        assert_eq!((c.head_dim, c.vocab, c.context_len), (64, 259, 512));
        assert_eq!(c.rope_theta, 1e6);
        assert_eq!(c.rms_eps, 1e-6);
        assert_eq!((c.bos_token_id, c.eos_token_id, c.pad_token_id), (Some(256), Some(258), None));
        assert!(c.rope_scaling.is_none());
    }

    #[test]
    fn reads_v5_rope_parameters_and_yarn() {
        let mut v = base();
        let o = v.as_object_mut().unwrap();
        o.remove("rope_theta");
        o.insert(
            "rope_parameters".into(),
            json!({"rope_theta": 5e5, "rope_type": "yarn", "factor": 4.0,
                   "original_max_position_embeddings": 16384}),
        );
        let c = HfQwen3Config::from_json(&v).unwrap();
        assert_eq!(c.rope_theta, 5e5);
        assert_eq!(
            c.rope_scaling,
            Some(RopeScalingSpec::Yarn {
                factor: 4.0,
                original_context_len: 16384,
                beta_fast: None,
                beta_slow: None
            })
        );
        // The v5 "default" type carries no factor: no scaling.
        o_set(&mut v, "rope_parameters", json!({"rope_theta": 1e6, "rope_type": "default"}));
        assert!(HfQwen3Config::from_json(&v).unwrap().rope_scaling.is_none());
    }

    fn o_set(v: &mut Value, key: &str, val: Value) {
        v.as_object_mut().unwrap().insert(key.into(), val);
    }

    #[test]
    fn v4_rope_scaling_yarn_with_type_key() {
        let mut v = base();
        o_set(
            &mut v,
            "rope_scaling",
            json!({"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16384,
                   "beta_fast": 32.0, "beta_slow": 1.0}),
        );
        let c = HfQwen3Config::from_json(&v).unwrap();
        assert!(matches!(
            c.rope_scaling,
            Some(RopeScalingSpec::Yarn { beta_fast: Some(32.0), beta_slow: Some(1.0), .. })
        ));
        o_set(&mut v, "rope_scaling", json!({"type": "dynamic", "factor": 2.0}));
        let err = HfQwen3Config::from_json(&v).unwrap_err().to_string();
        assert!(err.contains("dynamic"), "{err}");
    }

    #[test]
    fn rejects_other_architectures_and_missing_keys() {
        let mut v = base();
        o_set(&mut v, "model_type", json!("llama"));
        let err = HfQwen3Config::from_json(&v).unwrap_err().to_string();
        assert!(err.contains("unsupported architecture") && err.contains("llama"), "{err}");

        let mut v = base();
        v.as_object_mut().unwrap().remove("hidden_size");
        let err = HfQwen3Config::from_json(&v).unwrap_err().to_string();
        assert!(err.contains("hidden_size"), "{err}");

        let mut v = base();
        o_set(&mut v, "num_key_value_heads", json!(3));
        assert!(HfQwen3Config::from_json(&v).is_err());
    }

    #[test]
    fn absent_head_dim_is_transformers_default_not_derived() {
        let mut v = base();
        v.as_object_mut().unwrap().remove("head_dim");
        // hidden / heads would be 32 here; transformers' Qwen3Config uses 128.
        assert_eq!(HfQwen3Config::from_json(&v).unwrap().head_dim, QWEN3_DEFAULT_HEAD_DIM);
    }
}

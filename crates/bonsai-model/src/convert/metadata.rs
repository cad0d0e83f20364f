//! The GGUF metadata of a converted checkpoint: `general.*`, `qwen3.*`, `tokenizer.*`, with the
//! value types llama.cpp's converter uses (dimensions u32, freq base and epsilon f32, token types
//! i32).

use bonsai_gguf::layout::layout_tag;
use bonsai_gguf::{keys, MetaValue, TokenizerMeta, TwoBitLayout, ValueType};

use super::error::ConvertError;
use super::hf_config::{HfQwen3Config, RopeScalingSpec};
use super::OutputType;

/// `tokenizer.ggml.model` for byte-level BPE (GPT-2 style), as llama.cpp names it.
pub const TOKENIZER_MODEL_GPT2: &str = "gpt2";
/// `tokenizer.ggml.pre`: the pre-tokenizer regex set llama.cpp uses for Qwen2/Qwen3.
pub const TOKENIZER_PRE_QWEN2: &str = "qwen2";
/// ggml's quantization format version, written by llama.cpp into every file.
pub const GGML_QUANTIZATION_VERSION: u32 = 2;
#[cfg(test)]
const FILE_TYPE_MOSTLY_F16: u32 = 1;
const ROPE_SCALING_YARN: &str = "yarn";
const ROPE_SCALING_LINEAR: &str = "linear";

fn u32_key(key: &str, value: u64) -> Result<MetaValue, ConvertError> {
    u32::try_from(value).map(MetaValue::U32).map_err(|_| ConvertError::ConfigKey {
        key: key.to_string(),
        expected: "a value below 2^32",
    })
}

fn string_array(items: &[String]) -> MetaValue {
    MetaValue::Array(ValueType::String, items.iter().cloned().map(MetaValue::String).collect())
}

/// Every metadata entry in writing order.
pub fn gguf_metadata(
    name: &str,
    config: &HfQwen3Config,
    tokenizer: &TokenizerMeta,
    ty: OutputType,
) -> Result<Vec<(String, MetaValue)>, ConvertError> {
    let mut m: Vec<(String, MetaValue)> = Vec::new();
    let mut put = |key: &str, value: MetaValue| m.push((key.to_string(), value));

    put(keys::GENERAL_ARCHITECTURE, MetaValue::String(keys::ARCH_QWEN3.to_string()));
    put(keys::GENERAL_NAME, MetaValue::String(name.to_string()));
    // llama.cpp's ftype (mainline numbers; the fork's 128/129 for PQ2_0/PTQ1_0): only a label.
    if let Some(ftype) = ty.tensor_type().llama_file_type() {
        put(keys::GENERAL_FILE_TYPE, MetaValue::U32(ftype));
    }
    if ty == OutputType::Q2_0 {
        // Id 42 is shared; bonsai's own key lets tiny files (where both block sizes fit) re-read.
        put(keys::BONSAI_TWO_BIT_LAYOUT, MetaValue::String(layout_tag(TwoBitLayout::Q2G64ScaleFirst).to_string()));
    }
    put(keys::GENERAL_QUANTIZATION_VERSION, MetaValue::U32(GGML_QUANTIZATION_VERSION));

    put(keys::QWEN3_BLOCK_COUNT, u32_key("num_hidden_layers", config.n_layers)?);
    put(keys::QWEN3_CONTEXT_LENGTH, u32_key("max_position_embeddings", config.context_len)?);
    put(keys::QWEN3_EMBEDDING_LENGTH, u32_key("hidden_size", config.hidden)?);
    put(keys::QWEN3_FEED_FORWARD_LENGTH, u32_key("intermediate_size", config.ffn)?);
    put(keys::QWEN3_HEAD_COUNT, u32_key("num_attention_heads", config.n_q_heads)?);
    put(keys::QWEN3_HEAD_COUNT_KV, u32_key("num_key_value_heads", config.n_kv_heads)?);
    put(keys::QWEN3_ROPE_FREQ_BASE, MetaValue::F32(config.rope_theta as f32));
    put(keys::QWEN3_RMS_EPS, MetaValue::F32(config.rms_eps as f32));
    put(keys::QWEN3_KEY_LENGTH, u32_key("head_dim", config.head_dim)?);
    put(keys::QWEN3_VALUE_LENGTH, u32_key("head_dim", config.head_dim)?);
    put(keys::QWEN3_VOCAB_SIZE, u32_key("vocab_size", config.vocab)?);
    match &config.rope_scaling {
        None => {}
        Some(RopeScalingSpec::Linear { factor }) => {
            put(keys::QWEN3_ROPE_SCALING_TYPE, MetaValue::String(ROPE_SCALING_LINEAR.into()));
            put(keys::QWEN3_ROPE_SCALING_FACTOR, MetaValue::F32(*factor as f32));
        }
        Some(RopeScalingSpec::Yarn { factor, original_context_len, beta_fast, beta_slow }) => {
            put(keys::QWEN3_ROPE_SCALING_TYPE, MetaValue::String(ROPE_SCALING_YARN.into()));
            put(keys::QWEN3_ROPE_SCALING_FACTOR, MetaValue::F32(*factor as f32));
            put(
                keys::QWEN3_ROPE_SCALING_ORIG_CTX,
                u32_key("rope_scaling.original_max_position_embeddings", *original_context_len)?,
            );
            if let Some(beta) = beta_fast {
                put(keys::QWEN3_ROPE_SCALING_YARN_BETA_FAST, MetaValue::F32(*beta as f32));
            }
            if let Some(beta) = beta_slow {
                put(keys::QWEN3_ROPE_SCALING_YARN_BETA_SLOW, MetaValue::F32(*beta as f32));
            }
        }
    }

    put(keys::TOKENIZER_MODEL, MetaValue::String(tokenizer.model.clone()));
    if let Some(pre) = &tokenizer.pre {
        put(keys::TOKENIZER_PRE, MetaValue::String(pre.clone()));
    }
    put(keys::TOKENIZER_TOKENS, string_array(&tokenizer.tokens));
    put(
        keys::TOKENIZER_TOKEN_TYPE,
        MetaValue::Array(
            ValueType::I32,
            tokenizer.token_types.iter().map(|&t| MetaValue::I32(t)).collect(),
        ),
    );
    put(keys::TOKENIZER_MERGES, string_array(&tokenizer.merges));
    let ids = [
        (keys::TOKENIZER_EOS_ID, tokenizer.eos_id),
        (keys::TOKENIZER_PAD_ID, tokenizer.pad_id),
        (keys::TOKENIZER_BOS_ID, tokenizer.bos_id),
    ];
    for (key, id) in ids {
        if let Some(id) = id {
            put(key, MetaValue::U32(id));
        }
    }
    // Qwen never prepends a BOS token; say so explicitly so loaders do not guess.
    put(keys::TOKENIZER_ADD_BOS, MetaValue::Bool(false));
    if let Some(template) = &tokenizer.chat_template {
        put(keys::TOKENIZER_CHAT_TEMPLATE, MetaValue::String(template.clone()));
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(scaling: Option<RopeScalingSpec>) -> HfQwen3Config {
        HfQwen3Config {
            n_layers: 2,
            hidden: 128,
            ffn: 256,
            n_q_heads: 4,
            n_kv_heads: 2,
            head_dim: 64,
            vocab: 3,
            context_len: 512,
            rope_theta: 1e6,
            rms_eps: 1e-6,
            tie_word_embeddings: false,
            rope_scaling: scaling,
            bos_token_id: None,
            eos_token_id: None,
            pad_token_id: None,
        }
    }

    fn tokenizer() -> TokenizerMeta {
        TokenizerMeta {
            model: TOKENIZER_MODEL_GPT2.into(),
            pre: Some(TOKENIZER_PRE_QWEN2.into()),
            tokens: vec!["a".into(), "b".into(), "[PAD2]".into()],
            token_types: vec![1, 1, 5],
            merges: vec![],
            bos_id: None,
            eos_id: Some(1),
            pad_id: None,
            chat_template: None,
        }
    }

    fn get<'a>(m: &'a [(String, MetaValue)], key: &str) -> Option<&'a MetaValue> {
        m.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    #[test]
    fn linear_scaling_types_and_layout_tag() {
        let spec = RopeScalingSpec::Linear { factor: 2.0 };
        let m =
            gguf_metadata("x", &config(Some(spec)), &tokenizer(), OutputType::Q2_0).unwrap();
        assert_eq!(
            get(&m, keys::QWEN3_ROPE_SCALING_TYPE),
            Some(&MetaValue::String("linear".into()))
        );
        assert_eq!(get(&m, keys::QWEN3_ROPE_SCALING_FACTOR), Some(&MetaValue::F32(2.0)));
        assert_eq!(get(&m, keys::QWEN3_ROPE_SCALING_ORIG_CTX), None);
        assert_eq!(
            get(&m, keys::BONSAI_TWO_BIT_LAYOUT),
            Some(&MetaValue::String("q2_0_g64".into()))
        );
        assert_eq!(get(&m, keys::GENERAL_FILE_TYPE), Some(&MetaValue::U32(41)));
        for (ty, ftype) in [(OutputType::Q1_0, 40), (OutputType::Pq2_0, 128), (OutputType::Ptq1_0, 129)] {
            let m = gguf_metadata("x", &config(None), &tokenizer(), ty).unwrap();
            assert_eq!(get(&m, keys::GENERAL_FILE_TYPE), Some(&MetaValue::U32(ftype)), "{}", ty.name());
            assert_eq!(get(&m, keys::BONSAI_TWO_BIT_LAYOUT), None, "{}", ty.name());
        }
        assert_eq!(get(&m, keys::QWEN3_KEY_LENGTH), Some(&MetaValue::U32(64)));
        assert_eq!(get(&m, keys::QWEN3_RMS_EPS), Some(&MetaValue::F32(1e-6)));
        // Absent ids and template are left out rather than written as placeholders.
        assert_eq!(get(&m, keys::TOKENIZER_BOS_ID), None);
        assert_eq!(get(&m, keys::TOKENIZER_CHAT_TEMPLATE), None);
        assert_eq!(get(&m, keys::TOKENIZER_EOS_ID), Some(&MetaValue::U32(1)));
    }

    #[test]
    fn yarn_betas_and_file_types() {
        let spec = RopeScalingSpec::Yarn {
            factor: 4.0,
            original_context_len: 16384,
            beta_fast: Some(32.0),
            beta_slow: None,
        };
        let m = gguf_metadata("x", &config(Some(spec)), &tokenizer(), OutputType::F16).unwrap();
        assert_eq!(get(&m, keys::QWEN3_ROPE_SCALING_ORIG_CTX), Some(&MetaValue::U32(16384)));
        assert_eq!(get(&m, keys::QWEN3_ROPE_SCALING_YARN_BETA_FAST), Some(&MetaValue::F32(32.0)));
        assert_eq!(get(&m, keys::QWEN3_ROPE_SCALING_YARN_BETA_SLOW), None);
        assert_eq!(get(&m, keys::GENERAL_FILE_TYPE), Some(&MetaValue::U32(FILE_TYPE_MOSTLY_F16)));
        assert_eq!(get(&m, keys::BONSAI_TWO_BIT_LAYOUT), None);

        let mut too_big = config(None);
        too_big.context_len = u64::from(u32::MAX) + 1;
        let err = gguf_metadata("x", &too_big, &tokenizer(), OutputType::Q1_0).unwrap_err();
        assert!(err.to_string().contains("max_position_embeddings"), "{err}");
    }
}

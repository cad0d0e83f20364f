//! The random-weight demo model's vocabulary: 256 byte tokens plus the three ChatML control
//! tokens. The model: random Q1_0 weights from a fixed seed ([`crate::synthetic`]), written as a
//! GGUF. The CLI's default model is the trained one in models/; this one serves tests (servers,
//! GPU == CPU checks) and the synthetic models' tokenizer.

use bonsai_gguf::{keys, GgufWriter, MetaValue, TensorType, TokenizerMeta, ValueType};
use bonsai_kernels::QMatrix;

use crate::synthetic::{gguf_blocks, random_tensors, Geometry, MemTensor, MemoryTensors, WeightKind, QWEN3_RMS_EPS, QWEN3_ROPE_THETA};
use crate::tokenizer::{byte_to_char_table, token_type};
use crate::ModelError;

pub const DEMO_SPECIAL_TOKENS: [&str; 3] = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"];
/// Id of `<|im_end|>` in the demo vocab (256 bytes, then the specials in order).
pub const DEMO_EOS_ID: u32 = 258;

/// The byte-level vocab: token b (< 256) is byte b in GPT-2's printable form; no merges.
pub fn demo_tokenizer_parts() -> TokenizerMeta {
    let mut tokens: Vec<String> = byte_to_char_table().iter().map(|c| c.to_string()).collect();
    let mut token_types = vec![token_type::NORMAL; tokens.len()];
    for special in DEMO_SPECIAL_TOKENS {
        tokens.push(special.to_string());
        token_types.push(token_type::CONTROL);
    }
    TokenizerMeta {
        model: "gpt2".into(),
        pre: Some("qwen2".into()),
        tokens,
        token_types,
        merges: Vec::new(),
        bos_id: None,
        eos_id: Some(DEMO_EOS_ID),
        pad_id: None,
        chat_template: None,
    }
}

/// Seed of the demo model's random weights (fixed: every user gets the same demo).
pub const DEMO_SEED: u64 = 0xB0_25A1;

/// A plain ChatML template, written into the demo file so the chat path renders through Jinja.
pub const CHATML_TEMPLATE: &str = "{%- for m in messages %}{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

fn strings(v: impl IntoIterator<Item = String>) -> MetaValue {
    MetaValue::Array(ValueType::String, v.into_iter().map(MetaValue::String).collect())
}

/// The `tokenizer.ggml.*` keys of `tokenizer` (no chat template).
pub fn add_tokenizer_metadata(w: &mut GgufWriter, tokenizer: &TokenizerMeta) {
    w.add_metadata(keys::TOKENIZER_MODEL, MetaValue::String(tokenizer.model.clone()));
    if let Some(pre) = &tokenizer.pre {
        w.add_metadata(keys::TOKENIZER_PRE, MetaValue::String(pre.clone()));
    }
    w.add_metadata(keys::TOKENIZER_TOKENS, strings(tokenizer.tokens.iter().cloned()));
    w.add_metadata(
        keys::TOKENIZER_TOKEN_TYPE,
        MetaValue::Array(ValueType::I32, tokenizer.token_types.iter().map(|&t| MetaValue::I32(t)).collect()),
    );
    w.add_metadata(keys::TOKENIZER_MERGES, strings(tokenizer.merges.iter().cloned()));
    if let Some(eos) = tokenizer.eos_id {
        w.add_metadata(keys::TOKENIZER_EOS_ID, MetaValue::U32(eos));
    }
}

/// A complete GGUF (metadata, tokenizer when given, tensors in file order) for a model of
/// geometry `g`.
pub fn model_gguf_writer(
    g: &Geometry,
    tensors: &MemoryTensors,
    tokenizer: Option<&TokenizerMeta>,
    chat_template: Option<&str>,
) -> Result<GgufWriter, ModelError> {
    let mut w = GgufWriter::new();
    let u32_of = |n: usize| MetaValue::U32(n as u32);
    w.add_metadata(keys::GENERAL_ARCHITECTURE, MetaValue::String(keys::ARCH_QWEN3.into()));
    w.add_metadata(keys::GENERAL_NAME, MetaValue::String("bonsai random-weight model".into()));
    w.add_metadata(keys::QWEN3_BLOCK_COUNT, u32_of(g.n_layers));
    w.add_metadata(keys::QWEN3_EMBEDDING_LENGTH, u32_of(g.hidden));
    w.add_metadata(keys::QWEN3_FEED_FORWARD_LENGTH, u32_of(g.ffn));
    w.add_metadata(keys::QWEN3_HEAD_COUNT, u32_of(g.n_q_heads));
    w.add_metadata(keys::QWEN3_HEAD_COUNT_KV, u32_of(g.n_kv_heads));
    w.add_metadata(keys::QWEN3_KEY_LENGTH, u32_of(g.head_dim));
    w.add_metadata(keys::QWEN3_VALUE_LENGTH, u32_of(g.head_dim));
    w.add_metadata(keys::QWEN3_CONTEXT_LENGTH, u32_of(g.context_len));
    w.add_metadata(keys::QWEN3_ROPE_FREQ_BASE, MetaValue::F32(QWEN3_ROPE_THETA as f32));
    w.add_metadata(keys::QWEN3_RMS_EPS, MetaValue::F32(QWEN3_RMS_EPS));
    if let Some(tokenizer) = tokenizer {
        add_tokenizer_metadata(&mut w, tokenizer);
    }
    if let Some(t) = chat_template {
        w.add_metadata(keys::TOKENIZER_CHAT_TEMPLATE, MetaValue::String(t.into()));
    }
    let mut two_bit = false;
    for name in &tensors.order {
        let Some(t) = tensors.tensors.get(name) else { continue };
        match t {
            MemTensor::Matrix(m) => {
                let (ty, bytes) = gguf_blocks(m);
                two_bit |= matches!(m, QMatrix::Q2(_));
                w.add_tensor(name, &[m.k() as u64, m.n() as u64], ty, bytes)?;
            }
            MemTensor::Vector(v) => {
                w.add_tensor(name, &[v.len() as u64], TensorType::F32, bytemuck::cast_slice(v).to_vec())?;
            }
        }
    }
    if two_bit {
        w.add_metadata(keys::BONSAI_TWO_BIT_LAYOUT, MetaValue::String("q2_0_g128".into()));
    }
    Ok(w)
}

/// The built-in demo model (random Q1_0 weights from [`DEMO_SEED`], byte vocab) as a GGUF.
pub fn demo_gguf_writer() -> Result<GgufWriter, ModelError> {
    let g = Geometry::demo();
    let tensors = random_tensors(&g, WeightKind::OneBit, DEMO_SEED)?;
    model_gguf_writer(&g, &tensors, Some(&demo_tokenizer_parts()), Some(CHATML_TEMPLATE))
}

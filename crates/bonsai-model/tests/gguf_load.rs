//! The GGUF path: a model written with `GgufWriter` loads back (through block conversion,
//! fusion and the tokenizer) to exactly the model built in memory from the same tensors.

mod common;

use bonsai_gguf::{GgufFile, TensorType};
use bonsai_model::demo::{demo_gguf_writer, demo_tokenizer_parts, model_gguf_writer, CHATML_TEMPLATE, DEMO_SEED};
use bonsai_model::loader::load_model;
use bonsai_model::qwen3::HostWeights;
use bonsai_model::synthetic::{random_tensors, Geometry, WeightKind};
use bonsai_model::{CpuBackend, LogitRows, ModelError, Qwen3};
use common::{fresh_seed, tiny_geometry};

fn file_of(writer: bonsai_gguf::GgufWriter) -> GgufFile {
    let mut bytes = Vec::new();
    writer.write_to(&mut bytes).unwrap();
    GgufFile::from_bytes(bytes).unwrap()
}

fn last_logits(model: &Qwen3<CpuBackend>, tokens: &[u32]) -> Vec<f32> {
    let mut state = model.new_state(tokens.len(), false).unwrap();
    model.forward_chunk(&mut state, tokens, LogitRows::Last).unwrap();
    let mut out = vec![0.0; model.config().vocab];
    model.logits(&state, 0, &mut out).unwrap();
    out
}

/// Same weights, same kernels, same order of operations: the logits must be bit-identical.
fn assert_file_equals_memory(g: &Geometry, kind: WeightKind, seed: u64, file: &GgufFile) {
    let loaded = load_model(file, CpuBackend, Some(g.context_len)).unwrap();
    let host = HostWeights::load(&g.config(), random_tensors(g, kind, seed).unwrap()).unwrap();
    let memory = Qwen3::new(CpuBackend, g.config(), host, g.context_len).unwrap();
    let tokens = loaded.text_tokenizer().unwrap().encode("<|im_start|>user\nhi").unwrap();
    assert_eq!(last_logits(&loaded.model, &tokens), last_logits(&memory, &tokens), "seed {seed} {kind:?}");
}

#[test]
fn demo_file_loads_to_the_in_memory_demo() {
    let file = file_of(demo_gguf_writer().unwrap());
    assert_file_equals_memory(&Geometry::demo(), WeightKind::OneBit, DEMO_SEED, &file);
    let loaded = load_model(&file, CpuBackend, None).unwrap();
    assert_eq!(loaded.chat_template.as_deref(), Some(CHATML_TEMPLATE));
    assert_eq!(loaded.model.max_seq(), 4096);
}

#[test]
fn ternary_file_loads_to_the_in_memory_model() {
    let g = Geometry { vocab: 259, ..tiny_geometry() };
    let seed = fresh_seed();
    let tensors = random_tensors(&g, WeightKind::Ternary, seed).unwrap();
    let file = file_of(model_gguf_writer(&g, &tensors, Some(&demo_tokenizer_parts()), None).unwrap());
    let info = file.tensor("blk.0.attn_q.weight").unwrap().info.ty;
    assert!(matches!(info, TensorType::TwoBit(_)), "{info:?}");
    assert_file_equals_memory(&g, WeightKind::Ternary, seed, &file);
}

#[test]
fn bad_files_fail_naming_the_tensor_or_limit() {
    let g = Geometry { vocab: 259, ..tiny_geometry() };
    let seed = fresh_seed();
    // A linear weight stored as F32 is refused by name (and by what it is).
    let mut tensors = random_tensors(&g, WeightKind::OneBit, seed).unwrap();
    let name = "blk.1.ffn_down.weight";
    tensors.tensors.remove(name);
    let mut writer = model_gguf_writer(&g, &tensors, Some(&demo_tokenizer_parts()), None).unwrap();
    writer.add_tensor(name, &[g.ffn as u64, g.hidden as u64], TensorType::F32, vec![0u8; g.hidden * g.ffn * 4]).unwrap();
    let err = load_model(&file_of(writer), CpuBackend, None).err().unwrap();
    assert!(err.to_string().contains(name) && err.to_string().contains("F32"), "{err}");

    // --ctx above the model's context length.
    let file = file_of(model_gguf_writer(&g, &random_tensors(&g, WeightKind::OneBit, seed).unwrap(), Some(&demo_tokenizer_parts()), None).unwrap());
    let err = load_model(&file, CpuBackend, Some(g.context_len + 1)).err().unwrap();
    assert!(matches!(err, ModelError::Unsupported(_)), "{err}");

    // A tokenizer that does not match the embedding rows.
    let mut parts = demo_tokenizer_parts();
    parts.tokens.push("extra".into());
    parts.token_types.push(1);
    let file = file_of(model_gguf_writer(&g, &random_tensors(&g, WeightKind::OneBit, seed).unwrap(), Some(&parts), None).unwrap());
    let err = load_model(&file, CpuBackend, None).err().unwrap();
    assert!(err.to_string().contains("tokenizer has 260 tokens"), "{err}");
}

//! `bonsai info` run as a real process: reports on good files, one-line errors and exit 1 on bad.

use bonsai_gguf::{keys, quantize, GgufWriter, MetaValue, TensorType, ValueType};
use std::path::{Path, PathBuf};
use std::process::Command;

const HIDDEN: u64 = 256;
const FFN: u64 = 384;
const VOCAB: u64 = 48;
const HEAD_DIM: u64 = 64;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/gguf/python_fixture.gguf")
}

fn temp_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bonsai-info-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_bonsai"))
        .arg("info")
        .args(args)
        .output()
        .expect("run bonsai");
    let text = |b: Vec<u8>| String::from_utf8(b).expect("utf-8 output");
    (out.status.code().unwrap_or(-1), text(out.stdout), text(out.stderr))
}

/// A one-layer Qwen3 with Q1_0 linears and tied embeddings (no output.weight).
fn write_tiny_model(path: &Path) {
    let mut w = GgufWriter::new();
    let u32v = |v: u64| MetaValue::U32(v as u32);
    w.add_metadata(keys::GENERAL_ARCHITECTURE, MetaValue::String("qwen3".into()));
    for (k, v) in [
        (keys::QWEN3_BLOCK_COUNT, 1),
        (keys::QWEN3_EMBEDDING_LENGTH, HIDDEN),
        (keys::QWEN3_FEED_FORWARD_LENGTH, FFN),
        (keys::QWEN3_HEAD_COUNT, 4),
        (keys::QWEN3_HEAD_COUNT_KV, 2),
        (keys::QWEN3_KEY_LENGTH, HEAD_DIM),
        (keys::QWEN3_CONTEXT_LENGTH, 2048),
    ] {
        w.add_metadata(k, u32v(v));
    }
    w.add_metadata(keys::QWEN3_ROPE_FREQ_BASE, MetaValue::F32(1e6));
    w.add_metadata(keys::QWEN3_RMS_EPS, MetaValue::F32(1e-6));
    w.add_metadata(keys::TOKENIZER_MODEL, MetaValue::String("gpt2".into()));
    let tokens = (0..VOCAB).map(|i| MetaValue::String(format!("t{i}"))).collect();
    w.add_metadata(keys::TOKENIZER_TOKENS, MetaValue::Array(ValueType::String, tokens));
    w.add_metadata(keys::TOKENIZER_EOS_ID, u32v(VOCAB - 1));
    // Deterministic non-zero weights; this test checks sizes, not values.
    let mut add = |name: &str, shape: &[u64], ty: TensorType| {
        let n = shape.iter().product::<u64>() as usize;
        let src: Vec<f32> = (0..n).map(|i| ((i * 7919) % 13) as f32 - 6.0).collect();
        w.add_tensor(name, shape, ty, quantize(ty, &src).expect("quantize")).expect("add");
    };
    use keys::tensor::*;
    add(TOKEN_EMBD, &[HIDDEN, VOCAB], TensorType::Q1_0);
    add(&block(ATTN_NORM, 0), &[HIDDEN], TensorType::F32);
    add(&block(ATTN_Q, 0), &[HIDDEN, 4 * HEAD_DIM], TensorType::Q1_0);
    add(&block(ATTN_K, 0), &[HIDDEN, 2 * HEAD_DIM], TensorType::Q1_0);
    add(&block(ATTN_V, 0), &[HIDDEN, 2 * HEAD_DIM], TensorType::Q1_0);
    add(&block(ATTN_OUTPUT, 0), &[4 * HEAD_DIM, HIDDEN], TensorType::Q1_0);
    add(&block(FFN_GATE, 0), &[HIDDEN, FFN], TensorType::Q1_0);
    add(&block(FFN_UP, 0), &[HIDDEN, FFN], TensorType::Q1_0);
    add(&block(FFN_DOWN, 0), &[FFN, HIDDEN], TensorType::Q1_0);
    add(OUTPUT_NORM, &[HIDDEN], TensorType::F32);
    w.write_file(path).expect("write model");
}

#[test]
fn reports_a_tiny_model_with_geometry_and_bytes_per_token() {
    let dir = temp_dir("model");
    let path = dir.join("tiny.gguf");
    write_tiny_model(&path);
    let (code, stdout, stderr) = run(&[path.to_str().expect("utf-8 path"), "--json"]);
    assert_eq!(code, 0, "stderr: {stderr}");
    let r: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(r["architecture"], "qwen3");
    assert_eq!(r["config"]["vocab"], VOCAB);
    assert_eq!(r["config"]["head_dim"], HEAD_DIM);
    assert_eq!(r["config"]["tied_embeddings"], true);
    assert_eq!(r["tokenizer"]["eos_id"], VOCAB - 1);
    // Q1_0 is 18 bytes per 128 weights; F32 norms 4 bytes each.
    let q1 = |n: u64| n / 128 * 18;
    let layer = q1(HIDDEN * 4 * HEAD_DIM) * 2
        + q1(HIDDEN * 2 * HEAD_DIM) * 2
        + q1(HIDDEN * FFN) * 3
        + HIDDEN * 4;
    let embd_row = q1(HIDDEN);
    let tied_head = q1(HIDDEN * VOCAB);
    assert_eq!(r["bytes_per_token"], layer + HIDDEN * 4 + embd_row + tied_head);

    let (code, text, _) = run(&[path.to_str().expect("utf-8 path")]);
    assert_eq!(code, 0);
    assert!(
        text.contains("1 layers, hidden 256, ffn 384, heads 4/2 (q/kv), head_dim 64, vocab 48"),
        "{text}"
    );
    assert!(text.contains("blk.0.ffn_up.weight") && text.contains("Q1_0"), "{text}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn reports_the_python_fixture() {
    let (code, stdout, stderr) = run(&[fixture().to_str().expect("utf-8 path"), "--json"]);
    assert_eq!(code, 0, "stderr: {stderr}");
    let r: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    let types: Vec<&str> = r["tensors"]
        .as_array()
        .expect("tensors")
        .iter()
        .map(|t| t["type"].as_str().expect("type"))
        .collect();
    assert_eq!(types, ["F32", "F16", "BF16", "Q8_0", "Q1_0"]);
    // No token_embd/output: only the two blk.* tensors (Q8_0 2x64 = 136 B, Q1_0 3x256 = 108 B).
    assert_eq!(r["bytes_per_token"], 136 + 108);
    assert!(r["config_error"].as_str().expect("no geometry").contains("qwen3."), "{r}");
}

#[test]
fn bad_files_exit_1_with_one_line_naming_the_problem() {
    let dir = temp_dir("bad");
    let good = std::fs::read(fixture()).expect("fixture");
    let name_at = good.windows(5).position(|w| w == b"t.f32").expect("tensor name") + 5;
    let type_at = name_at + 4 + 2 * 8; // n_dims, two dims
    let mut unknown_type = good.clone();
    unknown_type[type_at..type_at + 4].copy_from_slice(&77u32.to_le_bytes());
    let mut bad_magic = good.clone();
    bad_magic[..4].copy_from_slice(b"GGML");
    let cases: [(&str, Vec<u8>, &str); 4] = [
        ("truncated.gguf", good[..100].to_vec(), "truncated GGUF"),
        (
            "past_eof.gguf",
            good[..good.len() - 40].to_vec(),
            "tensor 'blk.0.ffn_up.weight' data ends at byte",
        ),
        ("magic.gguf", bad_magic, "not a GGUF file (magic 0x4c4d4747"),
        ("type.gguf", unknown_type, "unknown tensor type id 77 for tensor 't.f32'"),
    ];
    for (name, bytes, expect) in cases {
        let path = dir.join(name);
        std::fs::write(&path, bytes).expect("write bad file");
        let (code, stdout, stderr) = run(&[path.to_str().expect("utf-8 path")]);
        assert_eq!(code, 1, "{name}: stdout {stdout}");
        assert!(
            stderr.starts_with("error: ") && stderr.contains(expect) && stderr.contains(name),
            "{name}: {stderr}"
        );
        assert_eq!(stderr.trim_end().lines().count(), 1, "{name}: {stderr}");
    }
    let (code, _, stderr) = run(&[dir.join("missing.gguf").to_str().expect("utf-8 path")]);
    assert_eq!(code, 1);
    assert!(stderr.contains("missing.gguf"), "{stderr}");
    std::fs::remove_dir_all(&dir).ok();
}

//! The qwen35 (Bonsai 2) hybrid model on the CPU emulator of the GPU (crates/bonsai-kernels/emu/,
//! built by scripts/emu.sh): `bonsai check` compares the emulated CUDA backend with the CPU one
//! (greedy tokens equal, first- and last-step logits within check's derived bound, perplexity
//! within 0.1 %, a batch of three sequences, a sampled run paused half-way) on
//! * the qwen35 goldens (`tests/golden/qwen35-{plain,hadamard}`, made by
//!   scripts/reference/make_golden_qwen35.py), written here as PQ2_0 GGUFs as
//!   `bonsai-model/tests/golden_qwen35.rs` writes them (which checks the CPU against the
//!   transformers float64 logits and greedy tokens: together the GPU is pinned to the reference),
//!   prompted with the golden prompt's ids;
//! * `--synthetic qwen35-tiny` (random ternary weights, Hadamard fold of block 128).
//!
//! Needs g++ and NVRTC as `emulated_gpu.rs` does: without them the tests print why and pass,
//! unless BONSAI_REQUIRE_NVRTC=1 (CI), where a missing NVRTC is a failure.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use bonsai_gguf::{GgufWriter, MetaValue, TensorType, TwoBitLayout, ValueType};
use bonsai_kernels::cuda::compile::Nvrtc;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_bonsai");
const REQUIRE_NVRTC_ENV: &str = "BONSAI_REQUIRE_NVRTC";
/// Greedy steps `check` compares on a golden (of the 64 the golden holds; the emulator runs a
/// decode step of the golden model in tens of milliseconds, check runs each backend thrice).
const GOLDEN_CHECK_STEPS: usize = 32;
/// Greedy steps `check` compares on the synthetic model.
const SYNTHETIC_CHECK_STEPS: &str = "16";
/// A prompt of more rows than one ssm_conv launch takes (and than a one-launch GEMV batch).
const LONG_PROMPT_LEN: usize = 70;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Emulator build and kernel cache under the target dir, shared with emulated_gpu.rs (emu.sh
/// locks its build).
fn work_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(name)
}

fn emulated(args: &[&str]) -> Command {
    let mut cmd = Command::new("bash");
    cmd.arg(repo_root().join("scripts/emu.sh"))
        .arg(BIN)
        .args(args)
        .env("BONSAI_EMU_DIR", work_dir("emu"))
        .env("BONSAI_CACHE_DIR", work_dir("emu-cache"))
        .env_remove("BONSAI_EMU_ARCH");
    cmd
}

fn text(out: &Output) -> String {
    format!(
        "status {}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Builds the emulator and loads the kernel library once; Err: why the tests cannot run here.
fn ready() -> bool {
    static SETUP: OnceLock<Result<(), String>> = OnceLock::new();
    let setup = SETUP.get_or_init(|| {
        if Command::new("g++").arg("--version").output().is_err() {
            return Err("g++ not found: the CPU emulator of the GPU cannot be built".into());
        }
        if !Nvrtc::is_present() {
            let why = "NVRTC (libnvrtc.so.13) not found: the kernel loader cannot produce its cubin";
            assert!(std::env::var(REQUIRE_NVRTC_ENV).as_deref() != Ok("1"), "{why} ({REQUIRE_NVRTC_ENV}=1)");
            return Err(why.into());
        }
        let info = emulated(&["kernels", "info"]).output().expect("run scripts/emu.sh");
        assert!(info.status.success(), "{}", text(&info));
        Ok(())
    });
    match setup {
        Ok(()) => true,
        Err(why) => {
            println!("SKIPPED: {why}");
            false
        }
    }
}

/// Asserts `check` passed with greedy decoding identical for all `steps`; returns stdout.
fn assert_check_passed(out: &Output, steps: &str, context: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success() && stdout.contains("check passed"), "{context}: {}", text(out));
    assert!(stdout.contains(&format!("greedy: identical for {steps} steps")), "{context}: {}", text(out));
    stdout
}

#[test]
fn check_on_qwen35_tiny_agrees_with_the_cpu_emulated() {
    if !ready() {
        return;
    }
    let out = emulated(&["check", "--synthetic", "qwen35-tiny", "-n", SYNTHETIC_CHECK_STEPS]).output().expect("run scripts/emu.sh");
    assert_check_passed(&out, SYNTHETIC_CHECK_STEPS, "qwen35-tiny");
    // A prompt longer than ssm_conv's one-launch limit: the prefill conv runs in row chunks and
    // a second launch moves the state.
    let long = LONG_PROMPT_LEN.max(bonsai_kernels::launch::ssm_conv::ROWS_PER_CHUNK + 1);
    let vocab = bonsai_model::synthetic::qwen35_tiny_config(0).vocab;
    let prompt: Vec<String> = (0..long).map(|i| ((i * 37 + 11) % vocab).to_string()).collect();
    let args = ["check", "--synthetic", "qwen35-tiny", "-n", SYNTHETIC_CHECK_STEPS, "--prompt-tokens", &prompt.join(",")];
    let out = emulated(&args).output().expect("run scripts/emu.sh");
    assert_check_passed(&out, SYNTHETIC_CHECK_STEPS, "qwen35-tiny, long prompt");
}

/// A decode step of qwen35-tiny is one captured graph whose hybrid ops run their own kernels
/// (none of them on the host), and partial RoPE (16 of 64 dims) takes the separate qk_norm_rope
/// launch, never the qkv GEMV's rope epilogue. Every folded GEMV's input is normed (RMSNorm, or
/// the DeltaNet's gated norm before ssm_out), transformed and quantized into planes in one launch:
/// no separate norm or prepare launch is left (the plain transform is the embedding's inverse).
/// A mixer's two projections share one launch.
#[test]
fn qwen35_tiny_decode_is_one_graph_of_hybrid_kernels_emulated() {
    if !ready() {
        return;
    }
    let out = emulated(&["bench", "--synthetic", "qwen35-tiny", "-p", "8", "-n", "2", "-r", "1", "-v", "--batch", "2,9"]).output().expect("run scripts/emu.sh");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let all = format!("{}{stderr}", String::from_utf8_lossy(&out.stdout));
    assert!(out.status.success(), "{}", text(&out));
    // A plan's lines after its header, up to the next plan or the bench table.
    let plan_after = |header: &str| -> String {
        let rest = all.split(header).nth(1).unwrap_or_else(|| panic!("no plan '{header}' printed:\n{}", text(&out)));
        rest.lines().take_while(|l| !l.starts_with("decode step") && !l.starts_with("model:")).collect::<Vec<_>>().join("\n")
    };
    let decode = plan_after("decode step (greedy) plan:");
    let decode = decode.as_str();
    assert!(decode.lines().next().is_some_and(|l| l.contains("one CUDA graph per step")), "decode is not a graph:\n{decode}");
    for kernel in [
        "hadamard_blocks_in_warps",
        "gemm_f32_rows_column_cta",
        "hadamard_rotate_planes",
        "gemv_b1 Store pair: matmul_q2_gemv_b1_pair",
        "ssm_conv_channel_per_thread",
        "gated_delta_rows",
        "sigmoid_gate_grid_stride",
        "qk_norm_rope_kv_write",
    ] {
        assert!(decode.contains(kernel), "the decode step launches no {kernel}:\n{decode}");
    }
    assert!(!decode.contains("qkv+rope"), "partial RoPE took the qkv rope epilogue:\n{decode}");
    for apart in ["rms_norm_row_per_block", "gated_rms_norm_warp_per_head", "gemv_b1_prepare"] {
        assert!(!decode.contains(apart), "the decode step still launches {apart}:\n{decode}");
    }
    // Batched steps: each recurrent layer's conv and gated delta once for all sequences through
    // the state table, on the multi-token GEMV (2) and past it (9).
    for (n, want, apart) in [
        (2, &["ssm_conv_seqs", "gated_delta_seqs", "hadamard_rotate_planes_rows"][..], &["ssm_conv_channel_per_thread", "gated_delta_rows"][..]),
        (9, &["ssm_conv_seqs", "gated_delta_seqs", "gemm_small16"][..], &["ssm_conv_channel_per_thread", "gated_delta_rows"][..]),
    ] {
        let plan = plan_after(&format!("decode step of {n} sequences (greedy) plan:"));
        assert!(plan.lines().next().is_some_and(|l| l.contains("one CUDA graph per step")), "{n} sequences: not a graph:\n{plan}");
        for kernel in want {
            assert!(plan.contains(kernel), "the {n}-sequence step launches no {kernel}:\n{plan}");
        }
        for kernel in apart {
            assert!(!plan.contains(kernel), "the {n}-sequence step still launches {kernel}:\n{plan}");
        }
    }
}

fn golden_dir(variant: &str) -> PathBuf {
    repo_root().join("tests/golden").join(format!("qwen35-{variant}"))
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e} (run scripts/reference/make_golden_qwen35.py)", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The tensors of a safetensors file: name -> (dtype, shape, bytes).
fn read_safetensors(path: &Path) -> BTreeMap<String, (String, Vec<usize>, Vec<u8>)> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let header_len = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")) as usize;
    let header: Value = serde_json::from_slice(&bytes[8..8 + header_len]).expect("safetensors header");
    let data = &bytes[8 + header_len..];
    let mut out = BTreeMap::new();
    for (name, entry) in header.as_object().expect("header object") {
        if name == "__metadata__" {
            continue;
        }
        let dtype = entry["dtype"].as_str().expect("dtype").to_string();
        let shape = entry["shape"].as_array().expect("shape").iter().map(|d| d.as_u64().expect("dim") as usize).collect();
        let offsets = entry["data_offsets"].as_array().expect("offsets");
        let (start, end) = (offsets[0].as_u64().expect("start") as usize, offsets[1].as_u64().expect("end") as usize);
        out.insert(name.clone(), (dtype, shape, data[start..end].to_vec()));
    }
    out
}

/// A quantized matrix's values from its packed trits (2 bits each, code − 1) and f16 scales per
/// 128-group: `[out, in]` row-major.
fn dequantized(tensors: &BTreeMap<String, (String, Vec<usize>, Vec<u8>)>, name: &str) -> (Vec<usize>, Vec<f32>) {
    let (dt, tshape, trits) = &tensors[&format!("{name}.trits")];
    let (ds, sshape, scales) = &tensors[&format!("{name}.scales")];
    assert_eq!((dt.as_str(), ds.as_str()), ("U8", "F16"), "{name}");
    let (rows, cols, groups) = (tshape[0], tshape[1] * 4, sshape[1]);
    let scales: Vec<f32> = scales.chunks_exact(2).map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32()).collect();
    let mut out = Vec::with_capacity(rows * cols);
    for r in 0..rows {
        for c in 0..cols {
            let code = (trits[r * tshape[1] + c / 4] >> (2 * (c % 4))) & 3;
            assert!(code < 3, "{name}: code 3 at [{r}, {c}]");
            out.push((code as f32 - 1.0) * scales[r * groups + c / 128]);
        }
    }
    (vec![rows, cols], out)
}

fn meta_value(v: &Value) -> MetaValue {
    match v {
        Value::Bool(b) => MetaValue::Bool(*b),
        Value::String(s) => MetaValue::String(s.clone()),
        Value::Number(n) if n.is_u64() => MetaValue::U32(n.as_u64().expect("u64") as u32),
        Value::Number(n) if n.is_i64() => MetaValue::I32(n.as_i64().expect("i64") as i32),
        Value::Number(n) => MetaValue::F32(n.as_f64().expect("f64") as f32),
        Value::Array(items) => {
            let values: Vec<MetaValue> = items
                .iter()
                .map(|i| match i {
                    // Integer arrays (sections, sign widths and values) as i32, as the fork writes.
                    Value::Number(n) => MetaValue::I32(n.as_i64().expect("integer array") as i32),
                    other => meta_value(other),
                })
                .collect();
            let elem = values.first().map_or(ValueType::I32, MetaValue::value_type);
            MetaValue::Array(elem, values)
        }
        Value::Null | Value::Object(_) => panic!("unexpected metadata value {v}"),
    }
}

/// The golden as a PQ2_0 GGUF (no tokenizer: check is given the prompt's ids), written to `out`.
fn write_golden_gguf(dir: &Path, meta: &Value, out: &Path) {
    let tensors = read_safetensors(&dir.join("weights.safetensors"));
    let quant = TensorType::TwoBit(TwoBitLayout::Pq2G128ScaleFirst);
    let mut w = GgufWriter::new();
    for section in ["gguf_metadata", "hadamard_metadata"] {
        if let Some(entries) = meta[section].as_object() {
            for (key, v) in entries {
                w.add_metadata(key, meta_value(v));
            }
        }
    }
    for name in meta["quantized_names"].as_array().expect("quantized_names").iter().map(|v| v.as_str().expect("name")) {
        let (shape, values) = dequantized(&tensors, name);
        let data = bonsai_gguf::quantize(quant, &values).expect("quantize");
        w.add_tensor(name, &[shape[1] as u64, shape[0] as u64], quant, data).expect("add quantized tensor");
    }
    for (name, (dtype, shape, bytes)) in &tensors {
        if name.ends_with(".trits") || name.ends_with(".scales") {
            continue;
        }
        assert_eq!(dtype, "F32", "{name}");
        let values: Vec<f32> = bytes.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes"))).collect();
        let ne: Vec<u64> = shape.iter().rev().map(|&d| d as u64).collect();
        let is_bf16 = name.ends_with("ssm_alpha.weight") || name.ends_with("ssm_beta.weight");
        let ty = if is_bf16 { TensorType::BF16 } else { TensorType::F32 };
        w.add_tensor(name, &ne, ty, bonsai_gguf::quantize(ty, &values).expect("encode float tensor")).expect("add float tensor");
    }
    let mut bytes = Vec::new();
    w.write_to(&mut bytes).expect("write gguf");
    std::fs::write(out, bytes).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
}

fn check_golden(variant: &str) {
    if !ready() {
        return;
    }
    let dir = golden_dir(variant);
    let meta = read_json(&dir.join("meta.json"));
    let models = work_dir("emu-models");
    std::fs::create_dir_all(&models).unwrap_or_else(|e| panic!("{}: {e}", models.display()));
    let gguf = models.join(format!("qwen35-{variant}-PQ2_0.gguf"));
    write_golden_gguf(&dir, &meta, &gguf);
    let prompt: Vec<String> = meta["tokens"].as_array().expect("tokens").iter().map(|v| v.as_u64().expect("id").to_string()).collect();
    let steps = GOLDEN_CHECK_STEPS.to_string();
    let args = ["check", "-m", gguf.to_str().expect("utf-8 path"), "--prompt-tokens", &prompt.join(","), "-n", &steps];
    let out = emulated(&args).output().expect("run scripts/emu.sh");
    let stdout = assert_check_passed(&out, &steps, &format!("qwen35-{variant}"));
    println!("{stdout}");
}

#[test]
fn qwen35_plain_golden_agrees_with_the_cpu_emulated() {
    check_golden("plain");
}

#[test]
fn qwen35_hadamard_golden_agrees_with_the_cpu_emulated() {
    check_golden("hadamard");
}

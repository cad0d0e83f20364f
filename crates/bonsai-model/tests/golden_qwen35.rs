//! The qwen35 (Bonsai 2) model on the CPU backend against float64 transformers logits.
//!
//! `tests/golden/qwen35-{plain,hadamard}` (made by `scripts/reference/make_golden_qwen35.py`)
//! hold a tiny random hybrid model (4 layers: 3 Gated DeltaNet, 1 gated attention; hidden 256,
//! FFN 512) as GGUF stores it: ternary matrices with one f16 scale per 128-group, BF16-exact
//! alpha / beta, f32 rest; the hadamard variant's weights are folded (bonsai2.md §4) and carry the
//! `prism.hadamard.*` contract. Each golden is written here as a GGUF in every 2-bit format of
//! [`FORMATS`] (all hold the weights exactly: the test checks it), loaded with `open_model` on
//! the CPU backend, and:
//! 1. one batched prefill with all-row logits is compared with transformers' float64 logits
//!    (`logits.bin`), every logit, within the bound derived below;
//! 2. greedy decoding reproduces the 64 `greedy_new_tokens` exactly;
//! 3. token-by-token decode reproduces the batched prefill within its bound.
//!
//! The bound. Write E for the engine, T for transformers (float64), R for the exact function and
//! R16 for the exact function with cached K/V rounded to f16 (what bonsai computes; transformers
//! keeps K/V in its own dtype). Then |E − T| <= |E − R16| + |R16 − R| + |R − T|:
//! * |R − T|: T is float64; the generator checks it against an independent numpy forward to
//!   1e-12 relative (measured 1.5e-15), negligible here.
//! * |R16 − R|: the f16 cache's own effect, computed exactly by the generator (the numpy
//!   reference run with and without rounding K after RoPE and V to f16:
//!   `logits_f16_cache.bin` − `logits.bin`), up to 7.1e-4 here (one attention layer). It alone
//!   exceeds the issue's 1e-4 of the logit RMS (3.4e-4): with an f16 cache that target is
//!   reachable only against R16, not against transformers. `CACHE_EFFECT_SLACK` absorbs the
//!   float64 forwards' rounding.
//! * |E − R16|: one function evaluated in f32. A-priori (Higham): every dot product of K terms
//!   errs by at most γ_K·Σ|terms| (γ_K ≈ K·2^-24; K <= 512: 3.1e-5); a layer chains ~14 ops
//!   (norm, transform, projections, conv, the DeltaNet recurrence — whose own error does not grow
//!   across rows, see `bonsai_kernels::ops::gated_delta` —, gated norm, output, FFN, residual
//!   adds), four layers plus the head ~60; RMSNorm re-normalises, so relative errors add to
//!   first order: ~60·3.1e-5 ≈ 1.9e-3 of the largest |logit|. `F32_REL_TOL` allows 2e-3 of it:
//!   the worst case, where every rounding error aligns. Rounding errors of random sign add like a
//!   random walk, ~sqrt(K)·2^-24 per dot product: that is what the measurement shows (printed,
//!   `--nocapture`), and the test also asserts it against the issue's target:
//!   |E − R16| <= `ISSUE_RMS_FRACTION` (1e-4) of the logit RMS.
//!
//! Greedy: a step's token agrees when every logit is within half the float64 top-1 − top-2
//! margin; the smallest margin is 0.021 (plain) and 0.050 (hadamard). The a-priori f32 term is
//! looser than that, so equality is asserted directly; the error measured over the prompt
//! (|E − T| <= 7.1e-4,
//! nearly all of it the f16 cache) is 15x below half the smallest margin.
//!
//! Token-by-token decode runs the m = 1 paths (one-row matmuls, the recurrence one row per call)
//! against the batched ones over the same cache rounding: both are within the f32 term of R16,
//! so within twice it of each other (and cached values that differ in their last f32 bit may
//! round to neighbouring f16 values, an effect bounded by the cache term).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bonsai_gguf::{GgufFile, GgufWriter, MetaValue, TensorType, TwoBitLayout, ValueType};
use bonsai_model::convert::{convert_checkpoint, OutputType};
use bonsai_model::loader::{load_model, LoadedModel};
use bonsai_model::CpuBackend;
use serde_json::Value;

mod common;
use common::golden::{batched_logits, golden_dir, greedy, ids, max_abs, max_diff, read_json, read_logits, stepwise_logits};

/// The 2-bit formats each golden is written in. PTQ1_0 joins this list when bonsai-gguf reads it
/// (it holds the same ternary weights exactly).
const FORMATS: [(&str, TensorType); 3] = [
    ("PQ2_0", TensorType::TwoBit(TwoBitLayout::Pq2G128ScaleFirst)),
    ("Q2_0_g64", TensorType::TwoBit(TwoBitLayout::Q2G64ScaleFirst)),
    ("PTQ1_0", TensorType::Ptq1_0),
];
/// f32 evaluation error bound, relative to the largest |logit| (derivation above).
const F32_REL_TOL: f64 = 2e-3;
/// The issue's accuracy target for the f32 evaluation, relative to the logit RMS.
const ISSUE_RMS_FRACTION: f64 = 1e-4;
/// Multiplier on the exactly computed f16-cache effect.
const CACHE_EFFECT_SLACK: f64 = 1.1;
/// Cache room beyond the prompt and the continuation.
const EXTRA_CTX: usize = 8;

fn qwen35_dir(variant: &str) -> PathBuf {
    golden_dir(&format!("qwen35-{variant}"))
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
        let shape: Vec<usize> = entry["shape"].as_array().expect("shape").iter().map(|d| d.as_u64().expect("dim") as usize).collect();
        let offsets = entry["data_offsets"].as_array().expect("offsets");
        let (start, end) = (offsets[0].as_u64().expect("start") as usize, offsets[1].as_u64().expect("end") as usize);
        out.insert(name.clone(), (dtype, shape, data[start..end].to_vec()));
    }
    out
}

fn f32s(dtype: &str, bytes: &[u8]) -> Vec<f32> {
    assert_eq!(dtype, "F32");
    bytes.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes"))).collect()
}

/// A quantized matrix's values from its packed trits and f16 group scales (see the generator's
/// STORAGE note): `[out, in]` row-major.
fn dequantized(tensors: &BTreeMap<String, (String, Vec<usize>, Vec<u8>)>, name: &str) -> (Vec<usize>, Vec<f32>) {
    let (dt, tshape, trits) = &tensors[&format!("{name}.trits")];
    let (ds, sshape, scales) = &tensors[&format!("{name}.scales")];
    assert_eq!((dt.as_str(), ds.as_str()), ("U8", "F16"), "{name}");
    let (rows, cols) = (tshape[0], tshape[1] * 4);
    let groups = sshape[1];
    assert_eq!(cols, groups * 128, "{name}");
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

/// The `tokenizer.*` metadata of the golden tokenizer (`golden_tokenizer.py`, which encoded the
/// prompt): the Qwen3 golden `q1` converted with bonsai's converter, which writes it.
/// Computed once: both tests share it (and its temporary folder).
fn tokenizer_metadata() -> &'static [(String, MetaValue)] {
    static ENTRIES: std::sync::OnceLock<Vec<(String, MetaValue)>> = std::sync::OnceLock::new();
    ENTRIES.get_or_init(convert_tokenizer)
}

fn convert_tokenizer() -> Vec<(String, MetaValue)> {
    let tmp = std::env::temp_dir().join(format!("bonsai-golden-qwen35-tokenizer-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap_or_else(|e| panic!("{}: {e}", tmp.display()));
    let gguf = tmp.join("q1.gguf");
    let q1 = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden/q1");
    convert_checkpoint(&q1, &gguf, OutputType::Q1_0, &mut |_| {}).expect("converting golden/q1 for its tokenizer");
    let file = GgufFile::open(&gguf).expect("open converted q1");
    let entries = file.metadata().iter().filter(|(k, _)| k.starts_with("tokenizer.")).cloned().collect();
    std::fs::remove_dir_all(&tmp).unwrap_or_else(|e| panic!("{}: {e}", tmp.display()));
    entries
}

/// The golden as a GGUF file whose quantized matrices are `quant`.
fn gguf_bytes(dir: &Path, meta: &Value, quant: TensorType, tokenizer: &[(String, MetaValue)]) -> Vec<u8> {
    let tensors = read_safetensors(&dir.join("weights.safetensors"));
    let mut w = GgufWriter::new();
    for (key, value) in tokenizer {
        w.add_metadata(key, value.clone());
    }
    for section in ["gguf_metadata", "hadamard_metadata"] {
        if let Some(entries) = meta[section].as_object() {
            for (key, v) in entries {
                w.add_metadata(key, meta_value(v));
            }
        }
    }
    let quantized: Vec<&str> = meta["quantized_names"].as_array().expect("quantized_names").iter().map(|v| v.as_str().expect("name")).collect();
    for name in &quantized {
        let (shape, values) = dequantized(&tensors, name);
        let data = bonsai_gguf::quantize(quant, &values).expect("quantize");
        // Every value is ternary times an f16 group scale that is also the group's max |value|:
        // each format holds it exactly.
        let mut back = vec![0.0f32; values.len()];
        bonsai_gguf::dequantize(quant, &data, &mut back).expect("dequantize");
        assert!(back == values, "{name}: {} does not hold the golden weights exactly", quant.name());
        w.add_tensor(name, &[shape[1] as u64, shape[0] as u64], quant, data).expect("add quantized tensor");
    }
    for (name, (dtype, shape, bytes)) in &tensors {
        if name.ends_with(".trits") || name.ends_with(".scales") {
            continue;
        }
        let values = f32s(dtype, bytes);
        let ne: Vec<u64> = shape.iter().rev().map(|&d| d as u64).collect();
        let is_bf16 = name.ends_with("ssm_alpha.weight") || name.ends_with("ssm_beta.weight");
        let ty = if is_bf16 { TensorType::BF16 } else { TensorType::F32 };
        let data = bonsai_gguf::quantize(ty, &values).expect("encode float tensor");
        w.add_tensor(name, &ne, ty, data).expect("add float tensor");
    }
    let mut bytes = Vec::new();
    w.write_to(&mut bytes).expect("write gguf");
    bytes
}

/// Set to a folder to keep each GGUF written here (`qwen35-<variant>-<format>.gguf`), e.g. to run
/// `bonsai info / generate / perplexity --cpu` on it.
const KEEP_GGUF_ENV: &str = "BONSAI_QWEN35_GOLDEN_GGUF_DIR";

fn load(dir: &Path, meta: &Value, (format, quant): (&str, TensorType), ctx: usize) -> LoadedModel<CpuBackend> {
    let bytes = gguf_bytes(dir, meta, quant, tokenizer_metadata());
    if let Some(keep) = std::env::var_os(KEEP_GGUF_ENV) {
        let name = format!("{}-{format}.gguf", dir.file_name().and_then(|n| n.to_str()).unwrap_or("qwen35"));
        std::fs::write(Path::new(&keep).join(name), &bytes).expect("keeping the GGUF");
    }
    let file = GgufFile::from_bytes(bytes).expect("read back the golden GGUF");
    load_model(&file, CpuBackend, Some(ctx)).unwrap_or_else(|e| panic!("loading {} as {}: {e}", dir.display(), quant.name()))
}

fn rms(rows: &[Vec<f64>]) -> f64 {
    let n = rows.iter().map(Vec::len).sum::<usize>() as f64;
    (rows.iter().flatten().map(|v| v * v).sum::<f64>() / n).sqrt()
}

fn check_golden(variant: &str) {
    let dir = qwen35_dir(variant);
    let meta = read_json(&dir.join("meta.json"), "make_golden_qwen35.py");
    let (prompt, expected_greedy) = (ids(&meta, "tokens"), ids(&meta, "greedy_new_tokens"));
    let vocab = meta["logits_shape"][1].as_u64().expect("logits_shape") as usize;
    let reference = read_logits(&dir.join("logits.bin"), prompt.len(), vocab, 8);
    let reference_f16 = read_logits(&dir.join("logits_f16_cache.bin"), prompt.len(), vocab, 8);
    let f32_tol = F32_REL_TOL * max_abs(&reference);
    let issue_tol = ISSUE_RMS_FRACTION * rms(&reference);
    let cache = max_diff(&reference_f16, &reference);
    for (format, quant) in FORMATS {
        let loaded = load(&dir, &meta, (format, quant), prompt.len() + expected_greedy.len() + EXTRA_CTX);
        let text = meta["prompt_text"].as_str().expect("prompt_text");
        assert_eq!(loaded.text_tokenizer().expect("tokenizer").encode(text).expect("encode"), prompt, "prompt ids");
        assert_eq!(loaded.model.config().vocab, vocab);
        assert_eq!(loaded.model.hybrid_config().is_some_and(|c| c.hadamard.is_some()), variant == "hadamard");
        let tag = format!("qwen35-{variant} {format}");

        // 1. Batched prefill vs transformers, per logit.
        let engine = batched_logits(&loaded, &prompt);
        let mut worst_ratio = 0.0f64;
        for (i, row) in engine.iter().enumerate() {
            for v in 0..vocab {
                let bound = CACHE_EFFECT_SLACK * (reference_f16[i][v] - reference[i][v]).abs() + f32_tol;
                let err = (row[v] - reference[i][v]).abs();
                assert!(err <= bound, "{tag}: logit [{i}, {v}] off by {err:e} > bound {bound:e}");
                worst_ratio = worst_ratio.max(err / bound);
            }
        }
        let (e_vs_t, e_vs_r16) = (max_diff(&engine, &reference), max_diff(&engine, &reference_f16));
        println!(
            "{tag}: max |logit| {:.3}, RMS {:.3}; |bonsai − transformers| max {e_vs_t:.3e} (worst err/bound {worst_ratio:.3}); \
             |bonsai − exact f16-cache| {e_vs_r16:.3e} (derived f32 bound {f32_tol:.3e}, issue target 1e-4·RMS {issue_tol:.3e}); \
             f16-cache effect {cache:.3e}",
            max_abs(&reference),
            rms(&reference)
        );
        assert!(e_vs_r16 <= issue_tol, "{tag}: bonsai vs its exact function {e_vs_r16:e} > 1e-4 of the logit RMS {issue_tol:e}");

        // 2. Greedy tokens, exactly.
        let got = greedy(&loaded, &prompt, expected_greedy.len());
        let min_margin = meta["greedy_min_margin"].as_f64().expect("greedy_min_margin");
        assert_eq!(got, expected_greedy, "{tag}: greedy continuation differs (smallest float64 margin {min_margin})");

        // 3. Token-by-token decode vs the batched prefill.
        let stepwise = stepwise_logits(&loaded, &prompt);
        let (step_vs_r16, step_diff) = (max_diff(&stepwise, &reference_f16), max_diff(&stepwise, &engine));
        println!("{tag}: decode token by token: vs exact f16-cache {step_vs_r16:.3e}, vs batched prefill {step_diff:.3e} (bound {:.3e})", 2.0 * f32_tol + cache);
        assert!(step_vs_r16 <= f32_tol + CACHE_EFFECT_SLACK * cache, "{tag}: decode vs exact {step_vs_r16:e}");
        assert!(step_diff <= 2.0 * f32_tol + CACHE_EFFECT_SLACK * cache, "{tag}: decode vs prefill {step_diff:e}");
    }
}

#[test]
fn qwen35_plain_matches_transformers_float64() {
    check_golden("plain");
}

#[test]
fn qwen35_hadamard_matches_transformers_float64() {
    check_golden("hadamard");
}

/// The load error of the hadamard golden (PQ2_0) after `edit` of its metadata.
fn load_error(edit: impl FnOnce(&mut serde_json::Map<String, Value>)) -> String {
    let dir = qwen35_dir("hadamard");
    let mut meta = read_json(&dir.join("meta.json"), "make_golden_qwen35.py");
    edit(meta["hadamard_metadata"].as_object_mut().expect("hadamard_metadata"));
    let bytes = gguf_bytes(&dir, &meta, FORMATS[0].1, &[]);
    let file = GgufFile::from_bytes(bytes).expect("read back");
    match load_model(&file, CpuBackend, Some(64)) {
        Ok(_) => panic!("a broken Hadamard contract loaded"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn qwen35_refuses_folds_it_cannot_apply() {
    // Only one of gate|up folded: they read one activation, so the transform cannot be shared.
    let msg = load_error(|h| {
        let names = h["prism.hadamard.weight_names"].as_array_mut().expect("names");
        names.retain(|n| n != "blk.0.ffn_up.weight");
    });
    assert!(msg.contains("blk.0.ffn_up.weight") && msg.contains("all or none"), "{msg}");
    // A prism.* key bonsai does not know.
    let msg = load_error(|h| {
        h.insert("prism.hadamard.rotation_seed".into(), Value::from(7));
    });
    assert!(msg.contains("prism.hadamard.rotation_seed") && msg.contains("does not know"), "{msg}");
    // ssm_alpha is never folded.
    let msg = load_error(|h| {
        h["prism.hadamard.weight_names"].as_array_mut().expect("names").push(Value::from("blk.0.ssm_alpha.weight"));
    });
    assert!(msg.contains("blk.0.ssm_alpha.weight"), "{msg}");
}


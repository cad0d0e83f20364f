//! `bonsai convert` end to end: a tiny Qwen3 checkpoint is written in-test (hand-made
//! safetensors shards in BF16, F16 and F32, an index, tokenizer files), converted by the built
//! binary, and the GGUF read back with bonsai-gguf: metadata, tokenizer, tensor names, shapes,
//! types and values. Bad inputs must fail with one line naming the problem and leave no file.

use std::path::{Path, PathBuf};
use std::process::Command;

use bonsai_gguf::{dequantize, keys, GgufFile, MetaValue, Qwen3Config, TokenizerMeta};
use serde_json::json;

const GROUP: usize = 128;
/// f16 keeps 11 significant bits: rounding moves a value by at most 2^-11 of itself.
const F16_REL_ROUNDING: f32 = 1.0 / 2048.0;
/// A 128-term f32 sum (the Q1_0 scale's mean) is off by at most 128 * 2^-24 of the magnitude sum.
const F32_MEAN_REL_ERROR: f32 = 128.0 / 16_777_216.0;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}

fn seed() -> u64 {
    let s = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    s.as_nanos() as u64
}

struct Geometry {
    layers: usize,
    hidden: usize,
    ffn: usize,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    vocab: usize,
    tied: bool,
}

const TINY: Geometry = Geometry {
    layers: 2,
    hidden: 128,
    ffn: 256,
    heads: 4,
    kv_heads: 2,
    head_dim: 64,
    vocab: 300,
    tied: false,
};

/// One source tensor: HF name, HF shape, and its values as stored (after the dtype rounding).
struct Source {
    name: String,
    shape: Vec<usize>,
    values: Vec<f32>,
    dtype: &'static str,
}

fn hf_tensors(g: &Geometry) -> Vec<(String, Vec<usize>)> {
    let (h, q, kv) = (g.hidden, g.heads * g.head_dim, g.kv_heads * g.head_dim);
    let mut t = vec![("model.embed_tokens.weight".to_string(), vec![g.vocab, h])];
    for l in 0..g.layers {
        let p = |s: &str| format!("model.layers.{l}.{s}.weight");
        t.extend([
            (p("input_layernorm"), vec![h]),
            (p("self_attn.q_proj"), vec![q, h]),
            (p("self_attn.k_proj"), vec![kv, h]),
            (p("self_attn.v_proj"), vec![kv, h]),
            (p("self_attn.q_norm"), vec![g.head_dim]),
            (p("self_attn.k_norm"), vec![g.head_dim]),
            (p("self_attn.o_proj"), vec![h, q]),
            (p("post_attention_layernorm"), vec![h]),
            (p("mlp.gate_proj"), vec![g.ffn, h]),
            (p("mlp.up_proj"), vec![g.ffn, h]),
            (p("mlp.down_proj"), vec![h, g.ffn]),
        ]);
    }
    t.push(("model.norm.weight".to_string(), vec![h]));
    if !g.tied {
        t.push(("lm_head.weight".to_string(), vec![g.vocab, h]));
    }
    t
}

/// Random values stored in BF16, F16 or F32 in turn (so every input dtype is exercised).
fn make_sources(g: &Geometry, rng: &mut Rng) -> Vec<Source> {
    let dtypes = ["BF16", "F16", "F32"];
    hf_tensors(g)
        .into_iter()
        .enumerate()
        .map(|(i, (name, shape))| {
            let dtype = dtypes[i % dtypes.len()];
            let n: usize = shape.iter().product();
            let values = (0..n)
                .map(|_| {
                    let v = rng.unit() * 0.5;
                    match dtype {
                        "BF16" => f32::from_bits(v.to_bits() & 0xffff_0000),
                        "F16" => half::f16::from_f32(v).to_f32(),
                        _ => v,
                    }
                })
                .collect();
            Source { name, shape, values, dtype }
        })
        .collect()
}

fn encode_safetensors(tensors: &[&Source]) -> Vec<u8> {
    let mut header = serde_json::Map::new();
    let mut data = Vec::new();
    for t in tensors {
        let begin = data.len();
        for v in &t.values {
            match t.dtype {
                "BF16" => data.extend_from_slice(&((v.to_bits() >> 16) as u16).to_le_bytes()),
                "F16" => data.extend_from_slice(&half::f16::from_f32(*v).to_bits().to_le_bytes()),
                _ => data.extend_from_slice(&v.to_le_bytes()),
            }
        }
        header.insert(
            t.name.clone(),
            json!({"dtype": t.dtype, "shape": t.shape, "data_offsets": [begin, data.len()]}),
        );
    }
    let header = serde_json::to_vec(&header).unwrap();
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&header);
    out.extend_from_slice(&data);
    out
}

fn config_json(g: &Geometry) -> serde_json::Value {
    json!({
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
        "num_hidden_layers": g.layers, "hidden_size": g.hidden, "intermediate_size": g.ffn,
        "num_attention_heads": g.heads, "num_key_value_heads": g.kv_heads, "head_dim": g.head_dim,
        "vocab_size": g.vocab, "max_position_embeddings": 4096, "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0, "tie_word_embeddings": g.tied, "bos_token_id": 280,
        "eos_token_id": 281, "torch_dtype": "bfloat16",
        "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024}
    })
}

/// 260 plain tokens "t0".."t259"; added tokens 280 <|endoftext|> (special), 281 <|im_end|>
/// (special), 290 <think> (not special); everything else up to vocab 300 is a gap.
/// `template_in_file`: the chat template goes to chat_template.jinja (newer transformers) instead
/// of tokenizer_config.json.
fn tokenizer_files(dir: &Path, template_in_file: bool) {
    let vocab: serde_json::Map<String, serde_json::Value> =
        (0..260).map(|i| (format!("t{i}"), json!(i))).collect();
    let tokenizer = json!({
        "model": {"type": "BPE", "vocab": vocab, "merges": [["t1", "t2"], ["t3", "t4"]]},
        "added_tokens": [
            {"id": 280, "content": "<|endoftext|>", "special": true},
            {"id": 281, "content": "<|im_end|>", "special": true},
            {"id": 290, "content": "<think>", "special": false}
        ]
    });
    std::fs::write(dir.join("tokenizer.json"), tokenizer.to_string()).unwrap();
    let mut config = json!({"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
                            "bos_token": null});
    if template_in_file {
        std::fs::write(dir.join("chat_template.jinja"), "{{ messages }}").unwrap();
    } else {
        config["chat_template"] = json!("{{ messages }}");
    }
    std::fs::write(dir.join("tokenizer_config.json"), config.to_string()).unwrap();
}

fn temp_dir(tag: &str, seed: u64) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bonsai-cli-convert-{tag}-{seed:x}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes the checkpoint as two shards plus an index; `skip` leaves one tensor out.
fn write_checkpoint(dir: &Path, g: &Geometry, sources: &[Source], skip: Option<&str>) {
    std::fs::write(dir.join("config.json"), config_json(g).to_string()).unwrap();
    // The tied variant also exercises the separate template file.
    tokenizer_files(dir, g.tied);
    let kept: Vec<&Source> = sources.iter().filter(|s| Some(s.name.as_str()) != skip).collect();
    let (first, second) = kept.split_at(kept.len() / 2);
    let mut weight_map = serde_json::Map::new();
    for (file, part) in
        [("model-00001-of-00002.safetensors", first), ("model-00002-of-00002.safetensors", second)]
    {
        std::fs::write(dir.join(file), encode_safetensors(part)).unwrap();
        for s in part {
            weight_map.insert(s.name.clone(), json!(file));
        }
    }
    let index = json!({"metadata": {"total_size": 0}, "weight_map": weight_map});
    std::fs::write(dir.join("model.safetensors.index.json"), index.to_string()).unwrap();
}

fn run_convert(dir: &Path, out: &Path, ty: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_bonsai"))
        .args(["convert"])
        .arg(dir)
        .arg("-o")
        .arg(out)
        .args(["--type", ty])
        .output()
        .expect("run the bonsai binary")
}

/// The GGUF name of an HF tensor (written out here, independently of the converter's table).
fn gguf_name(hf: &str) -> String {
    match hf {
        "model.embed_tokens.weight" => return "token_embd.weight".into(),
        "model.norm.weight" => return "output_norm.weight".into(),
        "lm_head.weight" => return "output.weight".into(),
        _ => {}
    }
    let rest = hf.strip_prefix("model.layers.").unwrap();
    let (layer, stem) = rest.split_once('.').unwrap();
    let stem = stem.strip_suffix(".weight").unwrap();
    let short = match stem {
        "input_layernorm" => "attn_norm",
        "self_attn.q_proj" => "attn_q",
        "self_attn.k_proj" => "attn_k",
        "self_attn.v_proj" => "attn_v",
        "self_attn.o_proj" => "attn_output",
        "self_attn.q_norm" => "attn_q_norm",
        "self_attn.k_norm" => "attn_k_norm",
        "post_attention_layernorm" => "ffn_norm",
        "mlp.gate_proj" => "ffn_gate",
        "mlp.up_proj" => "ffn_up",
        "mlp.down_proj" => "ffn_down",
        other => panic!("unmapped {other}"),
    };
    format!("blk.{layer}.{short}.weight")
}

/// Decoded output values against the source under the rule of `ty` (SPEC §1).
fn check_values(ty: &str, src: &Source, got: &[f32], seed: u64) {
    let ctx = |i: usize| format!("{} [{i}] as {ty}, seed {seed}", src.name);
    if src.shape.len() == 1 || ty == "f32" {
        assert_eq!(got, &src.values[..], "{}", ctx(0));
        return;
    }
    if ty == "f16" {
        for (i, (g, v)) in got.iter().zip(&src.values).enumerate() {
            assert_eq!(*g, half::f16::from_f32(*v).to_f32(), "{}", ctx(i));
        }
        return;
    }
    // Every type scales 128-weight groups: mainline Q2_0's two 64-weight blocks of a group carry
    // the group's scale (convert writes it into both).
    let group = GROUP;
    for (gi, (g, v)) in got.chunks(group).zip(src.values.chunks(group)).enumerate() {
        let d = g.iter().fold(0f32, |m, x| m.max(x.abs()));
        if ty == "q1_0" {
            let mean = (v.iter().map(|x| f64::from(x.abs())).sum::<f64>() / GROUP as f64) as f32;
            // d = f16(mean |w|): off by the f16 rounding plus the f32 summation error.
            let bound = mean * (F16_REL_ROUNDING + F32_MEAN_REL_ERROR);
            assert!((d - mean).abs() <= bound, "{}: d {d} vs mean {mean}", ctx(gi * GROUP));
            for (j, (x, w)) in g.iter().zip(v).enumerate() {
                let want = if *w >= 0.0 { d } else { -d };
                assert_eq!(*x, want, "{}", ctx(gi * GROUP + j));
            }
        } else {
            let absmax = v.iter().fold(0f32, |m, x| m.max(x.abs()));
            // d = f16(absmax): only the f16 rounding.
            assert!((d - absmax).abs() <= absmax * F16_REL_ROUNDING, "{}", ctx(gi * group));
            // The fork's rule in f32: level = round(w · (1 / absmax)), half away from zero.
            let id = 1.0 / absmax;
            for (j, (x, w)) in g.iter().zip(v).enumerate() {
                let want = (w * id).round() * d;
                assert_eq!(*x, want, "{}", ctx(gi * group + j));
            }
        }
    }
}

fn expected_type(ty: &str) -> &'static str {
    match ty {
        "q1_0" => "Q1_0",
        "pq2_0" => "PQ2_0",
        "ptq1_0" => "PTQ1_0",
        "q2_0" => "Q2_0_g64",
        "f16" => "F16",
        _ => "F32",
    }
}

fn convert_and_check(g: &Geometry, ty: &str) {
    let seed = seed();
    let mut rng = Rng(seed);
    let dir = temp_dir(&format!("ok-{ty}"), seed);
    let sources = make_sources(g, &mut rng);
    write_checkpoint(&dir, g, &sources, None);
    let out = dir.join("out.gguf");
    let run = run_convert(&dir, &out, ty);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "convert --type {ty} failed: {stderr} (seed {seed})");

    let file = GgufFile::open(&out).unwrap();
    let names: Vec<&str> = file.tensors().iter().map(|t| t.name.as_str()).collect();
    let expected: Vec<String> = sources.iter().map(|s| gguf_name(&s.name)).collect();
    assert_eq!(names, expected);
    for src in &sources {
        let view = file.tensor(&gguf_name(&src.name)).unwrap();
        let shape: Vec<u64> = src.shape.iter().rev().map(|&d| d as u64).collect();
        assert_eq!(view.info.shape, shape, "{}", src.name);
        let want_ty = if src.shape.len() == 1 { "F32" } else { expected_type(ty) };
        assert_eq!(view.info.ty.name(), want_ty, "{}", src.name);
        let mut got = vec![f32::NAN; src.values.len()];
        dequantize(view.info.ty, view.data, &mut got).unwrap();
        check_values(ty, src, &got, seed);
    }

    let config = Qwen3Config::from_gguf(&file).unwrap();
    let dims = (config.n_layers, config.hidden, config.ffn, config.n_q_heads, config.n_kv_heads);
    assert_eq!(dims, (g.layers, g.hidden, g.ffn, g.heads, g.kv_heads));
    assert_eq!((config.head_dim, config.vocab, config.context_len), (g.head_dim, g.vocab, 4096));
    assert_eq!((config.rope_theta, config.rms_eps, config.tied_embeddings), (1e6, 1e-6, g.tied));
    let scaling = config.rope_scaling.expect("yarn scaling written");
    assert_eq!((scaling.factor, scaling.original_context_len), (4.0, 1024));
    assert_eq!(file.get_str(keys::GENERAL_ARCHITECTURE).unwrap(), "qwen3");
    assert_eq!(file.get_str(keys::QWEN3_ROPE_SCALING_TYPE).unwrap(), "yarn");
    assert_eq!(file.get(keys::TOKENIZER_ADD_BOS), Some(&MetaValue::Bool(false)));

    let tok = TokenizerMeta::from_gguf(&file).unwrap();
    assert_eq!((tok.model.as_str(), tok.pre.as_deref()), ("gpt2", Some("qwen2")));
    assert_eq!(tok.tokens.len(), g.vocab);
    let picks = [
        (5, "t5", 1),
        (260, "[PAD260]", 5),
        (280, "<|endoftext|>", 3),
        (281, "<|im_end|>", 3),
        (290, "<think>", 4),
    ];
    for (id, text, kind) in picks {
        assert_eq!((tok.tokens[id].as_str(), tok.token_types[id]), (text, kind), "token {id}");
    }
    assert_eq!(tok.merges, ["t1 t2", "t3 t4"]);
    // eos/pad from tokenizer_config contents; bos from config.json (tokenizer_config has null).
    assert_eq!((tok.eos_id, tok.pad_id, tok.bos_id), (Some(281), Some(280), Some(280)));
    assert_eq!(tok.chat_template.as_deref(), Some("{{ messages }}"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn converts_q1_0() {
    convert_and_check(&TINY, "q1_0");
}

#[test]
fn converts_the_ternary_types() {
    for ty in ["pq2_0", "ptq1_0", "q2_0"] {
        convert_and_check(&TINY, ty);
    }
}

#[test]
fn the_scale_last_type_is_refused_naming_its_replacements() {
    let seed = seed();
    let dir = temp_dir("tq2", seed);
    write_checkpoint(&dir, &TINY, &make_sources(&TINY, &mut Rng(seed)), None);
    let run = run_convert(&dir, &dir.join("out.gguf"), "tq2_0_g128");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success());
    for replacement in ["pq2_0", "ptq1_0", "q2_0"] {
        assert!(stderr.contains(replacement), "{stderr}");
    }
    assert!(!dir.join("out.gguf").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn converts_f16_and_f32() {
    convert_and_check(&TINY, "f16");
    convert_and_check(&TINY, "f32");
}

#[test]
fn tied_embeddings_have_no_output_tensor() {
    convert_and_check(&Geometry { tied: true, ..TINY }, "q1_0");
}

/// Runs a conversion that must fail; returns stderr after checking it is one `error:` line and
/// that neither the output nor a temporary was left behind.
fn expect_failure(dir: &Path, ty: &str) -> String {
    let out_dir = dir.join("out");
    std::fs::create_dir_all(&out_dir).unwrap();
    let out = out_dir.join("model.gguf");
    let run = run_convert(dir, &out, ty);
    let stderr = String::from_utf8_lossy(&run.stderr).trim_end().to_string();
    assert_eq!(run.status.code(), Some(1), "stderr: {stderr}");
    assert!(stderr.starts_with("error: ") && !stderr.contains('\n'), "{stderr}");
    let left: Vec<_> = std::fs::read_dir(&out_dir).unwrap().collect();
    assert!(left.is_empty(), "files left after a failed run: {left:?}");
    stderr
}

#[test]
fn bad_checkpoints_fail_with_named_errors() {
    let seed = seed();
    let mut rng = Rng(seed);
    let sources = make_sources(&TINY, &mut rng);

    let dir = temp_dir("arch", seed);
    write_checkpoint(&dir, &TINY, &sources, None);
    let mut config = config_json(&TINY);
    config["model_type"] = json!("llama");
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    let err = expect_failure(&dir, "q1_0");
    assert!(err.contains("unsupported architecture") && err.contains("llama"), "{err}");

    std::fs::remove_file(dir.join("config.json")).unwrap();
    let err = expect_failure(&dir, "q1_0");
    assert!(err.contains("missing file") && err.contains("config.json"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();

    let dir = temp_dir("missing", seed);
    write_checkpoint(&dir, &TINY, &sources, Some("model.layers.1.mlp.up_proj.weight"));
    let err = expect_failure(&dir, "q1_0");
    assert!(err.contains("missing tensor 'model.layers.1.mlp.up_proj.weight'"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();

    // ffn 200: down_proj rows are 200 long, not whole 128-groups; fine for f16.
    let odd = Geometry { ffn: 200, ..TINY };
    let dir = temp_dir("k", seed);
    write_checkpoint(&dir, &odd, &make_sources(&odd, &mut rng), None);
    let err = expect_failure(&dir, "ptq1_0");
    assert!(err.contains("'model.layers.0.mlp.down_proj.weight'") && err.contains("200"), "{err}");
    let run = run_convert(&dir, &dir.join("ok.gguf"), "f16");
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    std::fs::remove_dir_all(&dir).unwrap();
}

//! `bonsai info FILE.gguf [--json]`: what a GGUF file holds (architecture, Qwen3 / qwen35 geometry,
//! tokenizer summary, tensor table) and how many weight bytes one decoded token reads.

use bonsai_gguf::{keys, GgufFile, LayerKind, Qwen35Config, Qwen3Config, SamplingDefaults, Signs, TensorInfo, TokenizerMeta};
use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct InfoArgs {
    /// The GGUF file to describe.
    #[arg(required_unless_present = "hf_repo", conflicts_with = "hf_repo")]
    pub file: Option<PathBuf>,
    #[command(flatten)]
    pub hub: crate::hub::HubArgs,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Weight bytes one decode step reads: every per-layer tensor (linear weights and norms), the
/// final norm, the LM head (`output.weight`, or all of `token_embd` when tied) and one row of
/// `token_embd` for the input token.
pub fn bytes_per_token(file: &GgufFile) -> u64 {
    let mut total: u64 =
        file.tensors().iter().filter(|t| t.name.starts_with("blk.")).map(|t| t.len_bytes).sum();
    total += file.tensor_info(keys::tensor::OUTPUT_NORM).map_or(0, |t| t.len_bytes);
    let embd = file.tensor_info(keys::tensor::TOKEN_EMBD);
    if let Some(embd) = embd {
        // Rows are the outermost dimension; a Q1_0 row of 4096 weights is 576 bytes.
        let rows = embd.shape.iter().skip(1).product::<u64>().max(1);
        total += embd.len_bytes / rows;
    }
    total += match (file.tensor_info(keys::tensor::OUTPUT), embd) {
        (Some(output), _) => output.len_bytes,
        (None, Some(embd)) => embd.len_bytes,
        (None, None) => 0,
    };
    total
}

/// Each low-bit (1-bit, 2-bit, ternary) type the file stores, once per on-disk id, with how
/// many tensors use it and why it reads that way (the id-42 layout resolution, or the id).
fn low_bit_types(file: &GgufFile) -> Vec<Value> {
    let mut seen: Vec<(bonsai_gguf::TensorType, u32, usize)> = Vec::new();
    for t in file.tensors().iter().filter(|t| bonsai_gguf::blocks::level_range(t.ty).is_some()) {
        match seen.iter_mut().find(|(ty, id, _)| *ty == t.ty && *id == t.type_id) {
            Some(entry) => entry.2 += 1,
            None => seen.push((t.ty, t.type_id, 1)),
        }
    }
    seen.into_iter()
        .map(|(ty, id, count)| json!({ "type": ty.name(), "type_id": id, "tensors": count, "why": file.type_reason(ty, id) }))
        .collect()
}

/// The sampler settings the file recommends (`general.sampling.*`); null when none.
fn sampling_json(d: &SamplingDefaults) -> Value {
    if d.is_empty() {
        return Value::Null;
    }
    json!({ "temperature": d.temperature, "top_k": d.top_k, "top_p": d.top_p, "min_p": d.min_p, "repeat_penalty": d.repeat_penalty, "text": d.describe() })
}

fn shape_text(t: &TensorInfo) -> String {
    t.shape.iter().map(u64::to_string).collect::<Vec<_>>().join(" x ")
}

fn config_json(c: &Qwen3Config) -> Value {
    json!({
        "n_layers": c.n_layers, "hidden": c.hidden, "ffn": c.ffn, "n_q_heads": c.n_q_heads,
        "n_kv_heads": c.n_kv_heads, "head_dim": c.head_dim, "vocab": c.vocab, "context_len": c.context_len,
        "rope_theta": c.rope_theta, "rms_eps": c.rms_eps, "tied_embeddings": c.tied_embeddings,
        "rope_scaling": c.rope_scaling.as_ref().map(|r| json!({
            "kind": format!("{:?}", r.kind).to_lowercase(), "factor": r.factor,
            "original_context_len": r.original_context_len, "beta_fast": r.beta_fast, "beta_slow": r.beta_slow,
        })),
    })
}

/// The qwen35 geometry: the fields Qwen3 has, plus the layer schedule, the DeltaNet sizes and
/// the Hadamard contract.
fn qwen35_json(c: &Qwen35Config) -> Value {
    let schedule: String = c.layers.iter().map(|k| if *k == LayerKind::FullAttention { 'A' } else { 'R' }).collect();
    json!({
        "n_layers": c.n_layers, "hidden": c.hidden, "ffn": c.ffn, "n_q_heads": c.n_q_heads,
        "n_kv_heads": c.n_kv_heads, "head_dim": c.head_dim, "vocab": c.vocab, "context_len": c.context_len,
        "rope_theta": c.rope_theta, "rms_eps": c.rms_eps, "tied_embeddings": c.tied_embeddings,
        "rope_scaling": Value::Null, "rot_dims": c.rot_dims, "rope_sections": c.rope_sections,
        "layer_schedule": schedule,
        "ssm": json!({
            "conv_kernel": c.conv_kernel, "head_dim": c.ssm_head_dim, "k_heads": c.ssm_k_heads, "v_heads": c.ssm_v_heads,
        }),
        "hadamard": c.hadamard.as_ref().map(|h| json!({
            "version": h.version, "block": h.block,
            "sign_widths": match &h.signs { Signs::Explicit(m) => json!(m.keys().collect::<Vec<_>>()), Signs::Identity => json!("identity") },
            "folded_weights": h.weight_names.len(), "inverse_token_embd": h.inverse_token_embd,
            "gdn_v_grouped": h.gdn_v_grouped, "tied_output": h.tied_output,
        })),
    })
}

fn tokenizer_json(t: &TokenizerMeta) -> Value {
    json!({
        "model": t.model, "pre": t.pre, "vocab_size": t.tokens.len(), "merges": t.merges.len(),
        "bos_id": t.bos_id, "eos_id": t.eos_id, "pad_id": t.pad_id, "has_chat_template": t.chat_template.is_some(),
    })
}

/// The whole report as JSON; the text form is printed from the same value.
fn report(file: &GgufFile, path: &std::path::Path) -> Value {
    // Geometry and tokenizer are optional parts of a GGUF: when absent or invalid the report
    // says why instead of failing (the file itself was read and validated).
    let config = match file.get_str(keys::GENERAL_ARCHITECTURE) {
        Ok(keys::ARCH_QWEN35) => Qwen35Config::from_gguf(file).map(|c| qwen35_json(&c)),
        _ => Qwen3Config::from_gguf(file).map(|c| config_json(&c)),
    }
    .map_err(|e| e.to_string());
    let tokenizer =
        TokenizerMeta::from_gguf(file).map(|t| tokenizer_json(&t)).map_err(|e| e.to_string());
    let tensors: Vec<Value> = file
        .tensors()
        .iter()
        .map(|t| json!({ "name": t.name, "type": t.ty.name(), "type_id": t.type_id, "shape": t.shape, "bytes": t.len_bytes }))
        .collect();
    json!({
        "file": path.display().to_string(),
        "file_bytes": file.file_len(),
        "gguf_version": file.version(),
        "alignment": file.alignment(),
        "architecture": file.get_str(keys::GENERAL_ARCHITECTURE).ok(),
        "config": config.as_ref().ok(),
        "config_error": config.as_ref().err(),
        "tokenizer": tokenizer.as_ref().ok(),
        "tokenizer_error": tokenizer.as_ref().err(),
        "low_bit_types": low_bit_types(file),
        "sampling_defaults": sampling_json(&SamplingDefaults::from_gguf(file)),
        "tensors": tensors,
        "total_tensor_bytes": file.tensors().iter().map(|t| t.len_bytes).sum::<u64>(),
        "bytes_per_token": bytes_per_token(file),
    })
}

fn print_text(out: &mut impl Write, file: &GgufFile, r: &Value) -> std::io::Result<()> {
    writeln!(out,
        "file:          {} ({} bytes, GGUF v{}, alignment {})",
        r["file"].as_str().unwrap_or(""),
        r["file_bytes"],
        r["gguf_version"],
        r["alignment"]
    )?;
    writeln!(out, "architecture:  {}", r["architecture"].as_str().unwrap_or("(none)"))?;
    match r["config"].as_object() {
        Some(c) => {
            writeln!(out,
                "geometry:      {} layers, hidden {}, ffn {}, heads {}/{} (q/kv), head_dim {}, vocab {}, context {}",
                c["n_layers"], c["hidden"], c["ffn"], c["n_q_heads"], c["n_kv_heads"], c["head_dim"], c["vocab"], c["context_len"]
            )?;
            writeln!(out,
                "               rope theta {}, rms eps {}, tied embeddings {}",
                c["rope_theta"], c["rms_eps"], c["tied_embeddings"]
            )?;
            if let Some(schedule) = c.get("layer_schedule") {
                let ssm = &c["ssm"];
                writeln!(out,
                    "               layers {} (R DeltaNet, A attention), rope {} of {} dims, DeltaNet heads {}/{} (k/v) of {}, conv {}",
                    schedule.as_str().unwrap_or(""), c["rot_dims"], c["head_dim"], ssm["k_heads"], ssm["v_heads"], ssm["head_dim"], ssm["conv_kernel"]
                )?;
                match c["hadamard"].as_object() {
                    Some(h) => writeln!(out,
                        "               Hadamard fold v{}, block {}, sign widths {}, {} folded weights, inverse embedding {}, grouped ssm_out {}",
                        h["version"], h["block"], h["sign_widths"], h["folded_weights"], h["inverse_token_embd"], h["gdn_v_grouped"]
                    )?,
                    None => writeln!(out, "               no Hadamard fold")?,
                }
            }
            if let Some(rs) = c["rope_scaling"].as_object() {
                writeln!(out,
                    "               rope scaling {} x{} over {} (beta fast {}, slow {})",
                    rs["kind"].as_str().unwrap_or(""),
                    rs["factor"],
                    rs["original_context_len"],
                    rs["beta_fast"],
                    rs["beta_slow"]
                )?;
            }
        }
        None => {
            writeln!(out, "geometry:      unavailable: {}", r["config_error"].as_str().unwrap_or(""))?
        }
    }
    match r["tokenizer"].as_object() {
        Some(t) => writeln!(out,
            "tokenizer:     {} (pre {}), {} tokens, {} merges, bos {}, eos {}, pad {}, chat template {}",
            t["model"].as_str().unwrap_or(""), t["pre"], t["vocab_size"], t["merges"], t["bos_id"], t["eos_id"], t["pad_id"],
            if t["has_chat_template"] == Value::Bool(true) { "yes" } else { "no" }
        )?,
        None => writeln!(out, "tokenizer:     unavailable: {}", r["tokenizer_error"].as_str().unwrap_or(""))?,
    }
    if let Some(text) = r["sampling_defaults"]["text"].as_str() {
        writeln!(out, "sampling:      {text} (general.sampling.*: used where flags and requests give none)")?;
    }
    for l in r["low_bit_types"].as_array().into_iter().flatten() {
        writeln!(out,
            "weights:       {} (id {}, {} tensors): {}",
            l["type"].as_str().unwrap_or(""),
            l["type_id"],
            l["tensors"],
            l["why"].as_str().unwrap_or("")
        )?;
    }
    let name_width = file.tensors().iter().map(|t| t.name.len()).max().unwrap_or(4).max(4);
    writeln!(out, "tensors ({}):", file.tensors().len())?;
    writeln!(out, "  {:<name_width$}  {:<18}  {:>22}  {:>14}", "name", "type", "shape", "bytes")?;
    for t in file.tensors() {
        writeln!(out,
            "  {:<name_width$}  {:<18}  {:>22}  {:>14}",
            t.name,
            t.ty.name(),
            shape_text(t),
            t.len_bytes
        )?;
    }
    writeln!(out, "total tensor bytes:          {}", r["total_tensor_bytes"])?;
    writeln!(out, "bytes read per decoded token: {}", r["bytes_per_token"])?;
    Ok(())
}

pub fn run(args: InfoArgs) -> anyhow::Result<()> {
    let path = match (args.hub.fetch()?, args.file) {
        (Some(path), _) | (None, Some(path)) => path,
        (None, None) => anyhow::bail!("give a GGUF file or a repository (-hf)"),
    };
    let file = GgufFile::open(&path).map_err(|e| match e {
        // An io error already names the path.
        bonsai_gguf::GgufError::Io { .. } => anyhow::Error::new(e),
        other => anyhow::Error::new(other).context(path.display().to_string()),
    })?;
    let r = report(&file, &path);
    // Locked and written with `?`: a reader that closes the pipe early (`| head`) ends the
    // command with a BrokenPipe error, which main treats as a quiet success.
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&r)?)?;
    } else {
        print_text(&mut out, &file, &r)?;
    }
    Ok(())
}

//! `bonsai quantize IN.gguf OUT.gguf --type T [--allow-lossy]`: re-packs every Q1_0, 2-bit and
//! ternary tensor of a GGUF file into another low-bit type without the checkpoint (logic in
//! `bonsai_model::requantize`). Exact re-packs (Q1_0 -> any ternary type, g128 ternary types
//! among themselves, g128 -> g64, any -> f32 / f16) never need the flag; the others are refused
//! without it.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use bonsai_model::convert::OutputType;
use bonsai_model::requantize::{requantize_file, RequantizeProgress};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

#[derive(clap::Args)]
pub struct QuantizeArgs {
    /// The GGUF file to re-pack (never written to)
    pub input: PathBuf,
    /// The GGUF file to write (atomically)
    pub output: PathBuf,
    /// Target type of every low-bit tensor: q1_0, q2_0 (mainline, 64 per scale), pq2_0, ptq1_0;
    /// or f16 / f32, every low-bit tensor decoded (exactly) for tools that read no low-bit type
    /// (f32 widens f16 / bf16 tensors too)
    #[arg(long = "type", value_parser = crate::convert::parse_type)]
    pub ty: OutputType,
    /// Re-quantize tensors whose weights the target cannot hold exactly (ternary -> q1_0, Q2_0
    /// g64 pairs with different scales -> a 128-weight type, +2 codes -> a ternary type)
    #[arg(long)]
    pub allow_lossy: bool,
}

const BAR_TEMPLATE: &str =
    "{spinner} [{elapsed_precise}] {bar:40} {bytes}/{total_bytes} ({eta}) {msg}";
/// Files below this size finish too fast for a bar to help.
const BAR_MIN_BYTES: u64 = 64 << 20;

pub fn run(args: QuantizeArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let big = std::fs::metadata(&args.input).map(|m| m.len() >= BAR_MIN_BYTES).unwrap_or(false);
    let bar = ProgressBar::with_draw_target(
        Some(0),
        if big { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() },
    );
    if let Ok(style) = ProgressStyle::with_template(BAR_TEMPLATE) {
        bar.set_style(style);
    }
    let mut on_progress = |p: &RequantizeProgress<'_>| {
        bar.set_length(p.bytes_total);
        bar.set_position(p.bytes_done);
        bar.set_message(format!("{}/{} {}", p.tensors_done, p.n_tensors, p.name));
    };
    let to = args.ty.tensor_type();
    let result = requantize_file(&args.input, &args.output, to, args.allow_lossy, &mut on_progress);
    bar.finish_and_clear();
    let summary = result.with_context(|| {
        format!("re-packing {} to {}", args.input.display(), args.output.display())
    })?;
    let lossy = if summary.lossy.is_empty() {
        String::new()
    } else {
        format!(", {} re-quantized with loss ({})", summary.lossy.len(), summary.lossy.join(", "))
    };
    println!(
        "wrote {} ({}: {} tensors re-packed exactly{lossy}, {} copied) in {:.1} s",
        args.output.display(),
        to.name(),
        summary.exact,
        summary.copied,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

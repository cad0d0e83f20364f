//! `bonsai convert DIR -o OUT.gguf [--type q1_0|q2_0|pq2_0|ptq1_0|f16|f32]`: a Hugging Face Qwen3
//! checkpoint folder to one self-contained GGUF (logic in `bonsai_model::convert`).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use bonsai_model::convert::{convert_checkpoint, ConvertProgress, OutputType};
use indicatif::{ProgressBar, ProgressStyle};

#[derive(clap::Args)]
pub struct ConvertArgs {
    /// Checkpoint folder: config.json, *.safetensors (or model.safetensors.index.json),
    /// tokenizer.json, tokenizer_config.json
    pub dir: PathBuf,
    /// Output GGUF file (written atomically)
    #[arg(short = 'o', long = "out")]
    pub out: PathBuf,
    /// Storage type of linear weights (embedding and LM head included); norms stay F32.
    /// q1_0 (id 41), q2_0 (mainline, 64 per scale, id 42), pq2_0 (id 142), ptq1_0 (id 143), f16, f32
    #[arg(long = "type", default_value = "q1_0", value_parser = parse_type)]
    pub ty: OutputType,
}

/// `--type` of `convert` and `quantize` (OutputType's names).
pub(crate) fn parse_type(s: &str) -> Result<OutputType, String> {
    s.parse()
}

const BAR_TEMPLATE: &str =
    "{spinner} [{elapsed_precise}] {bar:40} {bytes}/{total_bytes} ({eta}) {msg}";

pub fn run(args: ConvertArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let bar = ProgressBar::new(0);
    if let Ok(style) = ProgressStyle::with_template(BAR_TEMPLATE) {
        bar.set_style(style);
    }
    let mut on_progress = |p: &ConvertProgress<'_>| {
        bar.set_length(p.bytes_total);
        bar.set_position(p.bytes_done);
        bar.set_message(format!("{}/{} {}", p.tensors_done, p.n_tensors, p.gguf_name));
    };
    let result = convert_checkpoint(&args.dir, &args.out, args.ty, &mut on_progress);
    bar.finish_and_clear();
    let summary = result
        .with_context(|| format!("converting {} to {}", args.dir.display(), args.out.display()))?;
    println!(
        "wrote {} ({} tensors, linear weights {}, {:.1} MB from {:.1} MB of safetensors) in {:.1} s",
        args.out.display(),
        summary.n_tensors,
        args.ty.name(),
        summary.output_bytes as f64 / 1e6,
        summary.source_bytes as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

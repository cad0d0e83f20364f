//! `bonsai kernels image-compare --dump DIR`: runs every registered Bonsai-Image op on the GPU at
//! the real shapes of issue #6 and writes inputs, our outputs and timings for
//! `scripts/reference/image_torch.py DIR` (the PyTorch side of the comparison).

use std::path::PathBuf;

use anyhow::{bail, Context};
use bonsai_kernels::verify::image_torch::{cases, run, CompareOptions};

/// Default per-case limit on written files: 3 GB holds every case up to the DiT's largest GEMM.
const DEFAULT_MAX_CASE_BYTES: u64 = 3_000_000_000;

#[derive(clap::Args)]
pub struct ImageCompareArgs {
    /// Folder for manifest.json and the raw f32 files (created if missing)
    #[arg(long)]
    dump: Option<PathBuf>,
    /// Only these cases: case names or op names (group_norm, silu, ...), comma-separated
    #[arg(long, value_delimiter = ',')]
    cases: Vec<String>,
    /// Skip cases whose files would exceed this many bytes
    #[arg(long, default_value_t = DEFAULT_MAX_CASE_BYTES)]
    max_case_bytes: u64,
    /// Seed of the inputs (default: from the clock; recorded in the manifest)
    #[arg(long)]
    seed: Option<u64>,
    /// List the registered cases with their file sizes and exit (no GPU needed)
    #[arg(long)]
    list: bool,
}

pub fn run_command(args: ImageCompareArgs, config: &bonsai_kernels::Config) -> anyhow::Result<()> {
    let all = cases();
    for token in &args.cases {
        if !all.iter().any(|c| c.selected_by(std::slice::from_ref(token))) {
            bail!("image-compare: no case or op named {token:?} (see --list)");
        }
    }
    if args.list {
        let mut total = 0u64;
        for case in all.iter().filter(|c| c.selected_by(&args.cases)) {
            let skip = if case.file_bytes() > args.max_case_bytes { "  (skipped: over --max-case-bytes)" } else { "" };
            println!("{:<40} {:<20} {:>10.1} MB{skip}", case.name, case.op.key(), case.file_bytes() as f64 / 1e6);
            if skip.is_empty() {
                total += case.file_bytes();
            }
        }
        println!("total {:.2} GB", total as f64 / 1e9);
        return Ok(());
    }
    let Some(dump) = args.dump else { bail!("image-compare: --dump DIR is required (or --list)") };
    let opts = CompareOptions { dump: dump.clone(), cases: args.cases, max_case_bytes: args.max_case_bytes, seed: args.seed, config: config.clone() };
    let manifest = run(&opts).with_context(|| format!("image-compare into {}", dump.display()))?;
    let failed = manifest.cases.iter().filter(|c| c.error.is_some()).count();
    if failed > 0 {
        bail!("image-compare: {failed} of {} cases did not run (see the error lines above and manifest.json)", manifest.cases.len());
    }
    Ok(())
}

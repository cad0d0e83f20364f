//! `bonsai bench`: prefill (pp) and decode (tg) speed in the style of llama-bench, on a model
//! file or a random-weight model of an exact real geometry (`--synthetic`). Decode is compared
//! with the memory-bandwidth limit: measured bandwidth (a device copy on the GPU, the all-thread
//! streaming read on the CPU) / weight bytes read per token.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use bonsai_gguf::Qwen35Config;
use bonsai_model::synthetic::{
    bonsai2_27b_config, qwen35_tiny_config, random_host_weights, random_qwen35_host_weights, Geometry, WeightKind,
};
use bonsai_model::{Backend, Qwen3};

use crate::backend_choice::{self, AnyBackend};
use crate::bench_run::{measure, BenchPlan, BenchReport};

/// Random-weight models at real geometries (SPEC §2), plus a tiny one for tests.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyntheticModel {
    #[value(name = "bonsai-8b")]
    Bonsai8b,
    #[value(name = "bonsai-4b")]
    Bonsai4b,
    #[value(name = "bonsai-1.7b")]
    Bonsai1_7b,
    #[value(name = "ternary-8b")]
    Ternary8b,
    #[value(name = "ternary-1.7b")]
    Ternary1_7b,
    /// Ternary-8B stored as mainline Q2_0 (64-weight blocks) in a temporary GGUF file and run
    /// from it: the g64 read path, as a downloaded Q2_0 file takes it.
    #[value(name = "ternary-8b-g64")]
    Ternary8bG64,
    #[value(name = "tiny")]
    Tiny,
    /// The tiny geometry with Q2_0's whole code set, +2d included (no binary GEMV).
    #[value(name = "tiny-q2")]
    TinyQ2,
    /// Test geometries: GQA group G, head_dim D (`Geometry::gqa_test`).
    #[value(name = "g1-hd64")]
    G1Hd64,
    #[value(name = "g3-hd128")]
    G3Hd128,
    #[value(name = "g4-hd256")]
    G4Hd256,
    #[value(name = "g5-hd128")]
    G5Hd128,
    #[value(name = "g8-hd64")]
    G8Hd64,
    /// Bonsai 2 27B (qwen35 hybrid, Hadamard fold of block 1024), ternary weights.
    #[value(name = "bonsai2-27b")]
    Bonsai2_27b,
    /// A four-layer qwen35 with a Hadamard fold (fast runs of the hybrid path).
    #[value(name = "qwen35-tiny")]
    Qwen35Tiny,
}

impl SyntheticModel {
    /// The Qwen3 geometry; None for the qwen35 models (see [`Self::qwen35`]).
    pub fn geometry(self) -> Option<Geometry> {
        Some(match self {
            SyntheticModel::Bonsai8b | SyntheticModel::Ternary8b | SyntheticModel::Ternary8bG64 => Geometry::bonsai_8b(),
            SyntheticModel::Bonsai4b => Geometry::bonsai_4b(),
            SyntheticModel::Bonsai1_7b | SyntheticModel::Ternary1_7b => Geometry::bonsai_1_7b(),
            SyntheticModel::Tiny | SyntheticModel::TinyQ2 => Geometry::tiny(),
            SyntheticModel::G1Hd64 => Geometry::gqa_test(1, 64),
            SyntheticModel::G3Hd128 => Geometry::gqa_test(3, 128),
            SyntheticModel::G4Hd256 => Geometry::gqa_test(4, 256),
            SyntheticModel::G5Hd128 => Geometry::gqa_test(5, 128),
            SyntheticModel::G8Hd64 => Geometry::gqa_test(8, 64),
            SyntheticModel::Bonsai2_27b | SyntheticModel::Qwen35Tiny => return None,
        })
    }
    /// The qwen35 geometry (signs drawn from `seed`); None for the Qwen3 models.
    pub fn qwen35(self, seed: u64) -> Option<Qwen35Config> {
        match self {
            SyntheticModel::Bonsai2_27b => Some(bonsai2_27b_config(seed)),
            SyntheticModel::Qwen35Tiny => Some(qwen35_tiny_config(seed)),
            _ => None,
        }
    }
    pub fn kind(self) -> WeightKind {
        match self {
            SyntheticModel::Ternary8b | SyntheticModel::Ternary8bG64 | SyntheticModel::Ternary1_7b => WeightKind::Ternary,
            SyntheticModel::Bonsai2_27b | SyntheticModel::Qwen35Tiny => WeightKind::Ternary,
            SyntheticModel::TinyQ2 => WeightKind::TwoBit,
            _ => WeightKind::OneBit,
        }
    }
    /// Whether the bench runs this model from a GGUF file it writes first (its format's load
    /// path is part of what it measures).
    pub fn runs_from_file(self) -> bool {
        self == SyntheticModel::Ternary8bG64
    }
    pub fn name(self) -> &'static str {
        match self {
            SyntheticModel::Bonsai8b => "bonsai-8b",
            SyntheticModel::Bonsai4b => "bonsai-4b",
            SyntheticModel::Bonsai1_7b => "bonsai-1.7b",
            SyntheticModel::Ternary8b => "ternary-8b",
            SyntheticModel::Ternary1_7b => "ternary-1.7b",
            SyntheticModel::Ternary8bG64 => "ternary-8b-g64",
            SyntheticModel::Tiny => "tiny",
            SyntheticModel::TinyQ2 => "tiny-q2",
            SyntheticModel::G1Hd64 => "g1-hd64",
            SyntheticModel::G3Hd128 => "g3-hd128",
            SyntheticModel::G4Hd256 => "g4-hd256",
            SyntheticModel::G5Hd128 => "g5-hd128",
            SyntheticModel::G8Hd64 => "g8-hd64",
            SyntheticModel::Bonsai2_27b => "bonsai2-27b",
            SyntheticModel::Qwen35Tiny => "qwen35-tiny",
        }
    }
}

/// Seed of the random weights and prompts (fixed: runs compare like with like).
pub const BENCH_SEED: u64 = 0x00b0_a5a1;

/// The model a command runs: a GGUF file, one fetched from the hub, or random weights at a real
/// model's geometry.
#[derive(clap::Args, Debug)]
pub struct ModelSource {
    /// GGUF model file
    #[arg(
        short = 'm',
        long = "model",
        conflicts_with_all = ["synthetic", "hf_repo"],
        required_unless_present_any = ["synthetic", "hf_repo"]
    )]
    pub model: Option<PathBuf>,
    #[command(flatten)]
    pub hub: crate::hub::HubArgs,
    /// Random weights at a real model's exact geometry instead of a file (check: random prompt ids)
    #[arg(long, value_enum, conflicts_with = "hf_repo")]
    pub synthetic: Option<SyntheticModel>,
}

impl ModelSource {
    /// The file to load: fetched from the hub, or `--model`; None for `--synthetic`.
    pub fn path(&self) -> anyhow::Result<Option<PathBuf>> {
        Ok(self.hub.fetch()?.or_else(|| self.model.clone()))
    }
}

#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub command: Option<BenchCommand>,
    #[command(flatten)]
    pub source: ModelSource,
    /// Prompt tokens per prefill test (one forward call; 0 skips pp)
    #[arg(short = 'p', long = "n-prompt", default_value_t = 512)]
    pub n_prompt: usize,
    /// Tokens generated per decode test (0 skips tg)
    #[arg(short = 'n', long = "n-gen", default_value_t = 128)]
    pub n_gen: usize,
    /// Repetitions of each test (median and min-max reported)
    #[arg(short = 'r', long = "repetitions", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    pub repetitions: u64,
    /// Fill the KV cache to these depths before measuring decode (comma-separated)
    #[arg(long = "ctx-depth", value_delimiter = ',', default_value = "0")]
    pub ctx_depth: Vec<usize>,
    /// Also decode these many sequences together (comma-separated), one token each per step:
    /// aggregate tok/s of the server's decode step (`tg128 x16`)
    #[arg(long = "batch", value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub batch: Vec<u32>,
    /// Context size (KV cache length); default just large enough for the tests
    #[arg(long)]
    pub ctx: Option<usize>,
    /// Run on the CPU even when a GPU is present
    #[arg(long)]
    pub cpu: bool,
    /// Print one JSON object instead of the table
    #[arg(long)]
    pub json: bool,
    /// Also print (on stderr) the kernel configuration and the plans that run: each step's
    /// launches, fused groups and kernel choices, and the decode graphs
    #[arg(short = 'v', long)]
    pub verbose: bool,
    /// Write the --synthetic model to this GGUF file and exit, for other engines to load: Q1_0,
    /// or ternary as upstream Q2_0 (64-weight groups), with a byte tokenizer padded to the
    /// vocabulary
    #[arg(long, value_name = "FILE", requires = "synthetic")]
    pub write_gguf: Option<PathBuf>,
}

impl BenchArgs {
    /// What to run; errors when a test does not fit the requested context.
    pub fn plan(&self) -> anyhow::Result<BenchPlan> {
        let max_depth = self.ctx_depth.iter().copied().max().unwrap_or(0);
        // Decoding n tokens at depth d writes positions d .. d + n (the first prediction comes
        // from the token at d), so the cache needs d + n slots; prefill needs p.
        let need = self.n_prompt.max(if self.n_gen > 0 { max_depth + self.n_gen } else { 0 }).max(1);
        let ctx = match self.ctx {
            Some(ctx) if ctx < need => anyhow::bail!(
                "bench needs a context of {need} tokens (prompt {}, depth {max_depth} + {} generated) but --ctx is {ctx}",
                self.n_prompt,
                self.n_gen
            ),
            Some(ctx) => ctx,
            None => need,
        };
        if self.n_prompt == 0 && self.n_gen == 0 {
            anyhow::bail!("nothing to measure: -p 0 and -n 0");
        }
        Ok(BenchPlan {
            verbose: self.verbose,
            n_prompt: self.n_prompt,
            n_gen: self.n_gen,
            repetitions: self.repetitions as usize,
            depths: self.ctx_depth.clone(),
            batches: self.batch.iter().map(|&b| b as usize).collect(),
            ctx,
            seed: BENCH_SEED,
        })
    }
}

/// Benchmarks other than the model's own prefill and decode.
#[derive(clap::Subcommand, Debug)]
pub enum BenchCommand {
    /// Load-test an OpenAI-compatible server: N concurrent streams, aggregate tok/s, TTFT and
    /// inter-token latency
    Serve(crate::bench_serve::BenchServeArgs),
}

pub fn run(args: BenchArgs, config: &bonsai_kernels::Config) -> anyhow::Result<()> {
    if let Some(BenchCommand::Serve(serve)) = args.command {
        return crate::bench_serve::run(serve);
    }
    if let (Some(path), Some(synthetic)) = (&args.write_gguf, args.source.synthetic) {
        let bytes = crate::synthetic_file::write(synthetic, path)?;
        eprintln!("wrote {} ({:.1} MB, random {} weights)", path.display(), bytes as f64 / 1e6, synthetic.name());
        return Ok(());
    }
    let plan = args.plan()?;
    if args.verbose {
        let changes = config.describe_changes();
        eprintln!("kernel configuration: {}", if changes.is_empty() { "defaults" } else { changes.as_str() });
    }
    let model = args.source.path()?;
    let backend = backend_choice::choose(args.cpu, config)?;
    let report = match (&model, args.source.synthetic) {
        (Some(path), _) => {
            let name = path.display().to_string();
            let loaded = backend_choice::load(path, backend, Some(plan.ctx))?;
            crate::on_any_backend!(loaded, |l| bench_model(&l.model, &name, l.decode_bytes_per_token, &plan))?
        }
        (None, Some(synthetic)) if synthetic.runs_from_file() => bench_through_file(backend, synthetic, &plan)?,
        (None, Some(synthetic)) => match backend {
            AnyBackend::Cpu(b) => bench_synthetic(b, synthetic, &plan)?,
            AnyBackend::Cuda(b) => bench_synthetic(b, synthetic, &plan)?,
        },
        (None, None) => anyhow::bail!("give a model file (-m), a repository (-hf) or --synthetic"),
    };
    // Written with `?`: a closed stdout is a BrokenPipe error, which main treats as success.
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", report.to_json())?;
    } else {
        write!(out, "{}", report.to_table())?;
    }
    Ok(())
}

fn bench_synthetic<B: Backend>(backend: B, synthetic: SyntheticModel, plan: &BenchPlan) -> anyhow::Result<BenchReport> {
    if let Some(config) = synthetic.qwen35(plan.seed) {
        let host = random_qwen35_host_weights(&config, plan.seed)
            .with_context(|| format!("building the random {} model", synthetic.name()))?;
        let bytes_per_token = host.decode_bytes_per_token();
        let model = Qwen3::new_qwen35(backend, config, host, plan.ctx)
            .with_context(|| format!("loading the random {} model", synthetic.name()))?;
        return bench_model(&model, &format!("{} (synthetic)", synthetic.name()), bytes_per_token, plan);
    }
    let geometry = synthetic.geometry().context("a Qwen3 synthetic model")?;
    let host = random_host_weights(&geometry, synthetic.kind(), plan.seed)
        .with_context(|| format!("building the random {} model", synthetic.name()))?;
    let bytes_per_token = host.decode_bytes_per_token();
    let model = Qwen3::new(backend, geometry.config(), host, plan.ctx)
        .with_context(|| format!("loading the random {} model", synthetic.name()))?;
    bench_model(&model, &format!("{} (synthetic)", synthetic.name()), bytes_per_token, plan)
}

/// Writes the synthetic model to a temporary GGUF file (removed after), loads it as any file.
fn bench_through_file(backend: AnyBackend, synthetic: SyntheticModel, plan: &BenchPlan) -> anyhow::Result<BenchReport> {
    let path = std::env::temp_dir().join(format!("bonsai-bench-{}-{}.gguf", synthetic.name(), std::process::id()));
    let bytes = crate::synthetic_file::write(synthetic, &path)?;
    eprintln!("wrote {} ({:.1} MB); loading it", path.display(), bytes as f64 / 1e6);
    let name = format!("{} (synthetic, from {})", synthetic.name(), path.display());
    let run = backend_choice::load(&path, backend, Some(plan.ctx))
        .and_then(|loaded| crate::on_any_backend!(loaded, |l| bench_model(&l.model, &name, l.decode_bytes_per_token, plan)));
    let _ = std::fs::remove_file(&path);
    run
}

fn bench_model<B: Backend>(model: &Qwen3<B>, name: &str, bytes_per_token: usize, plan: &BenchPlan) -> anyhow::Result<BenchReport> {
    eprintln!("backend: {}", model.backend().describe());
    if plan.verbose {
        print_plans(model, plan).context("describing the plans")?;
    }
    measure(model, name, bytes_per_token, plan).with_context(|| format!("benchmarking {name}"))
}

/// The plans `measure` runs, one prefill chunk and one greedy decode step, each run once first
/// so that its description names the kernels it launched.
fn print_plans<B: Backend>(model: &Qwen3<B>, plan: &BenchPlan) -> anyhow::Result<()> {
    let mut state = model.new_state(plan.n_prompt.max(1), false)?;
    let prompt = vec![0u32; plan.n_prompt.max(1)];
    model.forward_chunk(&mut state, &prompt, bonsai_model::LogitRows::Last)?;
    if plan.n_prompt > 0 {
        eprint!("prefill (pp{}) {}", plan.n_prompt, model.describe_plan(&mut state, plan.n_prompt, None)?);
    }
    if plan.n_gen > 0 {
        let greedy = bonsai_model::DevicePick::Greedy;
        model.rewind(&mut state, 0)?;
        model.decode_step(&mut state, greedy)?;
        eprint!("decode step (greedy) {}", model.describe_plan(&mut state, 1, Some(greedy))?);
        for &sequences in plan.batches.iter().filter(|&&b| b > 1) {
            let mut batch = model.new_batch_state(sequences, sequences, false)?;
            let step: Vec<(usize, &[u32])> = (0..sequences).map(|s| (s, &prompt[..1])).collect();
            model.forward_batch_pick(&mut batch, &step, greedy)?;
            eprint!("decode step of {sequences} sequences (greedy) {}", model.describe_batch_plan(&mut batch, greedy)?);
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "bench_tests.rs"]
mod tests;

//! `bonsai kernels verify [--bench]`: every CUDA op against its f64 CPU reference on fresh seeded
//! random inputs, at the shapes of every supported model plus odd edge shapes; optionally the
//! speed of each kernel against the copy bandwidth measured in the same run.
//!
//! Each check poisons the CUDA output with NaN before the launch (an unwritten element fails),
//! runs the reference on the same inputs (parallel over tokens with rayon), and compares every
//! element against a bound derived from the arithmetic of the kernel (the derivation sits next to
//! each check). One line per op and shape: `op  shape  max_err  bound  PASS/FAIL`, where max_err
//! is the largest |gpu - ref| and bound the tolerance at that element; the check fails if any
//! element exceeds its own bound.

mod attention;
mod attention_mma;
mod attention_planes;
mod bench;
mod decode_seqs;
mod delta_seqs;
mod gpu;
mod image_attention;
mod image_elementwise;
mod image_group_norm;
mod image_gemm;
pub mod image_torch;
mod matmul;
mod matmul_kernels;
mod norm_matmul;
mod planes_out;
mod qkv_rope;
mod qwen35;
mod rotate_f16;
mod matmul_large;
mod matmul_code3;
mod matmul_split;
mod ptx_model;
mod ptx_wgmma;
mod ptx_wrappers;
pub(crate) mod rng;
mod shapes;
mod small;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use cudarc::driver::CudaStream;

use crate::cuda::{GpuContext, KernelError, KernelLibrary, LoadOptions};
use crate::launch::LaunchError;
use crate::ops::OpError;

pub use bench::BenchRow;
pub use shapes::ShapeSet;

/// What to run.
#[derive(Clone, Debug)]
pub struct VerifyOptions {
    /// Also time every kernel (`--bench`).
    pub bench: bool,
    /// Skip the correctness checks (time only; `--bench-only`, so a timing run does not pay for
    /// the CPU references again).
    pub skip_checks: bool,
    /// All model shapes, or only the small/odd ones (fast smoke test).
    pub shapes: ShapeSet,
    /// Seed of the random inputs; None draws one from the clock (printed either way).
    pub seed: Option<u64>,
    /// The run-time configuration (device, embedded kernels, launch policy).
    pub config: crate::Config,
    /// Run only these check groups ([`CHECK_GROUPS`]) and bench groups (`bench::BENCH_GROUPS`);
    /// empty: all of them.
    pub only: Vec<String>,
}

/// The check groups, in the order they run (`verify --only` takes a comma-separated subset).
pub const CHECK_GROUPS: &[&str] = &[
    "ptx_wrappers",
    "small",
    "attention",
    "attention_mma",
    "attention_planes",
    "decode_seqs",
    "planes_out",
    "qkv_rope",
    "qwen35",
    "image_elementwise",
    "matmul",
    "norm_matmul",
    "image_attention",
    "image_gemm",
];

impl Default for VerifyOptions {
    fn default() -> Self {
        Self { bench: false, skip_checks: false, shapes: ShapeSet::All, seed: None, config: crate::Config::default(), only: Vec::new() }
    }
}

/// One op at one shape.
#[derive(Clone, Debug)]
pub struct CheckRow {
    pub op: String,
    pub shape: String,
    /// Largest |gpu - reference| over all elements.
    pub max_err: f64,
    /// The bound at the element with the largest error-to-bound ratio.
    pub bound: f64,
    pub pass: bool,
}

/// Everything a verify run measured.
#[derive(Clone, Debug)]
pub struct VerifyReport {
    pub seed: u64,
    pub device: String,
    pub checks: Vec<CheckRow>,
    /// Device-to-device copy bandwidth (read + write bytes per second), when benchmarking.
    pub copy_bandwidth_bytes_per_s: Option<f64>,
    pub bench: Vec<BenchRow>,
}

impl VerifyReport {
    pub fn all_passed(&self) -> bool {
        self.checks.iter().all(|c| c.pass)
    }
    pub fn failures(&self) -> usize {
        self.checks.iter().filter(|c| !c.pass).count()
    }
}

/// Why verify could not run (a failed comparison is not an error: it is a FAIL row).
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error("CUDA driver call failed: {0}")]
    Driver(#[from] cudarc::driver::DriverError),
    #[error(transparent)]
    Library(#[from] KernelError),
    #[error(transparent)]
    Launch(#[from] LaunchError),
    #[error("CPU reference failed: {0}")]
    Reference(#[from] OpError),
    #[error(transparent)]
    Dump(#[from] image_torch::ManifestError),
    #[error("verify --only: no group {0:?} (checks: {checks}; bench: {bench})", checks = CHECK_GROUPS.join(", "), bench = bench::BENCH_GROUPS.join(", "))]
    UnknownGroup(String),
}

/// One verify group's checks, run on the context.
type CheckGroup<'a> = dyn Fn(&mut Ctx) -> Result<(), VerifyError> + 'a;

/// Shared state of one run: device, stream, library, seed source, collected rows.
pub(crate) struct Ctx {
    pub lib: KernelLibrary,
    pub stream: Arc<CudaStream>,
    pub rng: rng::SplitMix64,
    pub checks: Vec<CheckRow>,
}

impl Ctx {
    /// The library and stream every launch of the run uses.
    pub fn gpu(&self) -> crate::launch::Gpu<'_> {
        crate::launch::Gpu::new(&self.lib, &self.stream)
    }

    /// Records and prints one comparison row.
    pub fn record(&mut self, op: &str, shape: &str, cmp: Comparison) {
        let row = CheckRow { op: op.into(), shape: shape.into(), max_err: cmp.max_err, bound: cmp.bound, pass: cmp.pass() };
        println!(
            "{:<22} {:<44} {:>11.3e} {:>11.3e}  {}{}",
            row.op,
            row.shape,
            row.max_err,
            row.bound,
            if row.pass { "PASS" } else { "FAIL" },
            if cmp.bad_elements > 0 { format!(" ({} elements over bound, first at {})", cmp.bad_elements, cmp.first_bad) } else { String::new() }
        );
        self.checks.push(row);
    }
}

/// Element-wise comparison of a CUDA result against a reference with a per-element bound.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Comparison {
    pub max_err: f64,
    pub bound: f64,
    worst_ratio: f64,
    pub bad_elements: usize,
    pub first_bad: usize,
}

impl Comparison {
    /// `bound(i)` is the tolerance of element i. NaN or inf on either side fails (unless both are
    /// the same infinity), so a poisoned, unwritten element always fails.
    pub fn of(gpu: &[f32], reference: &[f32], bound: impl Fn(usize) -> f64) -> Self {
        let mut c = Comparison { first_bad: usize::MAX, ..Default::default() };
        if gpu.len() != reference.len() {
            c.bad_elements = gpu.len().max(reference.len());
            c.max_err = f64::INFINITY;
            c.first_bad = 0;
            return c;
        }
        for (i, (&g, &r)) in gpu.iter().zip(reference).enumerate() {
            let b = bound(i);
            let err = if g == r { 0.0 } else { (g as f64 - r as f64).abs() };
            let ok = err <= b && !err.is_nan();
            let err = if err.is_nan() { f64::INFINITY } else { err };
            if err > c.max_err {
                c.max_err = err;
            }
            let ratio = if b > 0.0 { err / b } else if err > 0.0 { f64::INFINITY } else { 0.0 };
            if ratio >= c.worst_ratio {
                c.worst_ratio = ratio;
                c.bound = b;
            }
            if !ok {
                if c.bad_elements == 0 {
                    c.first_bad = i;
                }
                c.bad_elements += 1;
            }
        }
        c
    }
    pub fn pass(&self) -> bool {
        self.bad_elements == 0
    }
    /// A yes / no property as a row: passes when `holds` (max_err 1 otherwise, against bound 0).
    pub fn holds(holds: bool) -> Self {
        let bad = usize::from(!holds);
        Comparison { max_err: bad as f64, bad_elements: bad, first_bad: if holds { usize::MAX } else { 0 }, ..Default::default() }
    }
}

/// f32 unit roundoff (2^-24): every tolerance below is a multiple of it.
pub(crate) const F32_UNIT_ROUNDOFF: f64 = 1.0 / 16_777_216.0;

/// Runs every check (and the benchmarks when asked). Prints as it goes.
pub fn run(opts: &VerifyOptions) -> Result<VerifyReport, VerifyError> {
    let known = |g: &String| CHECK_GROUPS.contains(&g.as_str()) || bench::BENCH_GROUPS.contains(&g.as_str());
    if let Some(unknown) = opts.only.iter().find(|g| !known(g)) {
        return Err(VerifyError::UnknownGroup(unknown.clone()));
    }
    let gpu = GpuContext::on_device(opts.config.device)?;
    let device = gpu.info().name.clone();
    // The same load path as every GPU command (embedded SASS, cache, nvcc, NVRTC).
    let lib = gpu.load_library(&opts.config, &LoadOptions::from_config(&opts.config))?;
    let stream = gpu.stream().clone();
    println!("verify: kernel library served by {:?} for sm_{}", lib.report().tier, lib.report().device_arch);
    let seed = opts.seed.unwrap_or_else(|| {
        SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0x5eed)
    });
    println!("verify: device {device}, seed {seed} (rerun with --seed {seed})");
    println!("{:<22} {:<44} {:>11} {:>11}  result", "op", "shape", "max_err", "bound");
    let mut ctx = Ctx { lib, stream, rng: rng::SplitMix64::new(seed), checks: Vec::new() };
    let wanted = |group: &str| opts.only.is_empty() || opts.only.iter().any(|g| g == group);
    if !opts.skip_checks {
        let shapes = opts.shapes;
        let groups: [(&str, &CheckGroup<'_>); 14] = [
            ("ptx_wrappers", &|c| ptx_wrappers::run(c)),
            ("small", &|c| small::run_all(c, shapes)),
            ("attention", &|c| attention::run_all(c, shapes)),
            ("attention_mma", &|c| attention_mma::run_all(c, shapes)),
            ("attention_planes", &|c| attention_planes::run_all(c, shapes)),
            ("decode_seqs", &|c| decode_seqs::run_all(c, shapes)),
            ("planes_out", &|c| planes_out::run_all(c, shapes)),
            ("qkv_rope", &|c| qkv_rope::run_all(c, shapes)),
            ("qwen35", &|c| qwen35::run_all(c, shapes)),
            ("image_elementwise", &|c| image_elementwise::run_all(c, shapes)),
            ("matmul", &|c| matmul::run_all(c, shapes)),
            ("norm_matmul", &|c| norm_matmul::run_all(c, shapes)),
            ("image_attention", &|c| image_attention::run_all(c, shapes)),
            ("image_gemm", &|c| image_gemm::run_all(c, shapes)),
        ];
        debug_assert!(groups.iter().map(|g| g.0).eq(CHECK_GROUPS.iter().copied()));
        for (name, run_group) in groups {
            if wanted(name) {
                run_group(&mut ctx)?;
            }
        }
    }
    let (copy_bw, bench_rows) = if opts.bench { bench::run_all(&mut ctx, &wanted)? } else { (None, Vec::new()) };
    let report = VerifyReport { seed, device, checks: ctx.checks, copy_bandwidth_bytes_per_s: copy_bw, bench: bench_rows };
    println!("verify: {} checks, {} failed (seed {seed})", report.checks.len(), report.failures());
    Ok(report)
}

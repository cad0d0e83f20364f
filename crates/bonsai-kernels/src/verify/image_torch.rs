//! `bonsai kernels image-compare --dump DIR`: the Rust half of the PyTorch comparison of every
//! Bonsai-Image op (issue #6). For each registered [`ImageCase`] at the real DiT / VAE shapes it
//! draws seeded inputs, runs our CUDA kernel, times it, and writes the inputs and our output as raw
//! little-endian f32 files plus one `manifest.json`. `scripts/reference/image_torch.py DIR` then
//! computes the f64 truth and torch's own f32 (and bf16) results on the GPU machine and prints
//! one PASS/FAIL row per case against the targets.
//!
//! Adding an op: write one `fn` in `image_torch/cases.rs` returning its cases (the shape lists
//! there are the issue's) and add it to `cases()`. A case names the torch op that computes the
//! same thing ([`TorchOp`], whose manifest form `image_torch.py` reads), its inputs (shape and how
//! to fill them), its output shape, its work (FLOPs and bytes) and targets, and our kernel: most
//! ops take f32 buffers in input order ([`OurKernel::F32`]); an op with another device layout
//! (quantized weights) prepares its own buffers ([`OurKernel::Custom`]).
//!
//! Timing (shared with `verify --bench`): the median of 50 back-to-back batches after a warm-up,
//! each batch cycling over [`rotation_copies`] copies of the inputs and outputs, enough to exceed
//! 3x the 60 MB L2 so memory-bound ops are timed from HBM.

mod cases;
mod launchers;
mod manifest;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use cudarc::driver::{CudaSlice, CudaStream};

use super::bench::{copy_bandwidth, time_batches, ROTATION_BYTES};
use super::gpu::{download, poisoned, upload};
use super::{rng::SplitMix64, Ctx, VerifyError};
use crate::cuda::{GpuContext, LoadOptions};
use crate::launch::{Gpu, LaunchError};
use crate::weights::QMatrix;

pub use cases::{
    cases, conv3x3_cases, gemm_f32_cases, gemm_ternary_cases, joint_attention_cases, ATTENTION_SHAPES,
    DIT_GEMM_SHAPES, TERNARY_GATE_SHAPE, VAE_CONV_SHAPES, VAE_IMAGE_SHAPES,
};
pub use manifest::{CaseRecord, Manifest, ManifestError, MANIFEST_FILE, MANIFEST_FORMAT};

/// The PyTorch computation a case is compared with (its manifest `op` and `params`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TorchOp {
    /// `F.group_norm(x[None], groups, gamma, beta, eps)`; inputs x `[C,H,W]`, gamma, beta `[C]`.
    GroupNorm { groups: usize, eps: f32 },
    /// `F.silu(F.group_norm(...))`: GroupNorm fused with SiLU, same inputs as `GroupNorm`.
    GroupNormSilu { groups: usize, eps: f32 },
    /// `F.silu(x)`; input x of any shape.
    Silu,
    /// `F.interpolate(x[None], scale_factor=2, mode="nearest")`; x `[C,H,W]` -> `[C,2H,2W]`.
    UpsampleNearest2x,
    /// `F.unfold(x[None], 3, padding=1)`; x `[C,H,W]` -> `[C·9, H·W]`.
    Im2col,
    /// `F.conv2d(x[None], weight, bias, padding=1)`; x `[Cin,H,W]`, weight `[Cout,Cin,3,3]`,
    /// bias `[Cout]` -> `[Cout,H,W]`.
    Conv3x3,
    /// `a @ w.T`; a `[M,K]`, w `[N,K]` -> `[M,N]` (torch f32 = cuBLAS SGEMM with TF32 off).
    GemmF32,
    /// `a @ w.T` with w the dequantized ternary weights (the file holds them dense in f32).
    GemmTernary,
    /// `F.scaled_dot_product_attention(q, k, v)` (scale 1/sqrt(hd), no mask); q, k, v
    /// `[H,seq,hd]` -> out token-major `[seq, H·hd]`.
    JointAttention,
}

impl TorchOp {
    /// The name `image_torch.py` dispatches on.
    pub fn key(&self) -> &'static str {
        match self {
            TorchOp::GroupNorm { .. } => "group_norm",
            TorchOp::GroupNormSilu { .. } => "group_norm_silu",
            TorchOp::Silu => "silu",
            TorchOp::UpsampleNearest2x => "upsample_nearest2x",
            TorchOp::Im2col => "im2col",
            TorchOp::Conv3x3 => "conv3x3",
            TorchOp::GemmF32 => "gemm_f32",
            TorchOp::GemmTernary => "gemm_ternary",
            TorchOp::JointAttention => "joint_attention",
        }
    }
}

/// How a case's input is drawn (seeded).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fill {
    /// Uniform in [lo, hi).
    Uniform { lo: f32, hi: f32 },
    /// Uniform in [-scale, scale) with one value in 64 scaled 16x (activation outliers).
    Activations { scale: f32 },
    /// A random ternary matrix `[N, K]` in the 2-bit format (codes -> (c - 1)·d, group scales d
    /// like real files); the file holds its exact dense f32 values, the kernel gets the blocks.
    TernaryWeights,
}

/// One input of a case.
#[derive(Clone, Debug, PartialEq)]
pub struct InputSpec {
    pub name: &'static str,
    pub shape: Vec<usize>,
    pub fill: Fill,
}

/// An input as drawn on the host: dense f32 values (what the file holds), plus the quantized form
/// for [`Fill::TernaryWeights`].
pub struct HostInput {
    pub data: Vec<f32>,
    pub quantized: Option<QMatrix>,
}

/// The speed criterion of a case (the "Done when").
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SpeedTarget {
    /// Ours moves `bytes` at >= this fraction of the measured copy bandwidth.
    FractionOfCopy(f64),
    /// torch f32 time / ours >= this (1.5: "1.5x SGEMM"; 1.0: "conv >= cuDNN fp32").
    VsTorchF32(f64),
    /// torch bf16 time / ours >= this (0.5: "attention >= 50% of SDPA bf16").
    VsTorchBf16(f64),
    /// Ours runs `flops` at >= this many TFLOP/s.
    TflopsAtLeast(f64),
    /// Measured and reported, no target (shapes the issue does not gate).
    Report,
}

/// The accuracy criterion: relative Frobenius error of ours against the f64 truth.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum AccuracyTarget {
    /// err(ours) <= this (a derived bound, or the 1e-3 for the ternary GEMM).
    RelErrAtMost(f64),
    /// err(ours) <= this x err(torch f32) ("within 2x of cuBLAS / cuDNN's own error").
    VsTorchF32(f64),
    /// err(ours) <= this x err(torch bf16) (attention that may run in bf16, its error stated).
    VsTorchBf16(f64),
}

/// One launch of our kernel; `inputs` are the case's f32 inputs on the device, in order.
pub type F32Launch =
    fn(gpu: Gpu<'_>, case: &ImageCase, inputs: &[CudaSlice<f32>], out: &mut CudaSlice<f32>) -> Result<(), LaunchError>;

/// Our kernel ready to launch on one rotated copy of the inputs (an [`OurKernel::Custom`] case
/// holds whatever device buffers it uploaded).
pub trait PreparedKernel {
    fn launch(&mut self, gpu: Gpu<'_>, out: &mut CudaSlice<f32>) -> Result<(), LaunchError>;
}

/// Uploads one copy of the inputs in the layout the kernel wants.
pub type PrepareFn =
    fn(stream: &Arc<CudaStream>, case: &ImageCase, inputs: &[HostInput]) -> Result<Box<dyn PreparedKernel>, VerifyError>;

/// How our side runs.
#[derive(Clone, Copy)]
pub enum OurKernel {
    /// Every input uploaded as f32 in order, then one call.
    F32(F32Launch),
    /// The case uploads its own buffers (e.g. quantized weights from [`HostInput::quantized`]).
    Custom(PrepareFn),
}

/// One comparison at one shape.
#[derive(Clone)]
pub struct ImageCase {
    /// Unique, file-name safe: `<op>_<shape words>`.
    pub name: String,
    pub op: TorchOp,
    pub inputs: Vec<InputSpec>,
    pub output_shape: Vec<usize>,
    /// FLOPs of one call (0 for pure data movement).
    pub flops: f64,
    /// Bytes one call must read and write at least (its speed-of-light traffic).
    pub bytes: f64,
    pub speed: SpeedTarget,
    pub accuracy: AccuracyTarget,
    pub kernel: OurKernel,
}

impl ImageCase {
    pub fn output_len(&self) -> usize {
        self.output_shape.iter().product()
    }
    /// Bytes of the files this case writes (every input and the output, f32).
    pub fn file_bytes(&self) -> u64 {
        let inputs: usize = self.inputs.iter().map(|i| i.shape.iter().product::<usize>()).sum();
        4 * (inputs + self.output_len()) as u64
    }
    /// Whether `--cases` selects it: a token equal to its name or to its op key.
    pub fn selected_by(&self, tokens: &[String]) -> bool {
        tokens.is_empty() || tokens.iter().any(|t| t == &self.name || t == self.op.key())
    }
}

/// What `image-compare` runs.
#[derive(Clone, Debug)]
pub struct CompareOptions {
    pub dump: PathBuf,
    /// Case names or op keys to run; empty: all.
    pub cases: Vec<String>,
    /// Skip any case whose files would exceed this many bytes.
    pub max_case_bytes: u64,
    /// Seed of the inputs; None: from the clock (recorded in the manifest either way).
    pub seed: Option<u64>,
    /// The run-time configuration (device, embedded kernels, launch policy).
    pub config: crate::Config,
}

/// Copies of a case's buffers to cycle through so a batch of launches exceeds [`ROTATION_BYTES`].
pub fn rotation_copies(bytes_per_copy: u64) -> usize {
    (ROTATION_BYTES as u64).div_ceil(bytes_per_copy.max(1)) as usize + 1
}

/// Draws every input of `case`, in order, from `rng`.
pub(crate) fn draw_inputs(rng: &mut SplitMix64, case: &ImageCase) -> Vec<HostInput> {
    case.inputs
        .iter()
        .map(|spec| {
            let len: usize = spec.shape.iter().product();
            match spec.fill {
                Fill::Uniform { lo, hi } => HostInput { data: (0..len).map(|_| rng.range(lo, hi)).collect(), quantized: None },
                Fill::Activations { scale } => HostInput { data: rng.activations(len, scale), quantized: None },
                Fill::TernaryWeights => {
                    let (n, k) = (spec.shape[0], spec.shape[1]);
                    let q = rng.q2_matrix(n, k);
                    let data = (0..n).flat_map(|r| (0..k).map(move |c| (r, c))).map(|(r, c)| q.weight(r, c)).collect();
                    HostInput { data, quantized: Some(QMatrix::Q2(q)) }
                }
            }
        })
        .collect()
}

/// The f32 kernels' prepared form: the inputs on the device plus the launch function.
struct F32Prepared {
    case: ImageCase,
    inputs: Vec<CudaSlice<f32>>,
    launch: F32Launch,
}

impl PreparedKernel for F32Prepared {
    fn launch(&mut self, gpu: Gpu<'_>, out: &mut CudaSlice<f32>) -> Result<(), LaunchError> {
        (self.launch)(gpu, &self.case, &self.inputs, out)
    }
}

fn prepare(stream: &Arc<CudaStream>, case: &ImageCase, host: &[HostInput]) -> Result<Box<dyn PreparedKernel>, VerifyError> {
    match case.kernel {
        OurKernel::F32(launch) => {
            let inputs = host.iter().map(|h| upload(stream, &h.data)).collect::<Result<Vec<_>, _>>()?;
            Ok(Box::new(F32Prepared { case: case.clone(), inputs, launch }))
        }
        OurKernel::Custom(prepare) => prepare(stream, case, host),
    }
}

/// Runs one case on the device: returns our output (from a launch into a NaN-poisoned buffer,
/// so an unwritten element shows) and the median seconds per call.
fn run_case(ctx: &Ctx, case: &ImageCase, host: &[HostInput]) -> Result<(Vec<f32>, f64, usize), VerifyError> {
    let copies = rotation_copies(case.file_bytes());
    let mut kernels = (0..copies).map(|_| prepare(&ctx.stream, case, host)).collect::<Result<Vec<_>, _>>()?;
    let mut outs = (0..copies).map(|_| poisoned(&ctx.stream, case.output_len())).collect::<Result<Vec<_>, _>>()?;
    kernels[0].launch(ctx.gpu(), &mut outs[0])?;
    let ours = download(&ctx.stream, &outs[0])?;
    let secs = time_batches(ctx, copies, |i| Ok(kernels[i].launch(ctx.gpu(), &mut outs[i])?))?;
    Ok((ours, secs, copies))
}

/// Runs every selected case and writes `DIR/manifest.json` plus the data files. A case that fails
/// to launch is recorded with its error (the Python side reports it as FAIL) and the run goes on.
pub fn run(opts: &CompareOptions) -> Result<Manifest, VerifyError> {
    let gpu = GpuContext::on_device(opts.config.device)?;
    let lib = gpu.load_library(&opts.config, &LoadOptions::from_config(&opts.config))?;
    let seed = opts.seed.unwrap_or_else(|| {
        SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0x5eed)
    });
    let mut ctx = Ctx { lib, stream: gpu.stream().clone(), rng: SplitMix64::new(seed), checks: Vec::new() };
    let copy_bw = copy_bandwidth(&ctx)?;
    let mut manifest = Manifest::new(seed, gpu.info().name.clone(), copy_bw);
    println!("image-compare: device {}, seed {seed}, copy bandwidth {:.1} GB/s", manifest.device, copy_bw / 1e9);
    std::fs::create_dir_all(&opts.dump).map_err(|e| manifest::io_error(&opts.dump, e))?;
    for case in cases().iter().filter(|c| c.selected_by(&opts.cases)) {
        if case.file_bytes() > opts.max_case_bytes {
            println!("skip  {:<40} {:>10.1} MB of files > --max-case-bytes", case.name, case.file_bytes() as f64 / 1e6);
            continue;
        }
        // Each case draws from its own stream (seed, name) so --cases subsets reproduce the same inputs.
        ctx.rng = SplitMix64::new(seed ^ manifest::name_hash(&case.name));
        let host = draw_inputs(&mut ctx.rng, case);
        let record = match run_case(&ctx, case, &host) {
            Ok((ours, secs, copies)) => manifest::write_case(&opts.dump, case, &host, Some(&ours), Some(secs), copies, None)?,
            Err(e) => manifest::write_case(&opts.dump, case, &host, None, None, 0, Some(e.to_string()))?,
        };
        println!("case  {:<40} {:>10.1} us  {:>10.1} MB  {}", record.name, record.ours_median_s.unwrap_or(f64::NAN) * 1e6,
            record.file_bytes as f64 / 1e6, record.error.as_deref().unwrap_or("ok"));
        manifest.cases.push(record);
        // Written after every case, so a run cut short still leaves a readable manifest.
        manifest.write(&opts.dump)?;
    }
    manifest.write(&opts.dump)?;
    println!("image-compare: {} cases, {:.2} GB written to {}", manifest.cases.len(), manifest.total_file_bytes() as f64 / 1e9, opts.dump.display());
    Ok(manifest)
}

//! The case registry: every image op at the real shapes of issue #6.
//!
//! To add an op whose CUDA launcher now exists: write a small adapter with the [`F32Launch`]
//! (or [`PrepareFn`]) signature in `launchers.rs`, and add ONE line to [`cases`] calling the
//! ready-made builder, which already holds the shapes, inputs, work and targets of the issue.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};

use super::launchers;
use super::{
    AccuracyTarget, F32Launch, Fill, HostInput, ImageCase, InputSpec, OurKernel, PrepareFn, PreparedKernel,
    SpeedTarget, TorchOp,
};
use crate::launch::{Gpu, self, ImageShape, LaunchError};
use crate::verify::gpu::upload;
use crate::verify::{VerifyError, F32_UNIT_ROUNDOFF as U};

/// DiT linears `(N, K)`: attention out (3072, 3072), fused qkv (9216, 3072), the single block's
/// fused qkv+MLP-in (27648, 3072) and its out projection (3072, 12288) (reference/flux2.md §1.2).
pub const DIT_GEMM_NK: [(usize, usize); 4] = [(3072, 3072), (9216, 3072), (27648, 3072), (3072, 12288)];
/// DiT token counts M: the joint sequence at 512² and 1024².
pub const DIT_TOKENS: [usize; 2] = [1536, 4608];
/// `(M, N, K)` of every DiT GEMM case.
pub const DIT_GEMM_SHAPES: [(usize, usize, usize); 8] = {
    let mut out = [(0, 0, 0); 8];
    let mut i = 0;
    while i < 8 {
        out[i] = (DIT_TOKENS[i / 4], DIT_GEMM_NK[i % 4].0, DIT_GEMM_NK[i % 4].1);
        i += 1;
    }
    out
};
/// The shape the issue gates the ternary GEMM at (>= 250 TFLOP/s).
pub const TERNARY_GATE_SHAPE: (usize, usize, usize) = (4608, 27648, 3072);
/// VAE (small decoder) 3x3 convs `(Cin, Cout, H = W)` (reference/flux2.md §4 item 2).
pub const VAE_CONV_SHAPES: [(usize, usize, usize); 6] =
    [(32, 384, 64), (384, 384, 64), (384, 384, 128), (384, 192, 256), (192, 96, 512), (96, 3, 512)];
/// VAE activations `(C, H = W)` that GroupNorm and SiLU see at 512² output, plus the largest
/// (384 ch at 512², a 3.1M-element group) of the 1024² decoder.
pub const VAE_IMAGE_SHAPES: [(usize, usize); 6] =
    [(384, 64), (384, 128), (384, 256), (384, 512), (192, 512), (96, 512)];
/// Inputs `(C, H = W)` of the decoder's nearest-2x upsamplings (outputs 128² .. 512²).
pub const VAE_UPSAMPLE_SHAPES: [(usize, usize); 3] = [(384, 64), (384, 128), (384, 256)];
/// Conv inputs `(C, H = W)` an im2col + GEMM conv would expand.
pub const VAE_IM2COL_SHAPES: [(usize, usize); 4] = [(384, 64), (384, 128), (192, 256), (96, 512)];
/// Attention `(H, seq, hd)`: the DiT joint sequence at 512² and 1024², and the VAE mid-block's
/// single head of 384 (small decoder) / 512 (full) at 64² tokens, 384 at 128².
pub const ATTENTION_SHAPES: [(usize, usize, usize); 5] =
    [(24, 1536, 128), (24, 4608, 128), (1, 4096, 384), (1, 4096, 512), (1, 16384, 384)];

/// FLUX's GroupNorm.
const GROUPS: usize = 32;
const EPS: f32 = 1e-6;
/// The speed target for the elementwise VAE ops: >= 70% of the measured copy bandwidth.
const ELEMENTWISE_COPY_FRACTION: f64 = 0.7;

/// Every registered case, in run order.
pub fn cases() -> Vec<ImageCase> {
    let mut v = Vec::new();
    v.extend(group_norm_cases());
    v.extend(group_norm_silu_cases());
    v.extend(silu_cases());
    v.extend(upsample_cases());
    v.extend(im2col_cases());
    v.extend(gemm_f32_cases(launchers::GEMM_F32));
    v.extend(conv3x3_cases(launchers::CONV3X3));
    v.extend(joint_attention_cases(OurKernel::Custom(launchers::prepare_joint_attention)));
    v.extend(gemm_ternary_cases(launchers::prepare_gemm_ternary));
    v
}

fn input(name: &'static str, shape: &[usize], fill: Fill) -> InputSpec {
    InputSpec { name, shape: shape.to_vec(), fill }
}

// ---- group_norm ----

/// Relative Frobenius bound for our GroupNorm against the f64 truth. Per element (the op's doc
/// and group_norm/cuda.rs): u·(4(|x·a| + |μ·a| + |β|) + 3|y|) plus the statistics terms, which
/// are 2(u + n·2^-53)·κ² relative with κ² ≈ 1 for a shift near the mean. With |x·a| <= |y| +
/// |μ·a| + |β| that is <= u·(7|y| + 8|μ·a| + 8|β|) + ~3u|x·a|. These fills give μ ≈ 0 and
/// ‖β‖ <= 0.3‖y‖ (β in [-0.5, 0.5], γ in [0.5, 1.5]), so about 13u; 16u leaves room for the
/// second-order terms.
const GROUP_NORM_REL_BOUND_ULPS: f64 = 16.0;

pub fn group_norm_cases() -> Vec<ImageCase> {
    VAE_IMAGE_SHAPES
        .iter()
        .map(|&(c, hw)| ImageCase {
            name: format!("group_norm_c{c}_{hw}x{hw}"),
            op: TorchOp::GroupNorm { groups: GROUPS, eps: EPS },
            inputs: vec![
                input("x", &[c, hw, hw], Fill::Activations { scale: 2.0 }),
                input("gamma", &[c], Fill::Uniform { lo: 0.5, hi: 1.5 }),
                input("beta", &[c], Fill::Uniform { lo: -0.5, hi: 0.5 }),
            ],
            output_shape: vec![c, hw, hw],
            flops: 0.0,
            bytes: (launch::group_norm::TRAFFIC_BYTES_PER_ELEMENT * c * hw * hw) as f64,
            speed: SpeedTarget::FractionOfCopy(ELEMENTWISE_COPY_FRACTION),
            accuracy: AccuracyTarget::RelErrAtMost(GROUP_NORM_REL_BOUND_ULPS * U),
            kernel: OurKernel::Custom(prepare_group_norm),
        })
        .collect()
}

/// The fused GroupNorm + SiLU's bound: the GroupNorm error passes through silu's slope (<= 1.1)
/// and silu adds its 20u (image_elementwise.rs): 1.1·16u·R + 20u with R = ‖y‖/‖silu(y)‖ ≈ 1.5
/// for these fills (measured on 2M samples of them), 46.4u; 56u leaves room.
const GROUP_NORM_SILU_REL_BOUND_ULPS: f64 = 56.0;
/// Shapes of the fused cases: the decoder's most common and its two largest activations.
const GROUP_NORM_SILU_SHAPES: [(usize, usize); 3] = [(384, 128), (384, 512), (96, 512)];

pub fn group_norm_silu_cases() -> Vec<ImageCase> {
    GROUP_NORM_SILU_SHAPES
        .iter()
        .map(|&(c, hw)| {
            let mut case = group_norm_cases().into_iter().find(|g| g.output_shape == [c, hw, hw]).expect("a VAE shape");
            case.name = format!("group_norm_silu_c{c}_{hw}x{hw}");
            case.op = TorchOp::GroupNormSilu { groups: GROUPS, eps: EPS };
            case.accuracy = AccuracyTarget::RelErrAtMost(GROUP_NORM_SILU_REL_BOUND_ULPS * U);
            case
        })
        .collect()
}

/// GroupNorm's device buffers: x, gamma, beta and its statistics scratch.
struct GroupNormPrepared {
    fused_silu: bool,
    dims: launch::group_norm::GroupNormDims,
    x: CudaSlice<f32>,
    gamma: CudaSlice<f32>,
    beta: CudaSlice<f32>,
    scratch: CudaSlice<f64>,
}

impl PreparedKernel for GroupNormPrepared {
    fn launch(&mut self, gpu: Gpu<'_>, out: &mut CudaSlice<f32>) -> Result<(), LaunchError> {
        let (x, gamma, beta, scratch) = (&self.x, &self.gamma, &self.beta, &mut self.scratch);
        launch::group_norm::group_norm(gpu, x, gamma, beta, self.dims, EPS, scratch, out, self.fused_silu)
    }
}

fn prepare_group_norm(stream: &Arc<CudaStream>, case: &ImageCase, host: &[HostInput]) -> Result<Box<dyn PreparedKernel>, VerifyError> {
    let shape = &case.inputs[0].shape;
    let dims = launch::group_norm::GroupNormDims { channels: shape[0], groups: GROUPS, plane: shape[1] * shape[2] };
    let scratch = stream.alloc_zeros::<f64>(launch::group_norm::scratch_len(dims))?;
    Ok(Box::new(GroupNormPrepared {
        fused_silu: matches!(case.op, TorchOp::GroupNormSilu { .. }),
        dims,
        x: upload(stream, &host[0].data)?,
        gamma: upload(stream, &host[1].data)?,
        beta: upload(stream, &host[2].data)?,
        scratch,
    }))
}

// ---- silu ----

/// Our SiLU per element within 17u of |y| against the f64 value (CUDA expf <= 2 ulp = 4u, then
/// 1 + e, the e/(1+e) numerator, __fdividef's 2 ulp and the multiply; image_elementwise.rs), so
/// the relative Frobenius error is below that; 20u leaves room for second-order terms.
const SILU_REL_BOUND_ULPS: f64 = 20.0;

pub fn silu_cases() -> Vec<ImageCase> {
    let launch_silu: F32Launch = |gpu, case, inputs, out| launch::silu::silu(gpu, &inputs[0], case.output_len(), out);
    let accuracy = AccuracyTarget::RelErrAtMost(SILU_REL_BOUND_ULPS * U);
    one_image_cases("silu", TorchOp::Silu, &VAE_IMAGE_SHAPES, |c, hw| vec![c, hw, hw], 8.0, accuracy, launch_silu)
}

/// The image op's input x `[C, H, W]` as the launchers take it.
fn image_of(case: &ImageCase) -> ImageShape {
    let s = &case.inputs[0].shape;
    ImageShape::new(s[0], s[1], s[2])
}

// ---- upsample_nearest2x ----

pub fn upsample_cases() -> Vec<ImageCase> {
    let launch_upsample: F32Launch =
        |gpu, case, inputs, out| launch::upsample_nearest2x::upsample_nearest2x(gpu, &inputs[0], image_of(case), out);
    // Read once, write four times; a copy: exact.
    let exact = AccuracyTarget::RelErrAtMost(0.0);
    let doubled = |c, hw| vec![c, 2 * hw, 2 * hw];
    let op = TorchOp::UpsampleNearest2x;
    one_image_cases("upsample_nearest2x", op, &VAE_UPSAMPLE_SHAPES, doubled, 20.0, exact, launch_upsample)
}

// ---- im2col ----

pub fn im2col_cases() -> Vec<ImageCase> {
    let launch_im2col: F32Launch = |gpu, case, inputs, out| launch::im2col::im2col(gpu, &inputs[0], image_of(case), out);
    // Read once, write nine times; copies and zeros: exact.
    let exact = AccuracyTarget::RelErrAtMost(0.0);
    let cols = |c, hw| vec![c * crate::ops::im2col::TAPS, hw * hw];
    one_image_cases("im2col", TorchOp::Im2col, &VAE_IM2COL_SHAPES, cols, 40.0, exact, launch_im2col)
}

/// One case per `(C, HW)` of `shapes` of a one-input image op on x `[C, HW, HW]` (activations of
/// scale 4) with the output shape `output_shape(C, HW)`, moving `bytes_per_input` bytes per input
/// value, timed against the copy bandwidth.
fn one_image_cases(
    name: &str,
    op: TorchOp,
    shapes: &[(usize, usize)],
    output_shape: fn(usize, usize) -> Vec<usize>,
    bytes_per_input: f64,
    accuracy: AccuracyTarget,
    kernel: F32Launch,
) -> Vec<ImageCase> {
    shapes
        .iter()
        .map(|&(c, hw)| ImageCase {
            name: format!("{name}_c{c}_{hw}x{hw}"),
            op: op.clone(),
            inputs: vec![input("x", &[c, hw, hw], Fill::Activations { scale: 4.0 })],
            output_shape: output_shape(c, hw),
            flops: 0.0,
            bytes: bytes_per_input * (c * hw * hw) as f64,
            speed: SpeedTarget::FractionOfCopy(ELEMENTWISE_COPY_FRACTION),
            accuracy: accuracy.clone(),
            kernel: OurKernel::F32(kernel),
        })
        .collect()
}

// ---- builders for the ops other branches launch ----

/// f32-accurate GEMM `out = a·w^T` at every DiT shape: >= 1.5x cuBLAS SGEMM (TF32 off), error
/// within 2x of SGEMM's own.
pub fn gemm_f32_cases(kernel: F32Launch) -> Vec<ImageCase> {
    DIT_GEMM_SHAPES
        .iter()
        .map(|&(m, n, k)| ImageCase {
            name: format!("gemm_f32_m{m}_n{n}_k{k}"),
            op: TorchOp::GemmF32,
            inputs: vec![
                input("a", &[m, k], Fill::Activations { scale: 1.0 }),
                input("w", &[n, k], Fill::Uniform { lo: -0.05, hi: 0.05 }),
            ],
            output_shape: vec![m, n],
            flops: 2.0 * (m * n * k) as f64,
            bytes: 4.0 * (m * k + n * k + m * n) as f64,
            speed: SpeedTarget::VsTorchF32(1.5),
            accuracy: AccuracyTarget::VsTorchF32(2.0),
            kernel: OurKernel::F32(kernel),
        })
        .collect()
}

/// Ternary GEMM `out = a·w^T`, w in the 2-bit format (the file holds it dense): error <= 1e-3;
/// >= 250 TFLOP/s at [`TERNARY_GATE_SHAPE`], reported elsewhere.
pub fn gemm_ternary_cases(prepare: PrepareFn) -> Vec<ImageCase> {
    DIT_GEMM_SHAPES
        .iter()
        .map(|&(m, n, k)| ImageCase {
            name: format!("gemm_ternary_m{m}_n{n}_k{k}"),
            op: TorchOp::GemmTernary,
            inputs: vec![input("a", &[m, k], Fill::Activations { scale: 1.0 }), input("w", &[n, k], Fill::TernaryWeights)],
            output_shape: vec![m, n],
            flops: 2.0 * (m * n * k) as f64,
            bytes: (4 * (m * k + m * n) + n * k / crate::weights::GROUP * 34) as f64,
            speed: if (m, n, k) == TERNARY_GATE_SHAPE { SpeedTarget::TflopsAtLeast(250.0) } else { SpeedTarget::Report },
            accuracy: AccuracyTarget::RelErrAtMost(1e-3),
            kernel: OurKernel::Custom(prepare),
        })
        .collect()
}

/// 3x3 conv, pad 1, with bias, at the VAE shapes: >= cuDNN fp32 (TF32 off), error within 2x.
pub fn conv3x3_cases(kernel: F32Launch) -> Vec<ImageCase> {
    VAE_CONV_SHAPES
        .iter()
        .map(|&(ci, co, hw)| ImageCase {
            name: format!("conv3x3_ci{ci}_co{co}_{hw}x{hw}"),
            op: TorchOp::Conv3x3,
            inputs: vec![
                input("x", &[ci, hw, hw], Fill::Activations { scale: 1.0 }),
                input("weight", &[co, ci, 3, 3], Fill::Uniform { lo: -0.05, hi: 0.05 }),
                input("bias", &[co], Fill::Uniform { lo: -0.1, hi: 0.1 }),
            ],
            output_shape: vec![co, hw, hw],
            flops: 2.0 * (co * ci * 9 * hw * hw) as f64,
            bytes: 4.0 * (ci * hw * hw + co * ci * 9 + co + co * hw * hw) as f64,
            speed: SpeedTarget::VsTorchF32(1.0),
            accuracy: AccuracyTarget::VsTorchF32(2.0),
            kernel: OurKernel::F32(kernel),
        })
        .collect()
}

/// Joint attention q, k, v `[H, seq, hd]` -> `[seq, H·hd]`: >= 50% of SDPA bf16's speed; error
/// at most 2x bf16 SDPA's (ours rounds q, k, v and P to bf16 like SDPA, but keeps its f32 output).
pub fn joint_attention_cases(kernel: OurKernel) -> Vec<ImageCase> {
    ATTENTION_SHAPES
        .iter()
        .map(|&(h, seq, hd)| ImageCase {
            name: format!("joint_attention_h{h}_seq{seq}_hd{hd}"),
            op: TorchOp::JointAttention,
            inputs: ["q", "k", "v"].iter().map(|&n| input(n, &[h, seq, hd], Fill::Uniform { lo: -2.0, hi: 2.0 })).collect(),
            output_shape: vec![seq, h * hd],
            flops: 4.0 * (h * seq * seq * hd) as f64,
            bytes: 16.0 * (h * seq * hd) as f64,
            speed: SpeedTarget::VsTorchBf16(0.5),
            accuracy: AccuracyTarget::VsTorchBf16(2.0),
            kernel,
        })
        .collect()
}

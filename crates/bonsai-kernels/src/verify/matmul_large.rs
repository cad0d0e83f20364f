//! The f16 GEMM at the Bonsai-Image DiT's ternary shapes and at two of Bonsai 2 27B's prefill
//! projections whose grid is one partial wave (ShapeSet::All; ShapeSet::Small runs
//! one small shape through the same path): the GPU computes the whole product, the f64 reference
//! checks a sample of token rows (all N outputs each), so the run stays within seconds. Besides
//! the per-element bound (matmul.rs) each shape reports the relative Frobenius error of the
//! sampled rows against issue #6's limit.

use super::gpu::{download, poisoned, upload, DeviceQMatrix};
use super::matmul::{
    abs_matrix, f16_floor_term, kernel_label, matmul_coefficient, par_reference, row_abs_sums, row_max_abs, MatmulKernel,
};
use super::{Comparison, Ctx, VerifyError, F32_UNIT_ROUNDOFF as U};
use crate::launch;
use crate::launch::matmul::GemmKernel;
use crate::ops::Store;
use super::rng::SplitMix64;
use super::shapes::ShapeSet;
use crate::weights::QMatrix;

/// (M tokens, N outputs, K inputs): the DiT's widest linear (fused qkv+mlp of a single-stream
/// block), its MLP-down with K = 12288, and the 1024-token image's MLP-up and attention out.
const DIT_SHAPES: [(usize, usize, usize); 4] = [(4608, 27648, 3072), (4608, 3072, 12288), (1536, 9216, 3072), (1536, 3072, 3072)];
/// Bonsai 2 27B's down and output projections at pp512: with the 256-token tile 40 x 2 = 80 CTAs,
/// one partial wave of the H200's 132 SMs, so the launcher splits K in 3 (136 and 48 groups).
const PARTIAL_WAVE_SHAPES: [(usize, usize, usize); 2] = [(512, 5120, 17408), (512, 5120, 6144)];
/// Token rows compared per shape: the first and last few (tile edges) and random ones.
const EDGE_TOKENS: usize = 8;
const RANDOM_TOKENS: usize = 16;
/// Issue #6: relative Frobenius error of the ternary GEMM vs f64 at most 1e-3.
const MAX_RELATIVE_FROBENIUS: f64 = 1e-3;

/// A small shape for ShapeSet::Small (emulator, CI): partial token and row tiles.
const SMALL_SAMPLED_SHAPE: (usize, usize, usize) = (200, 131, 256);

pub(crate) fn run_all(ctx: &mut Ctx, set: ShapeSet) -> Result<(), VerifyError> {
    if set == ShapeSet::Small {
        let (m, n, k) = SMALL_SAMPLED_SHAPE;
        return sampled_matmul(ctx, "sampled", m, n, k);
    }
    for (m, n, k) in DIT_SHAPES {
        sampled_matmul(ctx, "DiT", m, n, k)?;
    }
    for (m, n, k) in PARTIAL_WAVE_SHAPES {
        sampled_matmul(ctx, "27B", m, n, k)?;
    }
    Ok(())
}

/// Sorted, distinct token indices: the first and last EDGE_TOKENS and RANDOM_TOKENS drawn.
fn sample_tokens(rng: &mut SplitMix64, m: usize) -> Vec<usize> {
    let mut t: Vec<usize> = (0..EDGE_TOKENS).chain(m - EDGE_TOKENS..m).collect();
    t.extend((0..RANDOM_TOKENS).map(|_| rng.next_u64() as usize % m));
    t.sort_unstable();
    t.dedup();
    t
}

fn sampled_matmul(ctx: &mut Ctx, label: &str, m: usize, n: usize, k: usize) -> Result<(), VerifyError> {
    let w = QMatrix::Q2(ctx.rng.q2_matrix(n, k));
    let x = ctx.rng.activations(m * k, 1.0);
    let tokens = sample_tokens(&mut ctx.rng, m);
    let dw = DeviceQMatrix::upload(&ctx.stream, &w)?;
    let xd = upload(&ctx.stream, &x)?;
    // The mma.sync f16 GEMM where its tiles fit and, on Hopper, the wgmma one (the launcher's
    // tile), same inputs; on a device with neither, bf16x3, which the launcher runs there.
    let mut kernels = Vec::new();
    if launch::matmul::f16_gemm_runs(&ctx.stream)? {
        kernels.push(GemmKernel::TensorCoreF16);
    }
    if launch::matmul::device_has_wgmma(&ctx.stream)? {
        kernels.push(GemmKernel::TensorCoreWgmma);
    }
    if kernels.is_empty() {
        kernels.push(GemmKernel::TensorCoreBf16x3);
    }
    for kernel in kernels {
        sampled_check(ctx, label, (m, n, k), &w, &x, &tokens, &dw, &xd, kernel)?;
    }
    Ok(())
}

/// One kernel's sampled rows and relative Frobenius error against the f64 reference.
#[allow(clippy::too_many_arguments)]
fn sampled_check(
    ctx: &mut Ctx,
    label: &str,
    (m, n, k): (usize, usize, usize),
    w: &QMatrix,
    x: &[f32],
    tokens: &[usize],
    dw: &DeviceQMatrix,
    xd: &cudarc::driver::CudaSlice<f32>,
    kernel: GemmKernel,
) -> Result<(), VerifyError> {
    let mut yd = poisoned(&ctx.stream, m * n)?;
    launch::matmul::matmul(ctx.gpu(), &dw.view(), xd, m, &mut yd, launch::matmul::Epilogue::Store, Some(kernel))?;
    let mut got = Vec::with_capacity(tokens.len() * n);
    for &t in tokens {
        got.extend(download(&ctx.stream, &yd.slice(t * n..(t + 1) * n))?);
    }
    let xs: Vec<f32> = tokens.iter().flat_map(|&t| x[t * k..(t + 1) * k].iter().copied()).collect();
    let s = tokens.len();
    let zeros = vec![0.0; s * n];
    let want = par_reference(w, &xs, s, &zeros, Store::Overwrite)?;
    let xs_abs: Vec<f32> = xs.iter().map(|v| v.abs()).collect();
    let magnitude = par_reference(&abs_matrix(w), &xs_abs, s, &zeros, Store::Overwrite)?;
    let (x_max, w_sums) = (row_max_abs(&xs, k), row_abs_sums(w)?);
    let c = matmul_coefficient(k, MatmulKernel::Gemm(kernel), true);
    // As matmul.rs's f16 bound, plus the reference's own final rounding u |y|.
    let cmp = Comparison::of(&got, &want, |i| {
        c * magnitude[i] as f64 + f16_floor_term(MatmulKernel::Gemm(kernel), x_max[i / n], w_sums[i % n]) + U * want[i].abs() as f64 + f32::MIN_POSITIVE as f64
    });
    let shape = format!("{label} M={m} N={n} K={k} ({s} rows) {}", kernel_label(MatmulKernel::Gemm(kernel)));
    ctx.record("matmul_q2", &shape, cmp);
    let (mut diff, mut norm) = (0.0f64, 0.0f64);
    for (&g, &r) in got.iter().zip(&want) {
        diff += (g as f64 - r as f64).powi(2);
        norm += (r as f64).powi(2);
    }
    let relative = (diff / norm.max(f64::MIN_POSITIVE)).sqrt();
    // One "element": the relative Frobenius error against 0, bounded by the limit.
    let frobenius = Comparison::of(&[relative as f32], &[0.0], |_| MAX_RELATIVE_FROBENIUS);
    ctx.record("matmul_q2 rel_frobenius", &shape, frobenius);
    Ok(())
}

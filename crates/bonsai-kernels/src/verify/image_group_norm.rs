//! Checks and `--bench` rows of GroupNorm (and GroupNorm + SiLU): every case against the f64
//! reference within a bound derived from the f64 statistics of each group.


use cudarc::driver::CudaSlice;

use super::bench::{copies_for, row, time_batches, BenchRow};
use super::gpu::{download, poisoned, upload};
use super::image_elementwise::SILU_BOUND_ULPS;
use super::shapes::ShapeSet;
use super::{Comparison, Ctx, VerifyError, F32_UNIT_ROUNDOFF as U};
use crate::launch::group_norm::{self as gn, GroupNormDims};
use crate::launch::Gpu;
use crate::ops;

/// FLUX's GroupNorm.
const GROUPS: usize = 32;
const EPS: f32 = 1e-6;
/// Values the GroupNorm shift K averages (GN_SHIFT_SAMPLES in group_norm.cu).
const SHIFT_SAMPLES: usize = 32;
/// f64 unit roundoff.
const F64_UNIT_ROUNDOFF: f64 = 1.0 / (1u64 << 53) as f64;
/// Largest slope of silu (at x ≈ 2.4): an error in its argument grows by at most this.
const SILU_MAX_SLOPE: f64 = 1.1;

/// VAE (C, H = W) shapes: every one with ShapeSet::All, the first two otherwise.
const VAE_SHAPES: [(usize, usize); 6] = [(96, 64), (384, 64), (384, 128), (192, 256), (384, 512), (96, 512)];
const VAE_SMALL_SET: usize = 2;

pub(super) fn run_all(ctx: &mut Ctx, set: ShapeSet) -> Result<(), VerifyError> {
    let vae = if set == ShapeSet::All { &VAE_SHAPES[..] } else { &VAE_SHAPES[..VAE_SMALL_SET] };
    // (C, G, H, W): odd planes, C not a multiple of 4, one channel per group, 1-pixel planes;
    // (4, 1, 40, 29) gives the statistics pass a full 4-load batch plus a tail, (8, 4, 50, 100)
    // the normalise pass. (15, 5, 8, 12) and (96, 32, 32, 40) groups of 3 channels in one
    // statistics chunk; (64, 32, 4, 4) groups of exactly the values the shift averages;
    // (4, 1, 40, 28) and (32, 8, 48, 48) groups cut into 2 and 3 statistics chunks.
    for (c, g, h, w) in [
        (64, 32, 7, 9),
        (6, 3, 5, 5),
        (5, 5, 3, 3),
        (32, 32, 1, 1),
        (12, 4, 33, 31),
        (96, 32, 8, 8),
        (4, 1, 40, 29),
        (8, 4, 50, 100),
        (15, 5, 8, 12),
        (64, 32, 4, 4),
        (4, 1, 40, 28),
        (32, 8, 48, 48),
        (96, 32, 32, 40),
    ] {
        group_norm(ctx, c, g, h, w, 0.0, false)?;
    }
    // A large mean next to a small spread: one-pass Σx² − nμ² without a shift would fail here.
    group_norm(ctx, 8, 2, 10, 10, 1000.0, false)?;
    group_norm(ctx, 8, 2, 10, 12, 1000.0, false)?;
    for &(c, hw) in vae {
        group_norm(ctx, c, GROUPS, hw, hw, 0.0, false)?;
    }
    // GroupNorm fused with SiLU: scalar-path and batch-plus-tail shapes, groups of 3 channels, the VAE's.
    for (c, g, h, w) in [(12, 4, 33, 31), (8, 4, 50, 100), (15, 5, 8, 12), (96, 32, 32, 40)] {
        group_norm(ctx, c, g, h, w, 0.0, true)?;
    }
    for &(c, hw) in vae {
        group_norm(ctx, c, GROUPS, hw, hw, 0.0, true)?;
    }
    Ok(())
}

/// GroupNorm bound per element, from the f64 statistics of each group (derivation in the body).
/// The kernels sum the f32 d = x − K in f64, cut into statistics chunks, and the f64 error bound
/// n·2^-53·Σ|d| holds for any order of summation, so the bound does not depend on the split.
fn group_norm_bound(x: &[f32], groups: usize, gamma: &[f32], beta: &[f32], want: &[f32]) -> Vec<f64> {
    let plane = x.len() / gamma.len();
    let n = x.len() / groups;
    let cpg = gamma.len() / groups;
    let mut out = Vec::with_capacity(x.len());
    for (g, xg) in x.chunks(n).enumerate() {
        let nf = n as f64;
        let mean = xg.iter().map(|&v| v as f64).sum::<f64>() / nf;
        let var = xg.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / nf;
        let shift = xg.iter().take(SHIFT_SAMPLES).map(|&v| v as f64).sum::<f64>() / xg.len().min(SHIFT_SAMPLES) as f64;
        // Shifted second moment M2' = σ² + (μ − K)² and κ² = M2'/(σ² + eps).
        let m2_shifted = var + (mean - shift).powi(2);
        let kappa2 = m2_shifted / (var + EPS as f64);
        // Each d = x − K rounds to f32 (u) and the f64 sums of n terms add n·2^-53.
        let eps_v = U + nf * F64_UNIT_ROUNDOFF;
        let inv_std = 1.0 / (var + EPS as f64).sqrt();
        for (i, &v) in xg.iter().enumerate() {
            let c = g * cpg + i / plane;
            let a = inv_std * gamma[c] as f64;
            let y = want[out.len()] as f64;
            // Output pass with μ and a rounded to f32 (the op's doc): u·(4(|x·a| + |μ·a| + |β|) + 3|y|).
            let pass = U * (4.0 * ((v as f64 * a).abs() + (mean * a).abs() + (beta[c] as f64).abs()) + 3.0 * y.abs());
            // Statistics: |Δσ²| <= 4ε_v·M2' moves a by 2ε_v·κ² relative; |Δμ| <= ε_v·sqrt(M2').
            let stats = ((v as f64 - mean) * a).abs() * 2.0 * eps_v * kappa2 + a.abs() * eps_v * m2_shifted.sqrt();
            // Factor 2: second-order terms and the reference's own f32 rounding of y.
            out.push(2.0 * (pass + stats));
        }
    }
    out
}

/// A scratch of `len` values, all NaN, so a partial sum read before it is written shows.
fn poisoned_scratch(ctx: &Ctx, len: usize) -> Result<CudaSlice<f64>, VerifyError> {
    upload(&ctx.stream, &vec![f64::NAN; len])
}

/// Device inputs of one case.
struct Inputs {
    dims: GroupNormDims,
    x: CudaSlice<f32>,
    gamma: CudaSlice<f32>,
    beta: CudaSlice<f32>,
    fused_silu: bool,
}

/// Runs one call into a poisoned output (with a poisoned scratch); returns y.
fn run(ctx: &Ctx, inp: &Inputs) -> Result<Vec<f32>, VerifyError> {
    let mut scratch = poisoned_scratch(ctx, gn::scratch_len(inp.dims))?;
    let mut y = poisoned(&ctx.stream, inp.x.len())?;
    gn::group_norm(ctx.gpu(), &inp.x, &inp.gamma, &inp.beta, inp.dims, EPS, &mut scratch, &mut y, inp.fused_silu)?;
    download(&ctx.stream, &y)
}

fn group_norm(ctx: &mut Ctx, c: usize, groups: usize, h: usize, w: usize, centre: f32, fused_silu: bool) -> Result<(), VerifyError> {
    let spread = if centre == 0.0 { 2.0 } else { 0.01 };
    let x: Vec<f32> = ctx.rng.activations(c * h * w, spread).into_iter().map(|v| v + centre).collect();
    let gamma: Vec<f32> = (0..c).map(|_| ctx.rng.range(-2.0, 2.0)).collect();
    let beta: Vec<f32> = (0..c).map(|_| ctx.rng.range(-1.0, 1.0)).collect();
    let mut want = vec![0.0f32; x.len()];
    ops::group_norm::reference(&x, ops::group_norm::Params { groups, gamma: &gamma, beta: &beta, eps: EPS }, &mut want)?;
    let mut bound = group_norm_bound(&x, groups, &gamma, &beta, &want);
    if fused_silu {
        // silu of the normalised value: the GroupNorm error passes through silu's slope
        // (<= 1.1), silu adds its own SILU_BOUND_ULPS·u·|y| (+ the smallest normal); the reference rounds the
        // normalised value to f32 before its silu, which the GroupNorm bound already covers.
        let normalised = want.clone();
        ops::silu::reference(&normalised, &mut want)?;
        for (b, &y) in bound.iter_mut().zip(&want) {
            *b = SILU_MAX_SLOPE * *b + SILU_BOUND_ULPS * U * y.abs() as f64 + f32::MIN_POSITIVE as f64;
        }
    }
    let dims = GroupNormDims { channels: c, groups, plane: h * w };
    let inp = Inputs { dims, x: upload(&ctx.stream, &x)?, gamma: upload(&ctx.stream, &gamma)?, beta: upload(&ctx.stream, &beta)?, fused_silu };
    let op = if fused_silu { "group_norm_silu" } else { "group_norm" };
    let case = format!("C={c} G={groups} {h}x{w} centre={centre}");

    let got = run(ctx, &inp)?;
    ctx.record(op, &case, Comparison::of(&got, &want, |i| bound[i]));
    Ok(())
}

/// Shapes timed by `--bench`: 384 channels at the VAE's 64², 128² and 256².
const BENCH_SIDES: [usize; 3] = [64, 128, 256];
const BENCH_CHANNELS: usize = 384;

/// group_norm and group_norm_silu; bandwidth counts their traffic,
/// [`gn::TRAFFIC_BYTES_PER_ELEMENT`] bytes per element.
pub(super) fn bench_rows(ctx: &mut Ctx, copy_bw: f64) -> Result<Vec<BenchRow>, VerifyError> {
    let mut rows = Vec::new();
    for hw in BENCH_SIDES {
        let c = BENCH_CHANNELS;
        let len = c * hw * hw;
        let copies = copies_for(8 * len);
        let xs = (0..copies).map(|_| upload(&ctx.stream, &ctx.rng.activations(len, 2.0))).collect::<Result<Vec<_>, _>>()?;
        let mut ys = (0..copies).map(|_| poisoned(&ctx.stream, len)).collect::<Result<Vec<_>, _>>()?;
        let dims = GroupNormDims { channels: c, groups: GROUPS, plane: hw * hw };
        let gamma = upload(&ctx.stream, &vec![1.25f32; c])?;
        let beta = upload(&ctx.stream, &vec![-0.5f32; c])?;
        let mut scratch: CudaSlice<f64> = ctx.stream.alloc_zeros(gn::scratch_len(dims))?;
        let shape = format!("C={c} {hw}x{hw}");
        // A device-to-device copy of the same bytes (read x, write y): the ceiling a one-launch
        // op of this size can reach, launch and latency included, next to the large-copy
        // bandwidth every row is compared with.
        let stream = ctx.stream.clone();
        let secs = time_batches(ctx, copies, |i| Ok(stream.memcpy_dtod(&xs[i], &mut ys[i])?))?;
        rows.push(row("copy (same size, read + write)", shape.clone(), secs, Some(8.0 * len as f64), None, copy_bw));
        let traffic = (gn::TRAFFIC_BYTES_PER_ELEMENT * len) as f64;
        for fused in [false, true] {
            let name = format!("{} ({} B/element)", if fused { "group_norm_silu" } else { "group_norm" }, gn::TRAFFIC_BYTES_PER_ELEMENT);
            let (lib, stream) = (&ctx.lib, ctx.stream.clone());
            let secs = time_batches(ctx, copies, |i| {
                gn::group_norm(Gpu::new(lib, &stream), &xs[i], &gamma, &beta, dims, EPS, &mut scratch, &mut ys[i], fused)?;
                Ok(())
            })?;
            rows.push(row(&name, shape.clone(), secs, Some(traffic), None, copy_bw));
        }
    }
    Ok(rows)
}

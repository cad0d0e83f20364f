//! Checks and `--bench` rows of the VAE's memory-bound ops: group_norm, silu,
//! upsample_nearest2x, im2col. Small odd shapes (C not a multiple of 4, odd H and W, an
//! unaligned view) exercise the scalar paths; the decoder's real shapes the float4 paths.

use cudarc::driver::CudaSlice;

use super::bench::{copies_for, row, time_batches, BenchRow};
use super::gpu::{download, poisoned, upload};
use super::shapes::ShapeSet;
use super::{Comparison, Ctx, VerifyError, F32_UNIT_ROUNDOFF as U};
use crate::launch::{self, group_norm::GroupNormDims};
use crate::ops;

/// FLUX's GroupNorm.
const GROUPS: usize = 32;
const EPS: f32 = 1e-6;
/// Values the GroupNorm shift K averages (GN_SHIFT_SAMPLES in group_norm.cu).
const SHIFT_SAMPLES: usize = 32;
/// f64 unit roundoff.
const F64_UNIT_ROUNDOFF: f64 = 1.0 / (1u64 << 53) as f64;

/// VAE (C, H = W) shapes: every one with ShapeSet::All, the first two otherwise.
const VAE_SHAPES: [(usize, usize); 6] = [(96, 64), (384, 64), (384, 128), (192, 256), (384, 512), (96, 512)];
const VAE_SMALL_SET: usize = 2;

fn vae_shapes(set: ShapeSet) -> &'static [(usize, usize)] {
    if set == ShapeSet::All { &VAE_SHAPES } else { &VAE_SHAPES[..VAE_SMALL_SET] }
}

pub(crate) fn run_all(ctx: &mut Ctx, set: ShapeSet) -> Result<(), VerifyError> {
    // (C, G, H, W): odd planes, C not a multiple of 4, one channel per group, 1-pixel planes;
    // (4, 1, 40, 29) gives the statistics pass a full 4-load batch plus a tail, (8, 4, 50, 100)
    // the normalise pass.
    for (c, g, h, w) in
        [(64, 32, 7, 9), (6, 3, 5, 5), (5, 5, 3, 3), (32, 32, 1, 1), (12, 4, 33, 31), (96, 32, 8, 8), (4, 1, 40, 29), (8, 4, 50, 100)]
    {
        group_norm(ctx, c, g, h, w, 0.0, false)?;
    }
    // A large mean next to a small spread: one-pass Σx² − nμ² without a shift would fail here.
    group_norm(ctx, 8, 2, 10, 10, 1000.0, false)?;
    for &(c, hw) in vae_shapes(set) {
        group_norm(ctx, c, GROUPS, hw, hw, 0.0, false)?;
    }
    // GroupNorm fused with SiLU: a scalar-path shape, a batch-plus-tail shape, the VAE's.
    for (c, g, h, w) in [(12, 4, 33, 31), (8, 4, 50, 100)] {
        group_norm(ctx, c, g, h, w, 0.0, true)?;
    }
    for &(c, hw) in vae_shapes(set) {
        group_norm(ctx, c, GROUPS, hw, hw, 0.0, true)?;
    }
    for len in [1, 3, 1001, 4097] {
        silu(ctx, len, 0)?;
    }
    silu(ctx, 1001, 1)?; // a view one float in: not 16-byte aligned, the scalar path
    for &(c, hw) in vae_shapes(set) {
        silu(ctx, c * hw * hw, 0)?;
    }
    for (c, h, w) in [(3, 5, 7), (5, 4, 4), (2, 1, 1), (7, 3, 12)] {
        upsample(ctx, c, h, w)?;
        im2col(ctx, c, h, w)?;
    }
    for &(c, hw) in vae_shapes(set).iter().filter(|(_, hw)| *hw <= 256) {
        upsample(ctx, c, hw, hw)?;
        im2col(ctx, c, hw, hw)?;
    }
    Ok(())
}

/// GroupNorm bound per element, from the f64 statistics of each group (derivation in the body).
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

/// Largest slope of silu (at x ≈ 2.4): an error in its argument grows by at most this.
const SILU_MAX_SLOPE: f64 = 1.1;
/// SiLU's own error in ulps of |y| (derivation in `silu` below).
const SILU_BOUND_ULPS: f64 = 12.0;

fn group_norm(ctx: &mut Ctx, c: usize, groups: usize, h: usize, w: usize, centre: f32, fused_silu: bool) -> Result<(), VerifyError> {
    let spread = if centre == 0.0 { 2.0 } else { 0.01 };
    let x: Vec<f32> = ctx.rng.activations(c * h * w, spread).into_iter().map(|v| v + centre).collect();
    let gamma: Vec<f32> = (0..c).map(|_| ctx.rng.range(-2.0, 2.0)).collect();
    let beta: Vec<f32> = (0..c).map(|_| ctx.rng.range(-1.0, 1.0)).collect();
    let mut want = vec![0.0f32; x.len()];
    ops::group_norm::reference(&x, groups, &gamma, &beta, EPS, &mut want)?;
    let mut bound = group_norm_bound(&x, groups, &gamma, &beta, &want);
    if fused_silu {
        // silu of the normalised value: the GroupNorm error passes through silu's slope
        // (<= 1.1), silu adds its own 12u·|y| (+ the smallest normal); the reference rounds the
        // normalised value to f32 before its silu, which the GroupNorm bound already covers.
        let normalised = want.clone();
        ops::silu::reference(&normalised, &mut want)?;
        for (b, &y) in bound.iter_mut().zip(&want) {
            *b = SILU_MAX_SLOPE * *b + SILU_BOUND_ULPS * U * y.abs() as f64 + f32::MIN_POSITIVE as f64;
        }
    }
    let dims = GroupNormDims { channels: c, groups, plane: h * w };
    let (xd, gd, bd) = (upload(&ctx.stream, &x)?, upload(&ctx.stream, &gamma)?, upload(&ctx.stream, &beta)?);
    let mut scratch: CudaSlice<f64> = upload(&ctx.stream, &vec![f64::NAN; launch::group_norm::scratch_len(dims)])?;
    let mut yd = poisoned(&ctx.stream, x.len())?;
    if fused_silu {
        launch::group_norm::group_norm_silu(&ctx.lib, &ctx.stream, &xd, &gd, &bd, dims, EPS, &mut scratch, &mut yd)?;
    } else {
        launch::group_norm::group_norm(&ctx.lib, &ctx.stream, &xd, &gd, &bd, dims, EPS, &mut scratch, &mut yd)?;
    }
    let got = download(&ctx.stream, &yd)?;
    let cmp = Comparison::of(&got, &want, |i| bound[i]);
    let op = if fused_silu { "group_norm_silu" } else { "group_norm" };
    ctx.record(op, &format!("C={c} G={groups} {h}x{w} centre={centre}"), cmp);
    Ok(())
}

fn silu_inputs(ctx: &mut Ctx, len: usize) -> Vec<f32> {
    let mut x = ctx.rng.activations(len, 4.0);
    // Edge values where present: 0, both tails, and x where exp(−|x|) is subnormal.
    for (slot, v) in x.iter_mut().zip([0.0f32, -0.0, 30.0, -30.0, -95.0, 95.0, -1e30, 1e30]) {
        *slot = v;
    }
    x
}

fn silu(ctx: &mut Ctx, len: usize, offset: usize) -> Result<(), VerifyError> {
    let x = silu_inputs(ctx, len);
    let mut want = vec![0.0f32; len];
    ops::silu::reference(&x, &mut want)?;
    let mut padded = vec![0.0f32; offset];
    padded.extend_from_slice(&x);
    let xd = upload(&ctx.stream, &padded)?;
    let mut yd = poisoned(&ctx.stream, len + offset)?;
    {
        let xv = xd.slice(offset..);
        let mut yv = yd.slice_mut(offset..);
        launch::silu::silu(&ctx.lib, &ctx.stream, &xv, len, &mut yv)?;
    }
    let got = download(&ctx.stream, &yd)?[offset..].to_vec();
    // CUDA expf errs by <= 2 ulp (<= 4u relative); 1 + e then carries <= 3u (e <= 1) and the
    // e/(1+e) branch's numerator 4u more; the divide, the multiply and the reference's rounding
    // u each: <= 10u·|y| to first order, 12u with room for second order. Plus the smallest
    // normal: below x ≈ −87 e is subnormal with an absolute error near 2^-149.
    let cmp = Comparison::of(&got, &want, |i| SILU_BOUND_ULPS * U * want[i].abs() as f64 + f32::MIN_POSITIVE as f64);
    ctx.record("silu", &format!("len={len} offset={offset}"), cmp);
    // In place on the aligned buffer gives the same bits as out of place.
    if offset == 0 {
        let mut xd = upload(&ctx.stream, &x)?;
        launch::silu::silu_in_place(&ctx.lib, &ctx.stream, &mut xd, len)?;
        let in_place = download(&ctx.stream, &xd)?;
        ctx.record("silu_in_place", &format!("len={len}"), Comparison::of(&in_place, &got, |_| 0.0));
    }
    Ok(())
}

fn upsample(ctx: &mut Ctx, c: usize, h: usize, w: usize) -> Result<(), VerifyError> {
    let x = ctx.rng.activations(c * h * w, 4.0);
    let mut want = vec![0.0f32; 4 * x.len()];
    ops::upsample_nearest2x::reference(&x, c, h, w, &mut want)?;
    let (xd, mut yd) = (upload(&ctx.stream, &x)?, poisoned(&ctx.stream, want.len())?);
    launch::upsample_nearest2x::upsample_nearest2x(&ctx.lib, &ctx.stream, &xd, c, h, w, &mut yd)?;
    let got = download(&ctx.stream, &yd)?;
    // Every output is a copy of one input: exact.
    ctx.record("upsample_nearest2x", &format!("C={c} {h}x{w}"), Comparison::of(&got, &want, |_| 0.0));
    Ok(())
}

fn im2col(ctx: &mut Ctx, c: usize, h: usize, w: usize) -> Result<(), VerifyError> {
    let x = ctx.rng.activations(c * h * w, 4.0);
    let mut want = vec![0.0f32; ops::im2col::TAPS * x.len()];
    ops::im2col::reference(&x, c, h, w, &mut want)?;
    let (xd, mut yd) = (upload(&ctx.stream, &x)?, poisoned(&ctx.stream, want.len())?);
    launch::im2col::im2col(&ctx.lib, &ctx.stream, &xd, c, h, w, &mut yd)?;
    let got = download(&ctx.stream, &yd)?;
    // Copies and zeros: exact.
    ctx.record("im2col", &format!("C={c} {h}x{w}"), Comparison::of(&got, &want, |_| 0.0));
    Ok(())
}

/// Shapes timed by `--bench` (the decoder's largest activations and a small one).
const BENCH_SHAPES: [(usize, usize); 3] = [(384, 128), (384, 256), (384, 512)];

pub(crate) fn bench_all(ctx: &mut Ctx, copy_bw: f64) -> Result<Vec<BenchRow>, VerifyError> {
    let mut rows = Vec::new();
    for &(c, hw) in &BENCH_SHAPES {
        let len = c * hw * hw;
        let copies = copies_for(8 * len);
        let xs = (0..copies).map(|_| upload(&ctx.stream, &ctx.rng.activations(len, 2.0))).collect::<Result<Vec<_>, _>>()?;
        let mut ys = (0..copies).map(|_| poisoned(&ctx.stream, len)).collect::<Result<Vec<_>, _>>()?;
        let shape = format!("C={c} {hw}x{hw}");
        let (lib, stream) = (&ctx.lib, ctx.stream.clone());
        let secs = time_batches(ctx, copies, |i| Ok(launch::silu::silu(lib, &stream, &xs[i], len, &mut ys[i])?))?;
        rows.push(row("silu", shape.clone(), secs, Some(8.0 * len as f64), None, copy_bw));

        let dims = GroupNormDims { channels: c, groups: GROUPS, plane: hw * hw };
        let gamma = upload(&ctx.stream, &vec![1.25f32; c])?;
        let beta = upload(&ctx.stream, &vec![-0.5f32; c])?;
        let mut scratch: CudaSlice<f64> = ctx.stream.alloc_zeros(launch::group_norm::scratch_len(dims))?;
        let secs = time_batches(ctx, copies, |i| {
            Ok(launch::group_norm::group_norm(lib, &stream, &xs[i], &gamma, &beta, dims, EPS, &mut scratch, &mut ys[i])?)
        })?;
        let traffic = launch::group_norm::TRAFFIC_BYTES_PER_ELEMENT as f64 * len as f64;
        rows.push(row("group_norm (12 B/element)", shape.clone(), secs, Some(traffic), None, copy_bw));
        let secs = time_batches(ctx, copies, |i| {
            Ok(launch::group_norm::group_norm_silu(lib, &stream, &xs[i], &gamma, &beta, dims, EPS, &mut scratch, &mut ys[i])?)
        })?;
        rows.push(row("group_norm_silu (12 B/element)", shape.clone(), secs, Some(traffic), None, copy_bw));
        drop(ys);

        if hw <= 256 {
            let mut ups = (0..copies).map(|_| poisoned(&ctx.stream, 4 * len)).collect::<Result<Vec<_>, _>>()?;
            let secs = time_batches(ctx, copies, |i| {
                Ok(launch::upsample_nearest2x::upsample_nearest2x(lib, &stream, &xs[i], c, hw, hw, &mut ups[i])?)
            })?;
            rows.push(row("upsample_nearest2x", shape.clone(), secs, Some(20.0 * len as f64), None, copy_bw));
            drop(ups);
            let mut cols = (0..copies.min(2)).map(|_| poisoned(&ctx.stream, 9 * len)).collect::<Result<Vec<_>, _>>()?;
            let n_cols = cols.len();
            let secs = time_batches(ctx, copies, |i| Ok(launch::im2col::im2col(lib, &stream, &xs[i], c, hw, hw, &mut cols[i % n_cols])?))?;
            rows.push(row("im2col", shape, secs, Some(40.0 * len as f64), None, copy_bw));
        }
    }
    Ok(rows)
}

//! Checks and `--bench` rows of the VAE's memory-bound ops: group_norm (image_group_norm.rs),
//! silu, upsample_nearest2x, im2col. Small odd shapes (C not a multiple of 4, odd H and W, an
//! unaligned view) exercise the scalar paths; the decoder's real shapes the float4 paths.

use cudarc::driver::CudaSlice;

use crate::launch::{Gpu, LaunchError};
use super::bench::{copies_for, row, time_batches, BenchRow};
use super::gpu::{download, poisoned, upload};
use super::shapes::ShapeSet;
use super::{Comparison, Ctx, VerifyError, F32_UNIT_ROUNDOFF as U};
use crate::launch;
use crate::ops::{self, ImageShape};

/// VAE (C, H = W) shapes: every one with ShapeSet::All, the first two otherwise.
const VAE_SHAPES: [(usize, usize); 6] = [(96, 64), (384, 64), (384, 128), (192, 256), (384, 512), (96, 512)];
const VAE_SMALL_SET: usize = 2;

fn vae_shapes(set: ShapeSet) -> &'static [(usize, usize)] {
    if set == ShapeSet::All { &VAE_SHAPES } else { &VAE_SHAPES[..VAE_SMALL_SET] }
}

pub(crate) fn run_all(ctx: &mut Ctx, set: ShapeSet) -> Result<(), VerifyError> {
    super::image_group_norm::run_all(ctx, set)?;
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

/// SiLU's own error in ulps of |y| (derivation in `silu` below).
pub(super) const SILU_BOUND_ULPS: f64 = 20.0;

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
        launch::silu::silu(ctx.gpu(), &xv, len, &mut yv)?;
    }
    let got = download(&ctx.stream, &yd)?[offset..].to_vec();
    // CUDA expf errs by <= 2 ulp (<= 4u relative); 1 + e then carries <= 3u (e <= 1) and the
    // e/(1+e) branch's numerator 4u more; __fdividef <= 2 ulp (4u), the multiply and the
    // reference's rounding u each: <= 17u·|y| to first order, 20u with room for second order.
    // Plus the smallest normal: below x ≈ −87 e is subnormal with an absolute error near 2^-149.
    let cmp = Comparison::of(&got, &want, |i| SILU_BOUND_ULPS * U * want[i].abs() as f64 + f32::MIN_POSITIVE as f64);
    ctx.record("silu", &format!("len={len} offset={offset}"), cmp);
    // In place on the aligned buffer gives the same bits as out of place.
    if offset == 0 {
        let mut xd = upload(&ctx.stream, &x)?;
        launch::silu::silu_in_place(ctx.gpu(), &mut xd, len)?;
        let in_place = download(&ctx.stream, &xd)?;
        ctx.record("silu_in_place", &format!("len={len}"), Comparison::of(&in_place, &got, |_| 0.0));
    }
    Ok(())
}

fn upsample(ctx: &mut Ctx, c: usize, h: usize, w: usize) -> Result<(), VerifyError> {
    // Every output is a copy of one input.
    let launch: ImageLaunch = |gpu, x, image, y| launch::upsample_nearest2x::upsample_nearest2x(gpu, x, image, y);
    exact_image_op(ctx, "upsample_nearest2x", ImageShape::new(c, h, w), 4, ops::upsample_nearest2x::reference, launch)
}

fn im2col(ctx: &mut Ctx, c: usize, h: usize, w: usize) -> Result<(), VerifyError> {
    // Copies and zeros.
    let launch: ImageLaunch = |gpu, x, image, cols| launch::im2col::im2col(gpu, x, image, cols);
    exact_image_op(ctx, "im2col", ImageShape::new(c, h, w), ops::im2col::TAPS, ops::im2col::reference, launch)
}

/// An image op's launcher on device buffers.
type ImageLaunch = fn(Gpu<'_>, &CudaSlice<f32>, ImageShape, &mut CudaSlice<f32>) -> Result<(), LaunchError>;

/// Checks an image op that only copies (and zero-fills), `out_per_input` outputs per input value,
/// against its reference: bit-exact.
fn exact_image_op(
    ctx: &mut Ctx,
    name: &str,
    image: ImageShape,
    out_per_input: usize,
    reference: fn(&[f32], ImageShape, &mut [f32]) -> Result<(), ops::OpError>,
    launch: ImageLaunch,
) -> Result<(), VerifyError> {
    let ImageShape { channels: c, height: h, width: w } = image;
    let x = ctx.rng.activations(c * h * w, 4.0);
    let mut want = vec![0.0f32; out_per_input * x.len()];
    reference(&x, image, &mut want)?;
    let (xd, mut yd) = (upload(&ctx.stream, &x)?, poisoned(&ctx.stream, want.len())?);
    launch(ctx.gpu(), &xd, image, &mut yd)?;
    let got = download(&ctx.stream, &yd)?;
    ctx.record(name, &format!("C={c} {h}x{w}"), Comparison::of(&got, &want, |_| 0.0));
    Ok(())
}

/// Shapes timed by `--bench` (the decoder's largest activations and a small one).
const BENCH_SHAPES: [(usize, usize); 3] = [(384, 128), (384, 256), (384, 512)];

pub(crate) fn bench_all(ctx: &mut Ctx, copy_bw: f64) -> Result<Vec<BenchRow>, VerifyError> {
    let mut rows = super::image_group_norm::bench_rows(ctx, copy_bw)?;
    for &(c, hw) in &BENCH_SHAPES {
        let len = c * hw * hw;
        let copies = copies_for(8 * len);
        let xs = (0..copies).map(|_| upload(&ctx.stream, &ctx.rng.activations(len, 2.0))).collect::<Result<Vec<_>, _>>()?;
        let mut ys = (0..copies).map(|_| poisoned(&ctx.stream, len)).collect::<Result<Vec<_>, _>>()?;
        let shape = format!("C={c} {hw}x{hw}");
        let (lib, stream) = (&ctx.lib, ctx.stream.clone());
        let secs = time_batches(ctx, copies, |i| Ok(launch::silu::silu(Gpu::new(lib, &stream), &xs[i], len, &mut ys[i])?))?;
        rows.push(row("silu", shape.clone(), secs, Some(8.0 * len as f64), None, copy_bw));

        drop(ys);

        if hw <= 256 {
            let mut ups = (0..copies).map(|_| poisoned(&ctx.stream, 4 * len)).collect::<Result<Vec<_>, _>>()?;
            let secs = time_batches(ctx, copies, |i| {
                Ok(launch::upsample_nearest2x::upsample_nearest2x(Gpu::new(lib, &stream), &xs[i], ImageShape::new(c, hw, hw), &mut ups[i])?)
            })?;
            rows.push(row("upsample_nearest2x", shape.clone(), secs, Some(20.0 * len as f64), None, copy_bw));
            drop(ups);
            let mut cols = (0..copies.min(2)).map(|_| poisoned(&ctx.stream, 9 * len)).collect::<Result<Vec<_>, _>>()?;
            let n_cols = cols.len();
            let secs = time_batches(ctx, copies, |i| Ok(launch::im2col::im2col(Gpu::new(lib, &stream), &xs[i], ImageShape::new(c, hw, hw), &mut cols[i % n_cols])?))?;
            rows.push(row("im2col", shape, secs, Some(40.0 * len as f64), None, copy_bw));
        }
    }
    Ok(rows)
}

//! `--bench` rows of the f32-accurate tensor-core ops (verify/image_gemm.rs): gemm_f32 on each
//! of its kernels at the DiT shapes, conv3x3 at the VAE's.

use crate::launch::Gpu;
use super::{gemm_paths, GemmF32Path};
use crate::launch;
use crate::launch::gemm_f32::wgmma;
use crate::ops::conv3x3::{ConvDims, Inputs as ConvInputs, TAPS};
use crate::ops::gemm_f32::{GemmDims, Inputs as GemmInputs};
use crate::verify::bench::{copies_for, row, time_batches, BenchRow};
use crate::verify::gpu::{poisoned, upload};
use crate::verify::{Ctx, VerifyError};

/// `--bench`: the speed shapes, effective TFLOP/s (2 flops per multiply-add of the
/// definition; the 3 tf32 products each costs are the kernel's business).
pub(crate) fn bench_all(ctx: &mut Ctx, copy_bw: f64) -> Result<Vec<BenchRow>, VerifyError> {
    let mut rows = Vec::new();
    // The DiT's GEMMs, and Bonsai 2 27B's f32 projections (alpha / beta: N = 48, K = 5120) at
    // a decode step and a 512-token prefill, each alone and both in one launch (the model's).
    let shapes = [(4608, 27648, 3072), (1536, 9216, 3072), (4608, 3072, 12288), (1, 48, 5120), (512, 48, 5120)];
    for (m, n, k) in shapes {
        for path in gemm_paths(ctx, GemmDims { m, n, k }, false)? {
            rows.extend(bench_gemm(ctx, path, GemmDims { m, n, k }, copy_bw)?);
        }
    }
    for m in [1, 512] {
        rows.push(bench_pair(ctx, GemmDims { m, n: 48, k: 5120 }, copy_bw)?);
    }
    for (c, hw) in [(384, 128), (384, 256), (192, 512)] {
        rows.push(bench_conv(ctx, ConvDims { c_in: c, c_out: c, h: hw, w: hw }, copy_bw)?);
    }
    // The VAE's mid-block conv (split K in 2) and conv_out (direct kernel).
    rows.push(bench_conv(ctx, ConvDims { c_in: 384, c_out: 384, h: 64, w: 64 }, copy_bw)?);
    rows.push(bench_conv(ctx, ConvDims { c_in: 96, c_out: 3, h: 512, w: 512 }, copy_bw)?);
    Ok(rows)
}

/// One kernel's row, and for wgmma its split pass timed alone after it. The wgmma row includes
/// the split pass; its scratch is allocated once here (`gemm_f32_wgmma_with_scratch`), so a
/// caller of plain `gemm_f32` pays a stream-ordered allocation per call on top.
fn bench_gemm(
    ctx: &mut Ctx,
    path: GemmF32Path,
    dims: GemmDims,
    copy_bw: f64,
) -> Result<Vec<BenchRow>, VerifyError> {
    let GemmDims { m, n, k } = dims;
    let copies = copies_for(4 * (m * k + n * k));
    let inputs = (0..copies)
        .map(|_| {
            Ok((
                upload(&ctx.stream, &ctx.rng.activations(m * k, 1.0))?,
                upload(&ctx.stream, &ctx.rng.activations(n * k, 0.05))?,
            ))
        })
        .collect::<Result<Vec<_>, VerifyError>>()?;
    let bias = upload(&ctx.stream, &ctx.rng.activations(n, 1.0))?;
    let mut out = poisoned(&ctx.stream, m * n)?;
    let scratch_len = match path {
        GemmF32Path::Wgmma => wgmma::scratch_len(dims)?,
        GemmF32Path::MmaSync | GemmF32Path::Rows | GemmF32Path::SmallN => 0,
    };
    let mut scratch = ctx.stream.alloc_zeros::<u32>(scratch_len.max(1))?;
    let (lib, stream) = (&ctx.lib, ctx.stream.clone());
    let secs = time_batches(ctx, copies, |i| {
        let (a, w) = &inputs[i];
        let (gpu, operands) = (Gpu::new(lib, &stream), GemmInputs { dims, a, w, bias: Some(&bias) });
        match path {
            GemmF32Path::Wgmma => wgmma::gemm_f32_wgmma_with_scratch(gpu, operands, &mut scratch, &mut out)?,
            GemmF32Path::MmaSync => launch::gemm_f32::gemm_f32_mma(gpu, operands, &mut out)?,
            GemmF32Path::Rows => launch::gemm_f32::gemm_f32_rows(gpu, operands, &mut out)?,
            GemmF32Path::SmallN => launch::gemm_f32::gemm_f32_small_n(gpu, operands, &mut out)?,
        }
        Ok(())
    })?;
    let flops = 2.0 * (m * n * k) as f64;
    let shape = format!("M={m} N={n} K={k}");
    let mut rows = vec![row(path.op_name(), shape.clone(), secs, None, Some(flops), copy_bw)];
    if path == GemmF32Path::Wgmma {
        // The split pass alone (4 bytes read, 8 written per element of A and W): the op's time
        // minus this is the GEMM kernel's.
        let secs = time_batches(ctx, copies, |i| {
            let (a, w) = &inputs[i];
            wgmma::split_operands(Gpu::new(lib, &stream), GemmInputs { dims, a, w, bias: None }, &mut scratch)?;
            Ok(())
        })?;
        let bytes = 12.0 * ((m + n) * k) as f64;
        rows.push(row("gemm_f32_tf32_split (A and W)", shape, secs, Some(bytes), None, copy_bw));
    }
    Ok(rows)
}

/// `gemm_f32_pair` on the path the model takes (`model_path`): alpha and beta in one launch.
fn bench_pair(ctx: &mut Ctx, dims: GemmDims, copy_bw: f64) -> Result<BenchRow, VerifyError> {
    let GemmDims { m, n, k } = dims;
    let path = launch::gemm_f32::model_path(m, n);
    let copies = copies_for(4 * (m * k + 2 * n * k));
    let inputs = (0..copies)
        .map(|_| {
            Ok((
                upload(&ctx.stream, &ctx.rng.activations(m * k, 1.0))?,
                upload(&ctx.stream, &ctx.rng.activations(n * k, 0.05))?,
                upload(&ctx.stream, &ctx.rng.activations(n * k, 0.05))?,
            ))
        })
        .collect::<Result<Vec<_>, VerifyError>>()?;
    let (mut out0, mut out1) = (poisoned(&ctx.stream, m * n)?, poisoned(&ctx.stream, m * n)?);
    let (lib, stream) = (&ctx.lib, ctx.stream.clone());
    let secs = time_batches(ctx, copies, |i| {
        let (a, w0, w1) = &inputs[i];
        launch::gemm_f32::gemm_f32_pair(Gpu::new(lib, &stream), path, dims, a, [w0, w1], [&mut out0, &mut out1])?;
        Ok(())
    })?;
    let flops = 2.0 * 2.0 * (m * n * k) as f64;
    // Bytes moved at least once: A, both weight matrices, both outputs (the decode row's floor).
    let bytes = 4.0 * (m * k + 2 * n * k + 2 * m * n) as f64;
    let op = format!("{}_pair", path.op_name());
    Ok(row(&op, format!("M={m} 2 x N={n} K={k}"), secs, Some(bytes), Some(flops), copy_bw))
}

fn bench_conv(ctx: &mut Ctx, dims: ConvDims, copy_bw: f64) -> Result<BenchRow, VerifyError> {
    let ConvDims { c_in, c_out, h, w } = dims;
    let copies = copies_for(4 * (c_in * h * w + c_out * c_in * TAPS));
    let inputs = (0..copies)
        .map(|_| upload(&ctx.stream, &ctx.rng.activations(c_in * h * w, 1.0)))
        .collect::<Result<Vec<_>, VerifyError>>()?;
    let weight = upload(&ctx.stream, &ctx.rng.activations(c_out * c_in * TAPS, 0.05))?;
    let bias = upload(&ctx.stream, &ctx.rng.activations(c_out, 1.0))?;
    let mut y = poisoned(&ctx.stream, c_out * h * w)?;
    let (lib, stream) = (&ctx.lib, ctx.stream.clone());
    let secs = time_batches(ctx, copies, |i| {
        launch::conv3x3::conv3x3(Gpu::new(lib, &stream), ConvInputs { dims, x: &inputs[i], weight: &weight, bias: &bias }, &mut y)?;
        Ok(())
    })?;
    let flops = 2.0 * (c_out * h * w * c_in * TAPS) as f64;
    let family = launch::conv3x3::kernel_family(dims);
    Ok(row(family, format!("{c_in}->{c_out} {h}x{w}"), secs, None, Some(flops), copy_bw))
}

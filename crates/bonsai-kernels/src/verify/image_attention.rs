//! Checks of the image model's joint attention (tensor cores, bf16 operands) against the f32
//! definition, and its `--bench` rows in TFLOP/s (FLOPs = 4·H·seq²·hd: QKᵀ and PV).
//!
//! Bound: `ops::joint_attention::bf16_check` — the exact effect of rounding q, k, v to bf16
//! plus the derived bound of the kernel's own arithmetic (the op's doc, "Accuracy").

use crate::launch::Gpu;
use super::bench::{copies_for, row, time_batches, BenchRow};
use super::gpu::{download, poisoned, upload};
use super::shapes::ShapeSet;
use super::{Comparison, Ctx, VerifyError};
use crate::launch::joint_attention::{self as ja, FlashVariant};
use crate::ops::joint_attention::{bf16_check, AttnDims, Inputs as AttnInputs};

/// How the inputs are drawn.
#[derive(Clone, Copy, Debug)]
enum Inputs {
    /// q, k uniform in ±1.5 (RMS-normed-like), v in ±2 with outliers. Scores near 0: a
    /// zero-filled tail key wrongly left in the softmax (score 0) takes a visible share
    /// (an off-by-one in the mask made 6 of the 10 small cases fail under the emulator).
    Uniform,
    /// Every key points away from every query except the last one: dropping that key (a mask
    /// cutting one key too many) moves every output.
    NegativeScores,
    /// Scores rising along the keys, up to ~±40: the running max grows on every tile.
    RisingMax,
}

const fn dims(heads: usize, seq: usize, head_dim: usize) -> AttnDims {
    AttnDims { heads, seq, head_dim }
}

/// Odd shapes: one key, one tile with a ragged tail, ragged tails past one and two tiles, every
/// head_dim the kernels take; seq 520 at hd 128 runs five 128-key tiles, so the wgmma kernels'
/// rings wrap (the pipelined one's 3 stages included).
const SMALL: [(AttnDims, Inputs); 11] = [
    (dims(1, 1, 64), Inputs::Uniform),
    (dims(2, 7, 128), Inputs::Uniform),
    (dims(3, 65, 64), Inputs::Uniform),
    (dims(1, 130, 128), Inputs::Uniform),
    (dims(2, 130, 64), Inputs::NegativeScores),
    (dims(2, 65, 128), Inputs::NegativeScores),
    (dims(1, 200, 128), Inputs::RisingMax),
    (dims(1, 520, 128), Inputs::RisingMax),
    (dims(1, 70, 384), Inputs::Uniform),
    (dims(1, 65, 512), Inputs::NegativeScores),
    (dims(1, 33, 512), Inputs::Uniform),
];

/// The model's shapes: DiT at 512² and 1024² (24 heads of 128), VAE mid-block at 512².
const MODEL: [AttnDims; 4] =
    [dims(24, 1536, 128), dims(24, 4608, 128), dims(1, 4096, 384), dims(1, 4096, 512)];

pub(crate) fn run_all(ctx: &mut Ctx, set: ShapeSet) -> Result<(), VerifyError> {
    for (d, inputs) in SMALL {
        check(ctx, d, inputs, None)?;
        // Every kernel the device has for the head dim, not only the one the launchers pick
        // (the first): the f32 call of the others, and every hd 64 / 128 kernel's bf16-q entry
        // point (the f32 calls run the f32-q forms).
        for (i, variant) in FlashVariant::available(&ctx.stream, d.head_dim)?.into_iter().enumerate() {
            if i > 0 {
                check(ctx, d, inputs, Some(variant))?;
            }
            if variant.f32_q_entry.is_some() {
                check_bf16_entry(ctx, d, inputs, variant)?;
            }
        }
    }
    if set == ShapeSet::All {
        for d in MODEL {
            check(ctx, d, Inputs::Uniform, None)?;
        }
    }
    Ok(())
}

fn draw(ctx: &mut Ctx, d: AttnDims, inputs: Inputs) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let n = d.heads * d.seq * d.head_dim;
    let v = ctx.rng.activations(n, 2.0);
    let (mut q, mut k): (Vec<f32>, Vec<f32>) = (
        (0..n).map(|_| ctx.rng.range(-1.5, 1.5)).collect(),
        (0..n).map(|_| ctx.rng.range(-1.5, 1.5)).collect(),
    );
    match inputs {
        Inputs::Uniform => {}
        Inputs::NegativeScores => {
            q.iter_mut().for_each(|x| *x = 0.75 + x.abs() / 6.0);
            k.iter_mut().for_each(|x| *x = -0.75 - x.abs() / 6.0);
            for h in 0..d.heads {
                let last = (h * d.seq + d.seq - 1) * d.head_dim;
                k[last..last + d.head_dim].iter_mut().for_each(|x| *x = -*x);
            }
        }
        Inputs::RisingMax => {
            q.iter_mut().for_each(|x| *x = 0.5 + x.abs() / 3.0);
            for (j, kj) in k.chunks_mut(d.head_dim).enumerate() {
                let ramp = 2.0 * (j % d.seq) as f32 / d.seq as f32 - 0.5;
                kj.iter_mut().for_each(|x| *x = *x * 0.2 + ramp);
            }
        }
    }
    (q, k, v)
}

/// The f32 op on the kernel the launchers pick (`forced` None) or on the given one.
fn check(
    ctx: &mut Ctx,
    d: AttnDims,
    inputs: Inputs,
    forced: Option<FlashVariant>,
) -> Result<(), VerifyError> {
    let (q, k, v) = draw(ctx, d, inputs);
    let variant = match forced {
        Some(v) => v,
        None => FlashVariant::for_device(&ctx.stream, d.head_dim)?,
    };
    let expect = bf16_check(d, &q, &k, &v, variant.softmax_keys)?;
    let (qd, kd, vd) =
        (upload(&ctx.stream, &q)?, upload(&ctx.stream, &k)?, upload(&ctx.stream, &v)?);
    let mut od = poisoned(&ctx.stream, q.len())?;
    if let (Inputs::NegativeScores, None) = (inputs, forced) {
        // The entry point that allocates its own scratch (the PyTorch harness uses it).
        ja::joint_attention_alloc(ctx.gpu(), AttnInputs { dims: d, q: &qd, k: &kd, v: &vd }, &mut od)?;
    } else {
        // Scratch poisoned with bf16 NaNs: a piece the conversion pass missed fails the check.
        let mut scratch = upload(&ctx.stream, &vec![0xFFFFu16; ja::scratch_len(d)])?;
        ja::joint_attention(ctx.gpu(), forced, AttnInputs { dims: d, q: &qd, k: &kd, v: &vd }, &mut scratch, &mut od)?;
    }
    let got = download(&ctx.stream, &od)?;
    let cmp = Comparison::of(&got, &expect.want, |i| expect.bound[i]);
    let mut shape = format!("H={} seq={} hd={} {inputs:?}", d.heads, d.seq, d.head_dim);
    if let Some(v) = forced {
        shape += &format!(" {}", v.f32_q_entry.unwrap_or(v.entry));
    }
    ctx.record("joint_attention", &shape, cmp);
    Ok(())
}

/// A hd 64 / 128 kernel's bf16-q entry point on its own (conversion pass, then that flash
/// kernel), against the bound for its own online-softmax step.
fn check_bf16_entry(
    ctx: &mut Ctx,
    d: AttnDims,
    inputs: Inputs,
    variant: FlashVariant,
) -> Result<(), VerifyError> {
    let (q, k, v) = draw(ctx, d, inputs);
    let expect = bf16_check(d, &q, &k, &v, variant.softmax_keys)?;
    let (qd, kd, vd) =
        (upload(&ctx.stream, &q)?, upload(&ctx.stream, &k)?, upload(&ctx.stream, &v)?);
    let mut od = poisoned(&ctx.stream, q.len())?;
    let n = q.len();
    let mut scratch = upload(&ctx.stream, &vec![0xFFFFu16; ja::scratch_len(d)])?;
    ja::convert_to_bf16(ctx.gpu(), n, &qd, &kd, &vd, &mut scratch)?;
    let (q16, k16, v16) =
        (scratch.slice(0..n), scratch.slice(n..2 * n), scratch.slice(2 * n..3 * n));
    ja::joint_attention_bf16(ctx.gpu(), Some(variant), AttnInputs { dims: d, q: &q16, k: &k16, v: &v16 }, &mut od)?;
    let got = download(&ctx.stream, &od)?;
    let cmp = Comparison::of(&got, &expect.want, |i| expect.bound[i]);
    let shape =
        format!("H={} seq={} hd={} {inputs:?} {}", d.heads, d.seq, d.head_dim, variant.entry);
    ctx.record("joint_attention", &shape, cmp);
    Ok(())
}

/// Timed shapes: the model's, plus the VAE mid-block at 1024² (seq 16384).
const BENCH: [AttnDims; 5] = [
    dims(24, 1536, 128),
    dims(24, 4608, 128),
    dims(1, 4096, 384),
    dims(1, 4096, 512),
    dims(1, 16384, 512),
];

/// `--bench`: the full op (conversion + flash), the flash kernel alone on bf16 inputs, and the
/// conversion pass alone (its cost is the difference the doc's speed-of-light reasoning needs).
pub(crate) fn bench_all(ctx: &mut Ctx, copy_bw: f64) -> Result<Vec<BenchRow>, VerifyError> {
    let mut rows = Vec::new();
    for d in BENCH {
        let n = d.heads * d.seq * d.head_dim;
        let bytes = 4 * 4 * n; // q, k, v in and out, f32
        let copies = copies_for(bytes);
        let host =
            (ctx.rng.activations(n, 1.5), ctx.rng.activations(n, 1.5), ctx.rng.activations(n, 2.0));
        let inputs = (0..copies)
            .map(|_| {
                Ok((
                    upload(&ctx.stream, &host.0)?,
                    upload(&ctx.stream, &host.1)?,
                    upload(&ctx.stream, &host.2)?,
                ))
            })
            .collect::<Result<Vec<_>, VerifyError>>()?;
        let mut scratch = upload(&ctx.stream, &vec![0u16; ja::scratch_len(d)])?;
        let mut out = poisoned(&ctx.stream, n)?;
        let flops = 4.0 * (d.heads * d.seq * d.seq * d.head_dim) as f64;
        let shape = format!("H={} seq={} hd={}", d.heads, d.seq, d.head_dim);
        let (lib, stream) = (&ctx.lib, ctx.stream.clone());
        let secs = time_batches(ctx, copies, |i| {
            let (q, k, v) = &inputs[i];
            ja::joint_attention(Gpu::new(lib, &stream), None, AttnInputs { dims: d, q, k, v }, &mut scratch, &mut out)?;
            Ok(())
        })?;
        rows.push(row("joint_attention (f32 in)", shape.clone(), secs, None, Some(flops), 1.0));
        let secs = time_batches(ctx, 1, |_| {
            let (q16, k16, v16) =
                (scratch.slice(0..n), scratch.slice(n..2 * n), scratch.slice(2 * n..3 * n));
            ja::joint_attention_bf16(Gpu::new(lib, &stream), None, AttnInputs { dims: d, q: &q16, k: &k16, v: &v16 }, &mut out)?;
            Ok(())
        })?;
        rows.push(row(
            "joint_attention_bf16 (flash only)",
            shape.clone(),
            secs,
            None,
            Some(flops),
            1.0,
        ));
        // The other kernels the device has for the head dim, if any, in the same run.
        for variant in FlashVariant::available(&stream, d.head_dim)?.into_iter().skip(1) {
            let secs = time_batches(ctx, 1, |_| {
                let (q16, k16, v16) =
                    (scratch.slice(0..n), scratch.slice(n..2 * n), scratch.slice(2 * n..3 * n));
                ja::joint_attention_bf16(Gpu::new(lib, &stream), Some(variant), AttnInputs { dims: d, q: &q16, k: &k16, v: &v16 }, &mut out)?;
                Ok(())
            })?;
            let name = format!("joint_attention_bf16 (flash only, {})", variant.entry);
            rows.push(row(&name, shape.clone(), secs, None, Some(flops), 1.0));
        }
        let secs = time_batches(ctx, copies, |i| {
            let (q, k, v) = &inputs[i];
            ja::convert_to_bf16(Gpu::new(lib, &stream), n, q, k, v, &mut scratch)?;
            Ok(())
        })?;
        // Bytes: 3 f32 tensors read, 3 bf16 tensors written.
        let convert_bytes = (3 * n * (4 + 2)) as f64;
        rows.push(row("joint_attention_to_bf16", shape, secs, Some(convert_bytes), None, copy_bw));
    }
    Ok(rows)
}

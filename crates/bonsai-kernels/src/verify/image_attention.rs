//! Checks of the image model's joint attention (tensor cores, bf16 operands) against the f32
//! definition, and its `--bench` rows in TFLOP/s (FLOPs = 4·H·seq²·hd: QKᵀ and PV).
//!
//! Bound: `ops::joint_attention::bf16_check` — the exact effect of rounding q, k, v to bf16
//! plus the derived bound of the kernel's own arithmetic (the op's doc, "Accuracy").

use super::bench::{copies_for, row, time_batches, BenchRow};
use super::gpu::{download, poisoned, upload};
use super::shapes::ShapeSet;
use super::{Comparison, Ctx, VerifyError};
use crate::launch::joint_attention::{self as ja, FlashVariant, SmallHeadKernel, SplitMode};
use crate::launch::shape as shape_error;
use crate::ops::joint_attention::{bf16_check_split, AttnDims};

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
/// head_dim the kernels take.
const SMALL: [(AttnDims, Inputs); 10] = [
    (dims(1, 1, 64), Inputs::Uniform),
    (dims(2, 7, 128), Inputs::Uniform),
    (dims(3, 65, 64), Inputs::Uniform),
    (dims(1, 130, 128), Inputs::Uniform),
    (dims(2, 130, 64), Inputs::NegativeScores),
    (dims(2, 65, 128), Inputs::NegativeScores),
    (dims(1, 200, 128), Inputs::RisingMax),
    (dims(1, 70, 384), Inputs::Uniform),
    (dims(1, 65, 512), Inputs::NegativeScores),
    (dims(1, 33, 512), Inputs::Uniform),
];

/// The last-wave key split at small shapes, with `slots` forced small so a partial wave exists:
/// (1, 520, 128) has 5 query blocks on 4 slots (4 whole items, 1 item in 4 ranges of 2, 2, 2
/// and 3 tiles, the last ragged); (2, 300, 128) has 6 items on 5 slots (1 item in 2 ranges
/// of 2 and 3 tiles).
const SPLIT_SMALL: [(AttnDims, Inputs, usize); 3] = [
    (dims(1, 520, 128), Inputs::RisingMax, 4),
    (dims(2, 300, 128), Inputs::NegativeScores, 5),
    (dims(2, 300, 128), Inputs::Uniform, 5),
];

/// The model's shapes: DiT at 512² and 1024² (24 heads of 128), VAE mid-block at 512².
const MODEL: [AttnDims; 4] =
    [dims(24, 1536, 128), dims(24, 4608, 128), dims(1, 4096, 384), dims(1, 4096, 512)];

pub(crate) fn run_all(ctx: &mut Ctx, set: ShapeSet) -> Result<(), VerifyError> {
    for (d, inputs) in SMALL {
        check(ctx, d, inputs)?;
        if d.head_dim <= 128 {
            // The bf16-q entry points the f32 call above did not run stay checked: the hd 64 / 128
            // kernels the default does not pick (ja::KERNEL_ENV), and the default's own when that
            // call ran its f32-q form.
            let default = FlashVariant::for_head_dim(d.head_dim)?;
            for kind in SmallHeadKernel::ALL {
                let variant = FlashVariant::select(d.head_dim, kind)?;
                if variant != default || variant.f32_q_entry.is_some() {
                    check_bf16_entry(ctx, d, inputs, variant)?;
                }
            }
        }
    }
    for (d, inputs, slots) in SPLIT_SMALL {
        check_split(ctx, d, inputs, slots)?;
    }
    if set == ShapeSet::All {
        for d in MODEL {
            check(ctx, d, Inputs::Uniform)?;
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

fn check(ctx: &mut Ctx, d: AttnDims, inputs: Inputs) -> Result<(), VerifyError> {
    let (q, k, v) = draw(ctx, d, inputs);
    let variant = FlashVariant::for_head_dim(d.head_dim)?;
    let mode = SplitMode::from_env()?;
    let plan = ja::planned_split(&ctx.lib, &ctx.stream, variant, true, d, mode)?;
    let splits = plan.map_or(1, |p| p.splits);
    let expect = bf16_check_split(d, &q, &k, &v, variant.softmax_keys, splits)?;
    let (qd, kd, vd) =
        (upload(&ctx.stream, &q)?, upload(&ctx.stream, &k)?, upload(&ctx.stream, &v)?);
    let mut od = poisoned(&ctx.stream, q.len())?;
    if let Inputs::NegativeScores = inputs {
        // The entry point that allocates its own scratch (the PyTorch harness uses it).
        ja::joint_attention_alloc(&ctx.lib, &ctx.stream, d, &qd, &kd, &vd, &mut od)?;
    } else {
        // Scratch poisoned with bf16 NaNs: a piece the conversion pass missed fails the check.
        let mut scratch = upload(&ctx.stream, &vec![0xFFFFu16; ja::scratch_len(d)])?;
        ja::joint_attention(&ctx.lib, &ctx.stream, d, &qd, &kd, &vd, &mut scratch, &mut od)?;
    }
    let got = download(&ctx.stream, &od)?;
    let cmp = Comparison::of(&got, &expect.want, |i| expect.bound[i]);
    let shape = format!("H={} seq={} hd={} {inputs:?} splits={splits}", d.heads, d.seq, d.head_dim);
    ctx.record("joint_attention", &shape, cmp);
    Ok(())
}

/// The split path at a small shape (`slots` forced): the f32 call and the bf16-q entry against
/// the bound with the split's merge, and the f32 call run twice bit-identical (the merge order
/// does not depend on which range finishes last).
fn check_split(
    ctx: &mut Ctx,
    d: AttnDims,
    inputs: Inputs,
    slots: usize,
) -> Result<(), VerifyError> {
    let (q, k, v) = draw(ctx, d, inputs);
    let variant = FlashVariant::select(d.head_dim, SmallHeadKernel::QRegs)?;
    let mode = SplitMode::Slots(slots);
    let mut plans = Vec::new();
    for f32_q in [true, false] {
        let plan = ja::planned_split(&ctx.lib, &ctx.stream, variant, f32_q, d, mode)?;
        // A row that ran the unsplit grid would test nothing new: fail loudly instead.
        plans.push(plan.ok_or_else(|| {
            shape_error("joint_attention", format!("{d:?} on {slots} slots does not split"))
        })?);
    }
    let splits = [plans[0].splits, plans[1].splits];
    let (qd, kd, vd) =
        (upload(&ctx.stream, &q)?, upload(&ctx.stream, &k)?, upload(&ctx.stream, &v)?);
    let n = q.len();
    let mut scratch = upload(&ctx.stream, &vec![0xFFFFu16; ja::scratch_len(d)])?;
    let mut runs = Vec::new();
    for _ in 0..2 {
        let mut od = poisoned(&ctx.stream, n)?;
        ja::joint_attention_with(
            &ctx.lib,
            &ctx.stream,
            d,
            &qd,
            &kd,
            &vd,
            &mut scratch,
            &mut od,
            mode,
        )?;
        runs.push(download(&ctx.stream, &od)?);
    }
    let name = |what: &str, s: usize| {
        format!(
            "H={} seq={} hd={} {inputs:?} split {s} on {slots} slots{what}",
            d.heads, d.seq, d.head_dim
        )
    };
    let expect = bf16_check_split(d, &q, &k, &v, variant.softmax_keys, splits[0])?;
    let cmp = Comparison::of(&runs[0], &expect.want, |i| expect.bound[i]);
    ctx.record("joint_attention", &name("", splits[0]), cmp);
    // Bit-identical: the bound is zero.
    let cmp = Comparison::of(&runs[1], &runs[0], |_| 0.0);
    ctx.record("joint_attention", &name(" rerun bit-identical", splits[0]), cmp);
    // The whole-item CTAs (index < full) compute exactly what the unsplit grid does.
    let mut od = poisoned(&ctx.stream, n)?;
    let off = SplitMode::Off;
    ja::joint_attention_with(&ctx.lib, &ctx.stream, d, &qd, &kd, &vd, &mut scratch, &mut od, off)?;
    let unsplit = download(&ctx.stream, &od)?;
    let row_len = d.heads * d.head_dim;
    let block_q = variant.block_q();
    let in_full_item = |i: &usize| {
        let (query, head) = (i / row_len, i % row_len / d.head_dim);
        head * plans[0].q_blocks + query / block_q < plans[0].full
    };
    let pick = |v: &[f32]| -> Vec<f32> { (0..n).filter(in_full_item).map(|i| v[i]).collect() };
    let cmp = Comparison::of(&pick(&runs[0]), &pick(&unsplit), |_| 0.0);
    ctx.record("joint_attention", &name(" whole items = unsplit, bit-identical", splits[0]), cmp);

    ja::convert_to_bf16(&ctx.lib, &ctx.stream, n, &qd, &kd, &vd, &mut scratch)?;
    let (q16, k16, v16) =
        (scratch.slice(0..n), scratch.slice(n..2 * n), scratch.slice(2 * n..3 * n));
    let mut od = poisoned(&ctx.stream, n)?;
    ja::joint_attention_bf16_with(
        &ctx.lib,
        &ctx.stream,
        variant,
        d,
        &q16,
        &k16,
        &v16,
        &mut od,
        mode,
    )?;
    let got = download(&ctx.stream, &od)?;
    let expect = bf16_check_split(d, &q, &k, &v, variant.softmax_keys, splits[1])?;
    let cmp = Comparison::of(&got, &expect.want, |i| expect.bound[i]);
    ctx.record("joint_attention", &name(&format!(" {}", variant.entry), splits[1]), cmp);
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
    let mode = SplitMode::from_env()?;
    let plan = ja::planned_split(&ctx.lib, &ctx.stream, variant, false, d, mode)?;
    let expect =
        bf16_check_split(d, &q, &k, &v, variant.softmax_keys, plan.map_or(1, |p| p.splits))?;
    let (qd, kd, vd) =
        (upload(&ctx.stream, &q)?, upload(&ctx.stream, &k)?, upload(&ctx.stream, &v)?);
    let mut od = poisoned(&ctx.stream, q.len())?;
    let n = q.len();
    let mut scratch = upload(&ctx.stream, &vec![0xFFFFu16; ja::scratch_len(d)])?;
    ja::convert_to_bf16(&ctx.lib, &ctx.stream, n, &qd, &kd, &vd, &mut scratch)?;
    let (q16, k16, v16) =
        (scratch.slice(0..n), scratch.slice(n..2 * n), scratch.slice(2 * n..3 * n));
    ja::joint_attention_bf16_with(
        &ctx.lib,
        &ctx.stream,
        variant,
        d,
        &q16,
        &k16,
        &v16,
        &mut od,
        mode,
    )?;
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
/// Where the default kernel has a last-wave split, both forms run with the split forced on and
/// off in the same run (SPLIT_ENV does not matter here).
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
        let default = FlashVariant::for_head_dim(d.head_dim)?;
        let (lib, stream) = (&ctx.lib, ctx.stream.clone());
        let modes: &[SplitMode] = if default.split_entry.is_some() {
            &[SplitMode::Auto, SplitMode::Off]
        } else {
            &[SplitMode::Off]
        };
        for &mode in modes {
            let tag = |f32_q: bool| -> Result<String, VerifyError> {
                Ok(match mode {
                    _ if default.split_entry.is_none() => String::new(),
                    SplitMode::Off => ", split off".to_string(),
                    _ => match ja::planned_split(lib, &stream, default, f32_q, d, mode)? {
                        Some(p) => format!(", split {} x {} + {}", p.tail, p.splits, p.full),
                        None => ", split: no partial wave".to_string(),
                    },
                })
            };
            let (tag_f32, tag_bf16) = (tag(true)?, tag(false)?);
            let secs = time_batches(ctx, copies, |i| {
                let (q, k, v) = &inputs[i];
                ja::joint_attention_with(lib, &stream, d, q, k, v, &mut scratch, &mut out, mode)?;
                Ok(())
            })?;
            let name = format!("joint_attention (f32 in{tag_f32})");
            rows.push(row(&name, shape.clone(), secs, None, Some(flops), 1.0));
            let secs = time_batches(ctx, 1, |_| {
                let (q16, k16, v16) =
                    (scratch.slice(0..n), scratch.slice(n..2 * n), scratch.slice(2 * n..3 * n));
                ja::joint_attention_bf16_with(
                    lib, &stream, default, d, &q16, &k16, &v16, &mut out, mode,
                )?;
                Ok(())
            })?;
            let name = format!("joint_attention_bf16 (flash only{tag_bf16})");
            rows.push(row(&name, shape.clone(), secs, None, Some(flops), 1.0));
        }
        // The other hd 64 / 128 kernels, in the same run (old vs new on equal terms).
        let mut others = Vec::new();
        if d.head_dim <= 128 {
            for kind in SmallHeadKernel::ALL {
                others.push(FlashVariant::select(d.head_dim, kind)?);
            }
            others.retain(|v| *v != default);
        }
        for variant in others {
            let secs = time_batches(ctx, 1, |_| {
                let (q16, k16, v16) =
                    (scratch.slice(0..n), scratch.slice(n..2 * n), scratch.slice(2 * n..3 * n));
                ja::joint_attention_bf16_with(
                    lib,
                    &stream,
                    variant,
                    d,
                    &q16,
                    &k16,
                    &v16,
                    &mut out,
                    SplitMode::Off,
                )?;
                Ok(())
            })?;
            let name = format!("joint_attention_bf16 (flash only, {})", variant.entry);
            rows.push(row(&name, shape.clone(), secs, None, Some(flops), 1.0));
        }
        let secs = time_batches(ctx, copies, |i| {
            let (q, k, v) = &inputs[i];
            ja::convert_to_bf16(lib, &stream, n, q, k, v, &mut scratch)?;
            Ok(())
        })?;
        // Bytes: 3 f32 tensors read, 3 bf16 tensors written.
        let convert_bytes = (3 * n * (4 + 2)) as f64;
        rows.push(row("joint_attention_to_bf16", shape, secs, Some(convert_bytes), None, copy_bw));
    }
    Ok(rows)
}

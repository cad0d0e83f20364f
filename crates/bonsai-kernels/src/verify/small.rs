//! Checks of the element-wise and row-wise ops: rms_norm, softmax, swiglu, residual_add,
//! argmax, embed_rows.

use super::gpu::{download, poisoned, upload, DeviceQMatrix};
use super::shapes::{ShapeSet, MODELS, SMALL, VOCAB};
use super::{Comparison, Ctx, VerifyError, F32_UNIT_ROUNDOFF as U};
use crate::launch;
use crate::ops;
use crate::weights::QMatrix;

pub(crate) fn run_all(ctx: &mut Ctx, set: ShapeSet) -> Result<(), VerifyError> {
    let mut widths: Vec<(usize, usize)> = vec![(1, 128), (7, 384), (3, 1000), (33, 2048)];
    if set == ShapeSet::All {
        for g in MODELS {
            widths.push((512, g.hidden));
        }
    }
    for &(rows, n) in &widths {
        rms_norm(ctx, rows, n)?;
        softmax(ctx, rows, n)?;
    }
    softmax(ctx, 1, VOCAB)?;
    let ffns: Vec<usize> = if set == ShapeSet::All { MODELS.iter().map(|g| g.ffn).collect() } else { vec![SMALL.ffn] };
    for &f in &ffns {
        for m in [1, 33] {
            swiglu(ctx, m, f)?;
            residual_add(ctx, m * f)?;
        }
    }
    for n in [1, 100, 4097, VOCAB] {
        argmax(ctx, n)?;
    }
    argmax_all_nan(ctx)?;
    for n in [1, 100, 4097, VOCAB] {
        sample(ctx, n)?;
    }
    let hiddens: Vec<(usize, usize, bool)> = if set == ShapeSet::All {
        MODELS.iter().map(|g| (VOCAB, g.hidden, g.ternary)).collect()
    } else {
        vec![(1001, SMALL.hidden, false), (1001, SMALL.hidden, true)]
    };
    for &(vocab, hidden, ternary) in &hiddens {
        embed_rows(ctx, vocab, hidden, ternary)?;
    }
    Ok(())
}

fn rms_norm(ctx: &mut Ctx, rows: usize, n: usize) -> Result<(), VerifyError> {
    let x = ctx.rng.activations(rows * n, 2.0);
    let w: Vec<f32> = (0..n).map(|_| ctx.rng.range(0.5, 1.5)).collect();
    let eps = 1e-6f32;
    let mut want = vec![0.0f32; rows * n];
    ops::rms_norm::reference(&x, &w, eps, &mut want)?;
    let (xd, wd, mut yd) = (upload(&ctx.stream, &x)?, upload(&ctx.stream, &w)?, poisoned(&ctx.stream, rows * n)?);
    launch::rms_norm::rms_norm(ctx.gpu(), &xd, &wd, eps, rows, n, &mut yd)?;
    let got = download(&ctx.stream, &yd)?;
    // Sum of squares: per-thread sequential over n/256 terms then a 10-level tree, all terms
    // positive: relative error <= (n/256 + 10)u; /n, +eps, rsqrtf (<= 2 ulp) and two products
    // add <= 6u; the reference's own rounding u. Halved under the square root, so
    // (n/256 + 24)u is rigorous to first order; the factor 2 covers second-order terms.
    let rel = 2.0 * (n as f64 / 256.0 + 24.0) * U;
    let cmp = Comparison::of(&got, &want, |i| rel * want[i].abs() as f64 + f32::MIN_POSITIVE as f64);
    ctx.record("rms_norm", &format!("rows={rows} n={n}"), cmp);
    Ok(())
}

fn softmax(ctx: &mut Ctx, rows: usize, n: usize) -> Result<(), VerifyError> {
    let x: Vec<f32> = (0..rows * n).map(|_| ctx.rng.range(-8.0, 8.0)).collect();
    let mut want = x.clone();
    ops::softmax::reference(&mut want, n)?;
    let mut xd = upload(&ctx.stream, &x)?;
    launch::softmax::softmax(ctx.gpu(), &mut xd, rows, n)?;
    let got = download(&ctx.stream, &xd)?;
    let row_max: Vec<f32> = x.chunks(n).map(|r| r.iter().cloned().fold(f32::NEG_INFINITY, f32::max)).collect();
    // y = exp(x - M) / S: x - M rounds (absolute u|x - M|, a relative error of exp of the same
    // size); expf <= 2 ulp; S sums positive terms over n/256 sequential steps and a 10-level
    // tree, each term already off by 3u: (n/256 + 13)u; 1/S and the product 2u; reference u.
    // Factor 2 for second-order terms.
    let bound = |i: usize| {
        let spread = (x[i] - row_max[i / n]).abs() as f64;
        2.0 * U * (spread + n as f64 / 256.0 + 20.0) * want[i].abs() as f64 + f32::MIN_POSITIVE as f64
    };
    let cmp = Comparison::of(&got, &want, bound);
    ctx.record("softmax", &format!("rows={rows} n={n}"), cmp);
    Ok(())
}

fn swiglu(ctx: &mut Ctx, m: usize, f: usize) -> Result<(), VerifyError> {
    let gu = ctx.rng.activations(m * 2 * f, 4.0);
    let mut want = vec![0.0f32; m * f];
    ops::swiglu::reference(&gu, m, &mut want)?;
    let (gd, mut od) = (upload(&ctx.stream, &gu)?, poisoned(&ctx.stream, m * f)?);
    launch::swiglu::swiglu(ctx.gpu(), &gd, m, f, &mut od)?;
    let got = download(&ctx.stream, &od)?;
    // g / (1 + expf(-g)) * u: expf 2 ulp -> 1 + e off by <= 3u relative; division and product
    // are correctly rounded (2u); reference u: 6u, doubled for second order.
    let cmp = Comparison::of(&got, &want, |i| 12.0 * U * want[i].abs() as f64 + f32::MIN_POSITIVE as f64);
    ctx.record("swiglu", &format!("m={m} F={f}"), cmp);
    Ok(())
}

fn residual_add(ctx: &mut Ctx, n: usize) -> Result<(), VerifyError> {
    let a = ctx.rng.activations(n, 10.0);
    let b = ctx.rng.activations(n, 1.0);
    let mut want = a.clone();
    ops::residual_add::reference(&mut want, &b)?;
    let (mut ad, bd) = (upload(&ctx.stream, &a)?, upload(&ctx.stream, &b)?);
    launch::residual_add::residual_add(ctx.gpu(), &mut ad, &bd, n)?;
    let got = download(&ctx.stream, &ad)?;
    // One correctly rounded f32 add on both sides (the reference's f64 sum of two f32 is exact,
    // then rounds once): bit-identical.
    let cmp = Comparison::of(&got, &want, |_| 0.0);
    ctx.record("residual_add", &format!("n={n}"), cmp);
    Ok(())
}

fn argmax_case(ctx: &mut Ctx, x: &[f32], label: &str) -> Result<(), VerifyError> {
    let want = ops::argmax::reference(x).ok();
    let xd = upload(&ctx.stream, x)?;
    let mut out = upload(&ctx.stream, &[0x5a5a_5a5au32])?;
    launch::argmax::argmax(ctx.gpu(), &xd, x.len(), &mut out)?;
    let got = download(&ctx.stream, &out)?[0];
    let got = (got != launch::argmax::ARGMAX_NONE).then_some(got as usize);
    // An index: exact equality (ties -> lowest, NaN never wins, None when all NaN).
    let cmp = Comparison::of(&[u32::from(got != want) as f32], &[0.0], |_| 0.0);
    ctx.record("argmax", &format!("{label} gpu={got:?} ref={want:?}"), cmp);
    Ok(())
}

fn argmax(ctx: &mut Ctx, n: usize) -> Result<(), VerifyError> {
    let mut x: Vec<f32> = (0..n).map(|_| ctx.rng.range(-30.0, 30.0)).collect();
    if n > 2 {
        // A tie for the maximum (the lower index must win) and a NaN that must never win.
        let hi = (ctx.rng.next_u32() as usize % (n - 1)) + 1;
        let lo = ctx.rng.next_u32() as usize % hi;
        x[hi] = 100.0;
        x[lo] = 100.0;
        let nan_at = ctx.rng.next_u32() as usize % n;
        if nan_at != lo {
            x[nan_at] = f32::NAN;
        }
    }
    argmax_case(ctx, &x, &format!("n={n}"))
}

fn argmax_all_nan(ctx: &mut Ctx) -> Result<(), VerifyError> {
    argmax_case(ctx, &[f32::NAN; 37], "n=37 all NaN")?;
    // -0 and +0 are equal values: the lower index wins whichever sign it carries, also when the
    // two sit in different CTAs (the kernel keys values by their bits).
    let mut zeros = vec![-1.0f32; 5000];
    zeros[4500] = 0.0;
    zeros[3] = -0.0;
    argmax_case(ctx, &zeros, "n=5000 -0 at 3 ties +0 at 4500")?;
    // Every value -inf: -inf is an ordinary value, index 0 wins.
    argmax_case(ctx, &vec![f32::NEG_INFINITY; 3000], "n=3000 all -inf")
}

fn embed_rows(ctx: &mut Ctx, vocab: usize, hidden: usize, ternary: bool) -> Result<(), VerifyError> {
    let table = if ternary {
        QMatrix::Q2(ctx.rng.q2_matrix(vocab, hidden))
    } else {
        QMatrix::Q1(ctx.rng.q1_matrix(vocab, hidden))
    };
    let m = 7;
    let mut ids: Vec<u32> = (0..m).map(|_| ctx.rng.next_u32() % vocab as u32).collect();
    ids[0] = 0;
    ids[1] = vocab as u32 - 1;
    let mut want = vec![0.0f32; m * hidden];
    ops::embed_rows::reference(&table, &ids, &mut want)?;
    let dt = DeviceQMatrix::upload(&ctx.stream, &table)?;
    let (idd, mut od) = (upload(&ctx.stream, &ids)?, poisoned(&ctx.stream, m * hidden)?);
    launch::embed_rows::embed_rows(ctx.gpu(), &dt.view(), &idd, m, &mut od)?;
    let got = download(&ctx.stream, &od)?;
    // +-d or (c - 1) d with c - 1 in {-1, 0, 1, 2}: exact in f32 on both sides.
    let cmp = Comparison::of(&got, &want, |_| 0.0);
    let kind = if ternary { "q2" } else { "q1" };
    ctx.record(&format!("embed_rows_{kind}"), &format!("vocab={vocab} hidden={hidden} m={m}"), cmp);
    Ok(())
}

/// The device sampler against the definition: the same id for the same uniform draw, and the
/// generator state advanced exactly as the host's.
fn sample(ctx: &mut Ctx, n: usize) -> Result<(), VerifyError> {
    use crate::ops::sample_top_k::{SampleParams, Xoshiro256};
    let settings = [
        SampleParams { inv_temperature: 1.0 / 0.8, top_k: 40, top_p: 0.95, min_p: 0.05 },
        SampleParams { inv_temperature: 1.0, top_k: 64, top_p: 1.0, min_p: 0.0 },
        SampleParams { inv_temperature: 1.0 / 0.3, top_k: 5, top_p: 0.5, min_p: 0.0 },
        SampleParams { inv_temperature: 2.0, top_k: 1, top_p: 1.0, min_p: 0.0 },
    ];
    let mut logits: Vec<f32> = (0..n).map(|_| ctx.rng.range(-6.0, 6.0)).collect();
    for _ in 0..n / 50 {
        let i = ctx.rng.next_u32() as usize % n;
        logits[i] = f32::NEG_INFINITY;
    }
    let ld = upload(&ctx.stream, &logits)?;
    let mut candidates = upload(&ctx.stream, &vec![0u64; launch::sample_top_k::candidate_scratch_len()])?;
    for params in settings {
        let mut host = Xoshiro256::new(u64::from(ctx.rng.next_u32()));
        let mut state = upload(&ctx.stream, &host.state())?;
        let mut out = upload(&ctx.stream, &[0x5a5a_5a5au32])?;
        let mut mismatches = 0usize;
        let draws = 8;
        for _ in 0..draws {
            launch::sample_top_k::sample_top_k(ctx.gpu(), &ld, n, &params, &mut state, &mut candidates, &mut out)?;
            let got = download(&ctx.stream, &out)?[0];
            let want = ops::sample_top_k::reference(&logits, &params, host.next_f64()).ok().unwrap_or(launch::sample_top_k::SAMPLE_NONE);
            mismatches += usize::from(got != want);
        }
        let state_ok = download(&ctx.stream, &state)? == host.state();
        // Exact: ids compare equal unless a draw lands within the device's expf error (2 ulp) of a
        // cumulative boundary, a chance of ~1e-6 per draw; the generator state must match bit for bit.
        let cmp = Comparison::of(&[(mismatches + usize::from(!state_ok)) as f32], &[0.0], |_| 0.0);
        let shape = format!("n={n} T={:.2} k={} p={} min_p={} x{draws}", 1.0 / params.inv_temperature, params.top_k, params.top_p, params.min_p);
        ctx.record("sample_top_k", &shape, cmp);
    }
    Ok(())
}

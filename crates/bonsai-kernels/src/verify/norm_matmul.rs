//! RMSNorm fused into a matmul (`rms_norm_matmul`, `rms_norm_gate_up_swiglu`): into the decode
//! GEMVs' x staging (m <= 8) and into the GEMMs' f16 pre-pass (m > 8), against the reference
//! rms_norm followed by the reference matmul; past 8 tokens also bit for bit against the rms_norm
//! kernel followed by the same GEMM.

use rayon::prelude::*;

use super::gpu::{download, poisoned, upload, DeviceQMatrix};
use super::matmul::{
    abs_matrix, b1_quant_bound, bound_magnitude, kernel_label, kernels_for, matmul_coefficient, par_reference, random_matrix,
    run_kernel, swiglu_bound,
};
use super::shapes::{ShapeSet, MODELS};
use super::{Comparison, Ctx, VerifyError, F32_UNIT_ROUNDOFF as U};
use crate::launch::matmul::{Epilogue, GEMV_MAX_TOKENS};
use crate::ops::{self, Store};
use crate::weights::QMatrix;

const EPS: f32 = 1e-6;

pub(crate) fn run_all(ctx: &mut Ctx, set: ShapeSet) -> Result<(), VerifyError> {
    for ternary in [false, true] {
        // 1: the GEMVs; 2, 3: the multi-token binary GEMVs (and the small-m GEMM's 8-token
        // kernel); 7, 16, 24: the small-m GEMM's 8-, 16- and 32-token kernels; 64 (a
        // batched decode step's tile GEMMs, one token tile) and 130 (a partial second tile): the
        // GEMMs' normed pre-pass.
        for m in [1, 2, 3, 7, 16, 24, 64, 130] {
            // K % 512 != 0 (one-group layout blocks) and K = 2048 (4-group blocks, x in chunks).
            norm_matmul(ctx, "odd", 333, 384, m, ternary, false)?;
            norm_matmul(ctx, "blocks", 200, 2048, m, ternary, false)?;
            norm_matmul(ctx, "odd", 37, 256, m, ternary, true)?;
            norm_matmul(ctx, "blocks", 40, 2048, m, ternary, true)?;
        }
    }
    if set == ShapeSet::All {
        for g in MODELS {
            for m in [1, 7, 64] {
                let qkv = (g.n_q + 2 * g.n_kv) * g.head_dim;
                norm_matmul(ctx, &format!("{} qkv", g.name), qkv, g.hidden, m, g.ternary, false)?;
                norm_matmul(ctx, &format!("{} gate_up", g.name), g.ffn, g.hidden, m, g.ternary, true)?;
            }
        }
    }
    Ok(())
}

/// `n_out` outputs of `RMSNorm(x) . W^T` (W has 2 n_out rows [gate | up] when `swiglu`).
fn norm_matmul(ctx: &mut Ctx, label: &str, n_out: usize, k: usize, m: usize, ternary: bool, swiglu: bool) -> Result<(), VerifyError> {
    let rows = if swiglu { 2 * n_out } else { n_out };
    let w = random_matrix(ctx, rows, k, ternary);
    let x = ctx.rng.activations(m * k, 2.0);
    let norm_w: Vec<f32> = (0..k).map(|_| ctx.rng.range(0.5, 1.5)).collect();
    let mut xn = vec![0.0f32; m * k];
    ops::rms_norm::reference(&x, &norm_w, EPS, &mut xn)?;
    let zeros = vec![0.0f32; m * rows];
    let lin = par_reference(&w, &xn, m, &zeros, Store::Overwrite)?;
    let xn_abs: Vec<f32> = xn.iter().map(|v| v.abs()).collect();
    let plain = par_reference(&abs_matrix(&w), &xn_abs, m, &zeros, Store::Overwrite)?;
    let magnitude = bound_magnitude(&w, &xn_abs, m, &plain)?;
    let want: Vec<f32> = if swiglu {
        let mut out = vec![0.0f32; m * n_out];
        out.par_chunks_mut(n_out).enumerate().try_for_each(|(i, o)| match &w {
            QMatrix::Q1(q) => ops::gate_up_swiglu_q1::reference(q, &xn[i * k..(i + 1) * k], 1, o),
            QMatrix::Q2(q) => ops::gate_up_swiglu_q2::reference(q, &xn[i * k..(i + 1) * k], 1, o),
        })?;
        out
    } else {
        lin.clone()
    };

    let dw = DeviceQMatrix::upload(&ctx.stream, &w)?;
    let (xd, nd) = (upload(&ctx.stream, &x)?, upload(&ctx.stream, &norm_w)?);
    // gemv_b1 quantizes the staged x * w; its bound scales by the token's 1 / rms (in f64,
    // rounded up by 2^-20 for the kernel's own rsqrt and sums, far inside rel_n below).
    // Per token row (the multi-token GEMV quantizes each token on its own); only where a binary
    // kernel reads it (zeros otherwise).
    let kernels = kernels_for(ctx, m)?;
    let binary_rows = if kernels.iter().any(|k| k.is_binary()) { m } else { 0 };
    let mut quant: Vec<f32> = Vec::with_capacity(m * rows);
    for xr in x.chunks(k).take(binary_rows) {
        let staged: Vec<f32> = xr.iter().zip(&norm_w).map(|(a, b)| a * b).collect();
        let mean_sq = xr.iter().map(|&v| (v as f64) * (v as f64)).sum::<f64>() / k as f64;
        let inv_rms = (1.0 + 1.0 / 1_048_576.0) / (mean_sq + EPS as f64).sqrt();
        quant.extend(b1_quant_bound(&w, &staged)?.iter().map(|&q| (q as f64 * inv_rms) as f32));
    }
    quant.resize(m * rows, 0.0);

    // The kernel stages x * w and scales each finished dot product by the token's 1 / rms. Its
    // f32 sum of squares (positive terms): 4 per lane (3 adds), a 5-level warp tree, then
    // sequentially over at most k/128 staged groups per warp and <= 16 warp slots:
    // (k/128 + 24)u <= (k/32 + 24)u; /k, +eps, rsqrtf (2 ulp) add <= 4u before the root halves
    // it; x * w and the final * (1 / rms) add 2u: <= (k/64 + 16)u on every element, doubled for
    // second order: within rel_n = 2 (k/32 + 24)u (rms_norm's own check's figure), so a dot moves
    // by at most rel_n sum |w||xn| = rel_n * magnitude on top of the GEMV's own bound.
    let rel_n = 2.0 * (k as f64 / 32.0 + 24.0) * U;
    let epilogue = if swiglu { Epilogue::SwiGlu } else { Epilogue::Store };
    for kernel in kernels {
        let mut od = poisoned(&ctx.stream, m * n_out)?;
        run_kernel(ctx, kernel, &dw, &xd, Some((&nd, EPS)), m, &mut od, epilogue)?;
        let got = download(&ctx.stream, &od)?;
        let c = matmul_coefficient(k, kernel, ternary) + rel_n;
        let binary = kernel.is_binary();
        // gemv_b1: the coefficient also covers the quantization term Q, which adds once.
        let mag = |idx: usize| if binary { plain[idx] as f64 + quant[idx] as f64 } else { magnitude[idx] as f64 };
        let add = |idx: usize| if binary { quant[idx] as f64 } else { 0.0 };
        let lin_bound = |idx: usize| c * mag(idx) + add(idx) + 2.0 * U * lin[idx].abs() as f64;
        let cmp = if swiglu {
            Comparison::of(&got, &want, |idx| {
                let (i, j) = (idx / n_out, idx % n_out);
                let (gi, ui) = (i * rows + j, i * rows + n_out + j);
                swiglu_bound(lin[gi] as f64, lin[ui] as f64, lin_bound(gi), lin_bound(ui), want[idx])
            })
        } else {
            Comparison::of(&got, &want, |idx| lin_bound(idx) + f32::MIN_POSITIVE as f64)
        };
        let op = format!("rms_norm_{}_{}", if swiglu { "gate_up_swiglu" } else { "matmul" }, if ternary { "q2" } else { "q1" });
        ctx.record(&op, &format!("{label} N={n_out} K={k} m={m} {}", kernel_label(kernel)), cmp);
        // The binary GEMVs (one token or several) scale the finished dot products by 1 / rms
        // instead of normalising x first, so only the bound above applies to them.
        if m > GEMV_MAX_TOKENS && !binary {
            // The same GEMM on the rms_norm kernel's rows: the fused pre-pass promises its bits.
            let mut xnd = poisoned(&ctx.stream, m * k)?;
            crate::launch::rms_norm::rms_norm(ctx.gpu(), &xd, &nd, EPS, m, k, &mut xnd)?;
            let mut ud = poisoned(&ctx.stream, m * n_out)?;
            run_kernel(ctx, kernel, &dw, &xnd, None, m, &mut ud, epilogue)?;
            let unfused = download(&ctx.stream, &ud)?;
            let label = format!("{label} N={n_out} K={k} m={m} {} = rms_norm then matmul", kernel_label(kernel));
            ctx.record(&op, &label, Comparison::of(&got, &unfused, |_| 0.0));
        }
    }
    Ok(())
}

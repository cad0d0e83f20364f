//! Checks of the quantized matmuls (plain, fused residual, fused gate|up SwiGLU), 1-bit and
//! 2-bit, at every model's projection shapes and at odd shapes.

use rayon::prelude::*;

use super::gpu::{download, poisoned, upload, DeviceQMatrix};
use super::shapes::{Geometry, ShapeSet, MODELS, SMALL, TOKEN_COUNTS, VOCAB};
use super::{Comparison, Ctx, VerifyError, F32_UNIT_ROUNDOFF as U};
use crate::launch::matmul::{Epilogue, GemmKernel, GemvKernel, GEMV_MAX_TOKENS};
pub(crate) use super::matmul_kernels::{b1_quant_bound, b1_quant_bound_rows, kernel_label, kernels_for, run_kernel, MatmulKernel};
use crate::ops::{self, OpError, Store};
use crate::weights::{Q1Matrix, Q2Matrix, QMatrix, GROUP, Q1_WORDS, Q2_WORDS};

/// Rows per parallel reference task.
const REFERENCE_ROWS_PER_TASK: usize = 512;
/// A token count that leaves the f16 GEMM's last 128-token tile partly empty (2 x 128 + 44).
const LARGE_ODD_TOKENS: usize = 300;
/// Relative rounding of an f16 normal number (11-bit significand): 2^-11.
pub(crate) const F16_UNIT_ROUNDOFF: f64 = 1.0 / 2048.0;
/// Absolute rounding of an f16 subnormal (half its spacing 2^-24), in scaled units.
const F16_SUBNORMAL_ROUNDOFF: f64 = 1.0 / 33_554_432.0;
/// The f16 pre-pass maps a row's max |x| to >= 2^14, so 2^-e <= 2^-14 max|x_row|.
const F16_ROW_SCALE_FLOOR: f64 = 1.0 / 16_384.0;

pub(crate) fn run_all(ctx: &mut Ctx, set: ShapeSet) -> Result<(), VerifyError> {
    if !crate::launch::matmul::f16_gemm_runs(&ctx.stream)? {
        println!(
            "verify: no f16 GEMM rows: its tiles exceed this device's opt-in shared memory \
             (the launcher runs gemm_mma there)"
        );
    }
    // Odd shapes: K = 128, odd N, every token count including a 512-token GEMM.
    for ternary in [false, true] {
        for &m in &TOKEN_COUNTS {
            matmul(ctx, "odd", 333, 128, m, ternary, Store::Overwrite)?;
            matmul(ctx, "odd", 77, 384, m, ternary, Store::Add)?;
            gate_up(ctx, "odd", 37, 256, m, ternary)?;
        }
        for m in [1, 7, 33, 512] {
            matmul(ctx, SMALL.name, SMALL.hidden, SMALL.ffn, m, ternary, Store::Add)?;
        }
        // 3 tokens: the multi-token binary GEMV's 4-token kernel with one token absent, on
        // single-group layout blocks (its `__noinline__` body).
        matmul(ctx, "odd", 77, 384, 3, ternary, Store::Add)?;
        gate_up(ctx, "odd", 37, 256, 3, ternary)?;
        // K % 512 == 0: the device layout's 4-group blocks (every Bonsai shape; the odd shapes
        // above have single-group blocks); K = 2048 also stages x in two chunks at m = 7 and
        // splits each GEMV tile's K over 4 warps; 2, 3 and 7 tokens: the multi-token binary
        // GEMV's kernels (7 also the small-m GEMM's 8-token one); 24 tokens: its 32-token kernel.
        for m in [1, 2, 3, 7, 24] {
            matmul(ctx, "blocks", 200, 2048, m, ternary, Store::Overwrite)?;
            gate_up(ctx, "blocks", 40, 2048, m, ternary)?;
        }
        // K = 33280 (260 groups): the binary GEMV's planes no longer fit shared memory at once
        // and are copied in two chunks (tc_geometry.rs: 244 + 16 groups).
        matmul(ctx, "chunks", 40, 33280, 1, ternary, Store::Add)?;
        matmul(ctx, "chunks", 40, 33280, 3, ternary, Store::Add)?;
    }
    // Large-M odd shapes for the f16 GEMM: m not a multiple of its 128-token tile, odd N/F.
    for ternary in [false, true] {
        matmul(ctx, "odd", 333, 384, LARGE_ODD_TOKENS, ternary, Store::Overwrite)?;
        matmul(ctx, "odd", 77, 256, LARGE_ODD_TOKENS, ternary, Store::Add)?;
        gate_up(ctx, "odd", 37, 256, LARGE_ODD_TOKENS, ternary)?;
    }
    super::matmul_code3::run_all(ctx)?;
    super::matmul_split::run_all(ctx)?;
    super::matmul_large::run_all(ctx, set)?;
    if set == ShapeSet::Small {
        return Ok(());
    }
    for g in MODELS {
        let ms: &[usize] = if g.hidden == 4096 { &[1, 7, 33] } else { &[1, 7] };
        for &m in ms {
            model_layer(ctx, &g, m)?;
        }
        matmul(ctx, &format!("{} lm_head", g.name), VOCAB, g.hidden, 1, g.ternary, Store::Overwrite)?;
    }
    Ok(())
}

/// Every linear of one layer: fused QKV, output (residual add), gate|up + SwiGLU, down (add).
fn model_layer(ctx: &mut Ctx, g: &Geometry, m: usize) -> Result<(), VerifyError> {
    let qkv_n = (g.n_q + 2 * g.n_kv) * g.head_dim;
    matmul(ctx, &format!("{} qkv", g.name), qkv_n, g.hidden, m, g.ternary, Store::Overwrite)?;
    matmul(ctx, &format!("{} attn_out", g.name), g.hidden, g.n_q * g.head_dim, m, g.ternary, Store::Add)?;
    gate_up(ctx, &format!("{} gate_up", g.name), g.ffn, g.hidden, m, g.ternary)?;
    matmul(ctx, &format!("{} down", g.name), g.hidden, g.ffn, m, g.ternary, Store::Add)
}

pub(crate) fn random_matrix(ctx: &mut Ctx, n: usize, k: usize, ternary: bool) -> QMatrix {
    if ternary {
        QMatrix::Q2(ctx.rng.q2_matrix(n, k))
    } else {
        QMatrix::Q1(ctx.rng.q1_matrix(n, k))
    }
}

/// Bound of out = silu(g) u from the bounds bg, bu of its two matmul inputs:
/// |d out| <= |silu'(g)| |u| bg + |silu(g)| bu + 12u |out| (silu and the product, see swiglu),
/// with |silu'| <= 1.1; doubled for second-order terms.
pub(crate) fn swiglu_bound(g: f64, u: f64, bg: f64, bu: f64, out: f32) -> f64 {
    let silu = g / (1.0 + (-g).exp());
    2.0 * (1.1 * u.abs() * bg + silu.abs() * bu) + 12.0 * U * out.abs() as f64 + f32::MIN_POSITIVE as f64
}

/// |W|: every weight replaced by its magnitude (Q1: all bits set; Q2: code c -> 1 + |c - 1|).
pub(crate) fn abs_matrix(w: &QMatrix) -> QMatrix {
    match w {
        QMatrix::Q1(q) => QMatrix::Q1(Q1Matrix { bits: vec![u32::MAX; q.bits.len()], ..q.clone() }),
        QMatrix::Q2(q) => {
            let codes = q
                .codes
                .iter()
                .map(|&word| {
                    (0..16).fold(0u32, |acc, j| {
                        let c = (word >> (2 * j)) & 3;
                        let abs_code = 1 + (c as i32 - 1).unsigned_abs();
                        acc | (abs_code << (2 * j))
                    })
                })
                .collect();
            QMatrix::Q2(Q2Matrix { codes, ..q.clone() })
        }
    }
}

/// Rows [r0, r1) of a matrix as a matrix of its own.
fn row_slice(w: &QMatrix, r0: usize, r1: usize) -> QMatrix {
    let gpr = w.k() / GROUP;
    match w {
        QMatrix::Q1(q) => QMatrix::Q1(Q1Matrix {
            n: r1 - r0,
            k: q.k,
            scales: q.scales[r0 * gpr..r1 * gpr].to_vec(),
            bits: q.bits[r0 * gpr * Q1_WORDS..r1 * gpr * Q1_WORDS].to_vec(),
        }),
        QMatrix::Q2(q) => QMatrix::Q2(Q2Matrix {
            n: r1 - r0,
            k: q.k,
            scales: q.scales[r0 * gpr..r1 * gpr].to_vec(),
            codes: q.codes[r0 * gpr * Q2_WORDS..r1 * gpr * Q2_WORDS].to_vec(),
        }),
    }
}

fn reference_matmul(w: &QMatrix, x: &[f32], m: usize, y: &mut [f32], store: Store) -> Result<(), OpError> {
    match w {
        QMatrix::Q1(q) => ops::matmul_q1::reference(q, x, m, y, store),
        QMatrix::Q2(q) => ops::matmul_q2::reference(q, x, m, y, store),
    }
}

/// The reference over row blocks in parallel; `y0` is the initial y (Store::Add).
pub(crate) fn par_reference(w: &QMatrix, x: &[f32], m: usize, y0: &[f32], store: Store) -> Result<Vec<f32>, OpError> {
    let n = w.n();
    let blocks: Vec<(usize, usize)> =
        (0..n).step_by(REFERENCE_ROWS_PER_TASK).map(|r0| (r0, (r0 + REFERENCE_ROWS_PER_TASK).min(n))).collect();
    let parts: Vec<Vec<f32>> = blocks
        .par_iter()
        .map(|&(r0, r1)| {
            let sub = row_slice(w, r0, r1);
            let mut y: Vec<f32> = (0..m).flat_map(|i| y0[i * n + r0..i * n + r1].iter().copied()).collect();
            reference_matmul(&sub, x, m, &mut y, store)?;
            Ok(y)
        })
        .collect::<Result<_, OpError>>()?;
    let mut y = vec![0.0f32; m * n];
    for (&(r0, r1), part) in blocks.iter().zip(&parts) {
        for i in 0..m {
            y[i * n + r0..i * n + r1].copy_from_slice(&part[i * (r1 - r0)..(i + 1) * (r1 - r0)]);
        }
    }
    Ok(y)
}

/// Error bound coefficient on sum_k |w||x| (the bf16 GEMV: on D, see [`bound_magnitude`]) for a
/// kernel variant, doubled for second order.
/// bf16 GEMV (tensor cores, matmul_gemv_tc.cu), per group and token, with D's unit d sum|x|: B holds
/// x (k 0..63) and 4x (k 64..127, where A is 0.75 + 0.25 s), split in three exact bf16 parts
/// (sum of parts <= 1.004 |x|), so sum |A||B| <= 4.02 (Q1) / 7.03 (Q2: planes <= 0.75 and 1)
/// d sum|x|; S = 8 (Q1) / 16 (Q2) mma steps, each off by <= 2u if the unit truncates, + a 4-level
/// internal tree: (2S + 4) u of that: 80.4 / 253; the per-group offset (-3 S2, or 0.5 S - 5.5 S2:
/// sums of 4 values then a 5-level warp tree, 8u each, times the factors, + 1): 25 / 49; adding
/// it to C: 7 / 13; the scale fmaf: 1 / 2; K/128 group adds on at most 1 / 2 d sum|x|; 3 part
/// columns and the quad tree: 3 / 6; up to 16 split partials added in order: 16 / 32.
/// Q1: (K/128 + 133) u; Q2: (2 K/128 + 355) u.
/// Tensor cores (GEMM): weights and the three bf16 parts of x are exact products; within a group 24
/// mma accumulations (+ a 4-level internal tree), each off by <= 2u if the unit truncates: 56u;
/// the scale fmaf u, then K/128 sequential group adds; the split residual (< 2^-27 |x|) is
/// below u/8: (K/128 + 58) u.
/// f16 GEMM: x_k 2^e is exact in f32 and rounds to f16 with |error| <= 2^-11 |x_k| 2^e (normal)
/// or <= 2^-25 (subnormal: the [`f16_floor_term`]); weights (c - 1) d are exact in f16 and the
/// tensor core's f16 products exact in f32. Each output is one chain of K/16 mma, each adding a
/// 4-level tree of 16 products to the accumulator: a product passes <= K/16 + 5 f32 additions,
/// each off by <= 2u if the unit truncates, on operands <= (1 + 2^-11) |w x| 2^e; the final
/// multiply by 2^-e is exact. Coefficient: 2^-11 + 2 (K/16 + 5) u (1 + 2^-11), the accumulation
/// part doubled for second order like the others.
/// Split-K into S non-empty splits of P groups (the last one P or fewer; G = K/128, so
/// P (S - 1) <= G - 1), merged by S - 1 sequential f32 adds in split order: a product passes
/// <= 8P + 5 + S - 1 additions. S = 1 gives 8G + 5 = K/16 + 5; for S >= 2, 8P + S - 1 <=
/// 8 (G - 1)/(S - 1) + S - 1, convex in S, is 8G - 7 at S = 2 and G + 7 <= 8G at S = G (P = 1):
/// within K/16 + 5 for every S, so the coefficient holds unchanged (the 2^-e unscale is applied
/// once, after the merge, and is exact).
/// Binary GEMV (matmul_gemv_b1.cu), on sum|w||x| + the quantization bound Q (each staged value
/// is within s_G / 2 of x, so |sum w s q - sum w x| <= Q, which the caller adds once): per (row,
/// group) sum_k w_k q_k is exact in integers and rounds once to f32 (u), d s_G is exact; a lane
/// adds its (row, group) terms by fmaf, at most K/128 of them (one group per pair, single-group
/// slots included); one shuffle add (u) and up to 16 split partials in order (16u):
/// (K/128 + 18) u, doubled for second order like the others. The multi-token binary GEMV runs
/// the same arithmetic per token (its own planes, sums and finish), so the same bound per token.
pub(crate) fn matmul_coefficient(k: usize, kernel: MatmulKernel, ternary: bool) -> f64 {
    let groups = k as f64 / GROUP as f64;
    if is_f16(kernel) {
        let chain = k as f64 / 16.0 + 5.0;
        return F16_UNIT_ROUNDOFF + 2.0 * 2.0 * U * chain * (1.0 + F16_UNIT_ROUNDOFF);
    }
    2.0 * U * match kernel {
        MatmulKernel::Gemv(GemvKernel::Binary) | MatmulKernel::Gemm(GemmKernel::BinaryTokens) => groups + 18.0,
        MatmulKernel::Gemv(GemvKernel::Bf16x3) if ternary => 2.0 * groups + 355.0,
        MatmulKernel::Gemv(GemvKernel::Bf16x3) => groups + 133.0,
        MatmulKernel::Gemm(GemmKernel::TensorCoreBf16x3) => groups + 58.0,
        MatmulKernel::Gemm(GemmKernel::TensorCoreF16
            | GemmKernel::TensorCoreF16Splits(_)
            | GemmKernel::TensorCoreWgmma
            | GemmKernel::TensorCoreWgmmaTile(_)
            | GemmKernel::TensorCoreSmall) => {
            unreachable!("handled above")
        }
    }
}

/// The f16 GEMM's error from activations that round to f16 subnormals: each is off by <= 2^-25
/// in scaled units, i.e. by 2^-25 2^-e in x units, and 2^-e <= 2^-14 max|x_row| because the
/// pre-pass puts max|x_row| 2^e in [2^14, 2^15) (when e is clamped at 126 instead, the term is
/// below the f32::MIN_POSITIVE every bound adds). So the output is off by at most
/// 2^-39 max|x_row| sum_k |W[n, k]|, doubled to cover its accumulation. Zero for other kernels.
pub(crate) fn f16_floor_term(kernel: MatmulKernel, row_max_abs_x: f32, row_abs_w_sum: f32) -> f64 {
    if !is_f16(kernel) {
        return 0.0;
    }
    2.0 * F16_SUBNORMAL_ROUNDOFF * F16_ROW_SCALE_FLOOR * row_max_abs_x as f64 * row_abs_w_sum as f64
}

/// Whether `kernel` is an f16 GEMM (mma.sync at any split count, or wgmma: the same pre-pass and
/// operands, and each wgmma m64nNk16 adds one k16 product tree per output to its f32
/// accumulator as an mma.sync m16n8k16 does, so the same K/16 + 5 chain; the small-m GEMM too:
/// per split of P groups one chain of 8P steps, or two of 4P (even and odd steps) added once,
/// then the S splits in order, <= 8P + 5 + S - 1 additions, within K/16 + 5 as for split-K).
fn is_f16(kernel: MatmulKernel) -> bool {
    matches!(kernel, MatmulKernel::Gemm(g) if g.is_f16())
}

/// max |x| of each of the m token rows of x.
pub(crate) fn row_max_abs(x: &[f32], k: usize) -> Vec<f32> {
    x.chunks(k).map(|row| row.iter().fold(0.0f32, |a, v| a.max(v.abs()))).collect()
}

/// sum_k |W[n, k]| of every row (the reference of |W| on an all-ones token).
pub(crate) fn row_abs_sums(w: &QMatrix) -> Result<Vec<f32>, OpError> {
    par_reference(&abs_matrix(w), &vec![1.0; w.k()], 1, &vec![0.0; w.n()], Store::Overwrite)
}

/// What the coefficient multiplies: sum|w||x| (`magnitude`), except for the GEMV on Q2 weights:
/// its +-planes and per-group offsets make its error scale with D = sum_groups d sum|x| even
/// where codes are 0 (value 0); D is the magnitude of the matrix with every weight +d (for Q1,
/// D = sum|w||x| already).
pub(crate) fn bound_magnitude(w: &QMatrix, x_abs: &[f32], m: usize, magnitude: &[f32]) -> Result<Vec<f32>, OpError> {
    match w {
        QMatrix::Q2(q) if m <= GEMV_MAX_TOKENS => {
            // Code 2 (value +1) in every 2-bit slot.
            const ALL_PLUS_ONE: u32 = 0xAAAA_AAAA;
            let dense = QMatrix::Q2(Q2Matrix { codes: vec![ALL_PLUS_ONE; q.codes.len()], ..q.clone() });
            par_reference(&dense, x_abs, m, &vec![0.0; magnitude.len()], Store::Overwrite)
        }
        _ => Ok(magnitude.to_vec()),
    }
}

/// Per output: the magnitude the kernel's coefficient multiplies, plus the kernel's additive term
/// (gemv_b1: its quantization bound Q, which also enters the magnitude; others: 0).
fn kernel_magnitude(kernel: MatmulKernel, plain: &[f32], gemv_tc: &[f32], quant: &[f32]) -> (Vec<f64>, Vec<f64>) {
    match kernel {
        MatmulKernel::Gemv(GemvKernel::Binary) | MatmulKernel::Gemm(GemmKernel::BinaryTokens) => (
            plain.iter().zip(quant).map(|(&p, &q)| p as f64 + q as f64).collect(),
            quant.iter().map(|&q| q as f64).collect(),
        ),
        MatmulKernel::Gemv(GemvKernel::Bf16x3) => (gemv_tc.iter().map(|&v| v as f64).collect(), vec![0.0; plain.len()]),
        MatmulKernel::Gemm(_) => (plain.iter().map(|&v| v as f64).collect(), vec![0.0; plain.len()]),
    }
}

fn matmul(ctx: &mut Ctx, label: &str, n: usize, k: usize, m: usize, ternary: bool, store: Store) -> Result<(), VerifyError> {
    let w = random_matrix(ctx, n, k, ternary);
    matmul_with(ctx, label, w, m, store, &kernels_for(ctx, m)?)
}

pub(super) fn matmul_with(
    ctx: &mut Ctx,
    label: &str,
    w: QMatrix,
    m: usize,
    store: Store,
    kernels: &[MatmulKernel],
) -> Result<(), VerifyError> {
    let (n, k, ternary) = (w.n(), w.k(), matches!(w, QMatrix::Q2(_)));
    let x = ctx.rng.activations(m * k, 1.0);
    let y0 = if store == Store::Add { ctx.rng.activations(m * n, 4.0) } else { vec![0.0; m * n] };
    let want = par_reference(&w, &x, m, &y0, store)?;
    let x_abs: Vec<f32> = x.iter().map(|v| v.abs()).collect();
    let plain = par_reference(&abs_matrix(&w), &x_abs, m, &vec![0.0; m * n], Store::Overwrite)?;
    let gemv_tc = bound_magnitude(&w, &x_abs, m, &plain)?;
    let quant = b1_quant_bound_rows(&w, &x, m, kernels)?;
    let (x_max, w_sums) = (row_max_abs(&x, k), row_abs_sums(&w)?);
    let dw = DeviceQMatrix::upload(&ctx.stream, &w)?;
    let xd = upload(&ctx.stream, &x)?;
    let op = format!("matmul_{}{}", if ternary { "q2" } else { "q1" }, if store == Store::Add { "_add" } else { "" });
    let epilogue = if store == Store::Add { Epilogue::Add } else { Epilogue::Store };
    for &kernel in kernels {
        let mut yd = if store == Store::Add { upload(&ctx.stream, &y0)? } else { poisoned(&ctx.stream, m * n)? };
        run_kernel(ctx, kernel, &dw, &xd, None, m, &mut yd, epilogue)?;
        let got = download(&ctx.stream, &yd)?;
        let c = matmul_coefficient(k, kernel, ternary);
        let (magnitude, additive) = kernel_magnitude(kernel, &plain, &gemv_tc, &quant);
        // Plus the reference's own rounding and, for Store::Add, the final add: 2u |y|.
        let cmp = Comparison::of(&got, &want, |i| {
            c * magnitude[i]
                + additive[i]
                + f16_floor_term(kernel, x_max[i / n], w_sums[i % n])
                + 2.0 * U * (want[i].abs() + y0[i].abs()) as f64
                + f32::MIN_POSITIVE as f64
        });
        ctx.record(&op, &format!("{label} N={n} K={k} m={m} {}", kernel_label(kernel)), cmp);
    }
    Ok(())
}

fn gate_up(ctx: &mut Ctx, label: &str, f: usize, k: usize, m: usize, ternary: bool) -> Result<(), VerifyError> {
    let w = random_matrix(ctx, 2 * f, k, ternary);
    gate_up_with(ctx, label, w, m, &kernels_for(ctx, m)?)
}

/// `w`: the gate|up matrix, 2F rows.
pub(super) fn gate_up_with(
    ctx: &mut Ctx,
    label: &str,
    w: QMatrix,
    m: usize,
    kernels: &[MatmulKernel],
) -> Result<(), VerifyError> {
    let (f, k, ternary) = (w.n() / 2, w.k(), matches!(w, QMatrix::Q2(_)));
    let x = ctx.rng.activations(m * k, 1.0);
    let zeros = vec![0.0; m * 2 * f];
    let gu = par_reference(&w, &x, m, &zeros, Store::Overwrite)?;
    let x_abs: Vec<f32> = x.iter().map(|v| v.abs()).collect();
    let plain = par_reference(&abs_matrix(&w), &x_abs, m, &zeros, Store::Overwrite)?;
    let gemv_tc = bound_magnitude(&w, &x_abs, m, &plain)?;
    let quant = b1_quant_bound_rows(&w, &x, m, kernels)?;
    let mut want = vec![0.0f32; m * f];
    want.par_chunks_mut(f).enumerate().try_for_each(|(i, out)| match &w {
        QMatrix::Q1(q) => ops::gate_up_swiglu_q1::reference(q, &x[i * k..(i + 1) * k], 1, out),
        QMatrix::Q2(q) => ops::gate_up_swiglu_q2::reference(q, &x[i * k..(i + 1) * k], 1, out),
    })?;
    let (x_max, w_sums) = (row_max_abs(&x, k), row_abs_sums(&w)?);
    let dw = DeviceQMatrix::upload(&ctx.stream, &w)?;
    let xd = upload(&ctx.stream, &x)?;
    let op = format!("gate_up_swiglu_{}", if ternary { "q2" } else { "q1" });
    for &kernel in kernels {
        let mut od = poisoned(&ctx.stream, m * f)?;
        run_kernel(ctx, kernel, &dw, &xd, None, m, &mut od, Epilogue::SwiGlu)?;
        let got = download(&ctx.stream, &od)?;
        // out = silu(g) u: |d out| <= |silu'(g)| |u| Bg + |silu(g)| Bu + 12u |out| (silu and the
        // product, see swiglu), with |silu'| <= 1.1 and Bg, Bu the matmul bounds of g and u.
        let c = matmul_coefficient(k, kernel, ternary);
        let (magnitude, additive) = kernel_magnitude(kernel, &plain, &gemv_tc, &quant);
        let bound = |idx: usize| {
            let (i, j) = (idx / f, idx % f);
            let (gi, ui) = (i * 2 * f + j, i * 2 * f + f + j);
            let (g, u) = (gu[gi] as f64, gu[ui] as f64);
            let bg = c * magnitude[gi] + additive[gi] + f16_floor_term(kernel, x_max[i], w_sums[j]) + 2.0 * U * g.abs();
            let bu = c * magnitude[ui] + additive[ui] + f16_floor_term(kernel, x_max[i], w_sums[f + j]) + 2.0 * U * u.abs();
            swiglu_bound(g, u, bg, bu, want[idx])
        };
        let cmp = Comparison::of(&got, &want, bound);
        ctx.record(&op, &format!("{label} F={f} K={k} m={m} {}", kernel_label(kernel)), cmp);
    }
    Ok(())
}

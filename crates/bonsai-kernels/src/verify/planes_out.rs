//! Checks of the binary GEMV's planes epilogue (`gemv_from_planes` with a [`PlanesOut`]): the
//! CTAs that complete a 128-group of y quantize it for the next GEMV, instead of a separate
//! `gemv_b1_prepare` launch on y.
//!
//! Both quantize the same stored floats with the same device function (b1_prepare_group), so the
//! required result is bit-identity, tolerance 0: y against the same GEMV without the epilogue, and
//! the planes (planes, (s, X), sums of squares) against `prepare_planes_normed` of that y with the
//! same norm weights. Each case runs twice on one output buffer, so staging words left set by the
//! first launch would show in the second (and are checked clear after each). The tiles GEMV's y
//! (`*_gemv_b1_tiles`, the many-wave Store GEMV) must be bit-identical to the plain one's. And the decode step's first launch (`embed_prepare_planes`: an embedding row and
//! its planes at once) must equal `embed_rows` then `prepare_planes_normed`, bit for bit, x and
//! planes, for a row in the table and for an id past it (a NaN row).
//!
//! The rotation epilogue (`*_gemv_b1_rot`, [`PlanesEpilogue::Rotate`]) is checked the same way
//! against the two launches it replaces, the SwiGLU GEMV without epilogue and
//! `hadamard_rotate_planes` on its y: it runs that kernel's arithmetic in its order (the signs
//! and the scale as rounded products, the same butterflies, b1_prepare_group), so tolerance 0
//! for y, the planes, (s, X), the sums of squares, and the rotated row where it is written.
//! With norm weights (the residual-adding GEMV before a normed folded input) the planes hold the
//! rotation of y ⊙ w and y's own sums of squares, and the next GEMV applies 1 / rms(y): that
//! GEMV's output is checked against the f64 definition W · BlockH(s ⊙ rmsnorm(y)) with the bound
//! derived at [`check_rotate_normed`] (y itself still bit for bit).


use super::attention_planes::{floats_identical, planes_words, words_equal};
use super::gpu::{download, poisoned, upload, DeviceQMatrix};
use super::shapes::ShapeSet;
use super::matmul::{abs_matrix, b1_quant_bound, matmul_coefficient, par_reference, MatmulKernel};
use super::{Comparison, Ctx, VerifyError, F32_UNIT_ROUNDOFF as U};
use crate::launch::matmul::GemvKernel;
use crate::ops::Store;
use crate::launch::embed_rows::embed_rows;
use crate::launch::hadamard::{rotate_planes, MAX_BLOCK};
use crate::launch::matmul::{
    embed_prepare_planes, gemv_from_planes, prepare_planes_normed, B1Planes, Epilogue,
    PlanesEpilogue, PlanesOut, RotateOut, TilesChoice,
};
use crate::weights::QMatrix;

/// Inputs and norm weights are drawn from [-RANGE, RANGE].
const INPUT_RANGE: f32 = 2.0;
const EPS: f32 = 1e-6;
/// (outputs, K, epilogue): every epilogue at small shapes, a CTA range that straddles groups
/// (SwiGLU: 12 tiles x 8 features per CTA at F = 12288), and Bonsai-8B's decode shapes.
const SMALL_CASES: [(usize, usize, Epilogue); 4] =
    [(256, 256, Epilogue::Store), (384, 512, Epilogue::Add), (640, 256, Epilogue::SwiGlu), (1152, 384, Epilogue::SwiGlu)];
const EIGHT_B_CASES: [(usize, usize, Epilogue); 3] =
    [(4096, 4096, Epilogue::Add), (12288, 4096, Epilogue::SwiGlu), (4096, 12288, Epilogue::Add)];

/// The tiles GEMV (`*_gemv_b1_tiles`) against the plain Store GEMV, tolerance 0 (same unit
/// order, same finish, same store arithmetic; it runs only where the plain grid has one K split):
/// single- and 4-group layout blocks at several waves of plain CTAs (40,000 outputs: 157 CTAs of
/// 16 tiles), one wave (forced by [`TilesChoice::Always`]), the Bonsai LM head.
const TILES_SMALL_CASES: [(usize, usize); 3] = [(40_000, 256), (3001, 512), (40_000, 512)];
const TILES_LM_HEAD: (usize, usize) = (151_669, 4096);
/// (features, K, Hadamard block, rotated row written) of the rotation epilogue: blocks of one
/// group, of several groups over fewer CTA warps than groups (the loop), several blocks finished
/// by one CTA, the widest block (groups past 8 registers: shuffles across lanes), and Bonsai 2
/// 27B's ffn_down input (gate|up of 17408 features over K = 5120, block 1024), at small shapes too.
const ROTATE_CASES: [(usize, usize, usize, bool); 5] = [
    (384, 256, 128, true),
    (2048, 512, 1024, false),
    (1024, 256, 256, true),
    (MAX_BLOCK, 256, MAX_BLOCK, true),
    (17408, 5120, 1024, true),
];

/// (hidden width, producer K, Hadamard block, consumer outputs) of the normed rotation epilogue
/// (an Add GEMV writing the rotated normed row's planes for a GEMV that applies 1 / rms): one-group
/// and several-group blocks, and Bonsai 2 27B's post-attention input (the 6144-wide output
/// projection into the 5120 hidden, block 1024; the consumer a slice of gate|up's rows).
const ROTATE_NORMED_CASES: [(usize, usize, usize, usize); 3] = [(256, 256, 128, 96), (2048, 512, 1024, 256), (5120, 6144, 1024, 512)];

/// (vocab, hidden) of the embedding tables for `embed_prepare_planes`.
const EMBED_SMALL: (usize, usize) = (300, 256);
const EMBED_8B: (usize, usize) = (2000, 4096);

pub(crate) fn run_all(ctx: &mut Ctx, set: ShapeSet) -> Result<(), VerifyError> {
    let mut cases = SMALL_CASES.to_vec();
    let mut tiles_cases = TILES_SMALL_CASES.to_vec();
    if set == ShapeSet::All {
        cases.extend(EIGHT_B_CASES);
        tiles_cases.push(TILES_LM_HEAD);
    }
    let embed_cases = if set == ShapeSet::All { vec![EMBED_SMALL, EMBED_8B] } else { vec![EMBED_SMALL] };
    for bits in [1u8, 2] {
        for normed in [false, true] {
            for &(vocab, k) in &embed_cases {
                check_embed(ctx, vocab, k, bits, normed)?;
            }
            for &(n_out, k, epilogue) in &cases {
                check(ctx, n_out, k, epilogue, bits, normed)?;
            }
            for &(n_out, k) in &tiles_cases {
                check_tiles(ctx, n_out, k, bits, normed)?;
            }
            for &(n_out, k, block, keep_rot) in &ROTATE_CASES {
                check_rotate(ctx, n_out, k, block, bits, normed, keep_rot)?;
            }
        }
        for &(width, k, block, consumer_rows) in &ROTATE_NORMED_CASES {
            check_rotate_normed(ctx, width, k, block, consumer_rows, bits)?;
        }
    }
    Ok(())
}

/// The blockwise transform of ops::hadamard in f64 (forward, no permutation): `(v · s) / sqrt(n)`
/// then the butterflies, per block of `block`.
fn rotate_f64(v: &[f64], signs: &[f32], block: usize) -> Vec<f64> {
    let scale = 1.0 / (block as f64).sqrt();
    let mut out: Vec<f64> = v.iter().zip(signs).map(|(&a, &s)| a * s as f64 * scale).collect();
    for b in out.chunks_mut(block) {
        let mut len = 1;
        while len < block {
            for i in (0..block).filter(|i| i & len == 0) {
                let (a, c) = (b[i], b[i + len]);
                b[i] = a + c;
                b[i + len] = a - c;
            }
            len <<= 1;
        }
    }
    out
}

/// The Add GEMV with the normed rotation epilogue, then a Store GEMV on its planes applying
/// 1 / rms (`norm_eps`): the residual y bit for bit against the plain Add GEMV, the staging words
/// cleared, and the consumer's z against z* = Wc · a, a = BlockH(s ⊙ y ⊙ w / rms(y)) in f64.
///
/// Bound on |z - z*| per output j. The consumer is the fused-norm binary GEMV (norm_matmul's
/// check) whose staged row is r~, the kernel's f32 rotation of y ⊙ w, instead of the exact
/// r = BlockH(s ⊙ y ⊙ w) (a = ρ r, ρ = 1 / rms(y)):
///  - r~ - r: the product y·w rounds (u relative), which H (entries ±1/sqrt(n)) carries as
///    u Σ_block|y w| / sqrt(n); the two products with s and 1/sqrt(n) and the log2(n) butterfly
///    stages on those inputs add γ_L (1 + u) Σ_block|y w| / sqrt(n) + 2u |r| (ops/hadamard/mod.rs:
///    the transform's own bound): e_k = (u + γ_L (1 + u)) Σ_block|y w| / sqrt(n) + 2u |r_k|, which
///    moves z by ρ Σ_k |Wc_jk| e_k.
///  - quantization of r~ (<= s_G / 2 per value, the step of the group's max |r~| <= |r| + e), times
///    ρ: ρ b1_quant_bound(Wc, |r| + e).
///  - the GEMV's accumulation and its 1 / rms from the groups' sums of squares of y (a depth of at
///    most k/128 + 24 additions, as norm_matmul's kernel: rel_n = 2 (W/32 + 24) u) on the magnitude
///    Σ|Wc||a| plus the two terms above: (matmul_coefficient(W) + rel_n) times that sum.
///  - the reference's own rounding of a to f32 and of z* (2u |z*|), and ρ rounded up by 2^-20.
fn check_rotate_normed(ctx: &mut Ctx, width: usize, k: usize, block: usize, consumer_rows: usize, bits: u8) -> Result<(), VerifyError> {
    const EPS_NORM: f32 = 1e-6;
    let matrix = |ctx: &mut Ctx, n: usize, k: usize| if bits == 1 { QMatrix::Q1(ctx.rng.q1_matrix(n, k)) } else { QMatrix::Q2(ctx.rng.q2_matrix(n, k)) };
    let (w, wc) = (matrix(ctx, width, k), matrix(ctx, consumer_rows, width));
    let (wd, wcd) = (DeviceQMatrix::upload(&ctx.stream, &w)?, DeviceQMatrix::upload(&ctx.stream, &wc)?);
    let signs: Vec<f32> = (0..width).map(|_| if ctx.rng.next_u32() & 1 == 0 { 1.0 } else { -1.0 }).collect();
    let norm: Vec<f32> = (0..width).map(|_| ctx.rng.range(0.5, 1.5)).collect();
    let (signs_d, norm_d) = (upload(&ctx.stream, &signs)?, upload(&ctx.stream, &norm)?);
    let mut out = B1Planes::new(&ctx.stream, width)?;
    for launch in 1..=2 {
        let x = upload(&ctx.stream, &ctx.rng.activations(k, INPUT_RANGE))?;
        let mut planes = B1Planes::new(&ctx.stream, k)?;
        prepare_planes_normed(ctx.gpu(), &x, None, &mut planes)?;
        let residual = ctx.rng.activations(width, INPUT_RANGE);
        let mut y_plain = upload(&ctx.stream, &residual)?;
        gemv_from_planes(ctx.gpu(), &wd.view(), &planes, None, &mut y_plain, Epilogue::Add, PlanesEpilogue::None, TilesChoice::Auto)?;
        let mut y = upload(&ctx.stream, &residual)?;
        let dst = RotateOut { planes: &mut out, signs: &signs_d, norm: Some(&norm_d), block, rot: None };
        gemv_from_planes(ctx.gpu(), &wd.view(), &planes, None, &mut y, Epilogue::Add, PlanesEpilogue::Rotate(dst), TilesChoice::Auto)?;
        let mut z = poisoned(&ctx.stream, consumer_rows)?;
        let norm_eps = Some(EPS_NORM);
        gemv_from_planes(ctx.gpu(), &wcd.view(), &out, norm_eps, &mut z, Epilogue::Store, PlanesEpilogue::None, TilesChoice::Never)?;

        let label = format!("q{bits} W={width} K={k} n={block} -> {consumer_rows} launch {launch}");
        let (got_y, want_y) = (download(&ctx.stream, &y)?, download(&ctx.stream, &y_plain)?);
        ctx.record("rotate_out normed", &format!("{label} y"), floats_identical(&got_y, &want_y));
        let staged = out.staged_words().map(|c| download(&ctx.stream, c)).transpose()?.unwrap_or_default();
        let (staged, zeros) = (staged.iter().map(|&w| u32::from(w != 0)).collect::<Vec<_>>(), vec![0u32; width]);
        ctx.record("rotate_out normed", &format!("{label} staging words cleared"), words_equal(&staged, &zeros));

        // The definition and the bound's terms, from the y both paths produced.
        let yw: Vec<f64> = want_y.iter().zip(&norm).map(|(&a, &b)| a as f64 * b as f64).collect();
        let rho = 1.0 / (want_y.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / width as f64 + EPS_NORM as f64).sqrt();
        let r = rotate_f64(&yw, &signs, block);
        let stages = block.trailing_zeros() as f64;
        let gamma_l = stages * U / (1.0 - stages * U);
        let e: Vec<f64> = yw
            .chunks(block)
            .zip(r.chunks(block))
            .flat_map(|(ywb, rb)| {
                let spread = (U + gamma_l * (1.0 + U)) * ywb.iter().map(|v| v.abs()).sum::<f64>() / (block as f64).sqrt();
                rb.iter().map(move |&v| spread + 2.0 * U * v.abs()).collect::<Vec<_>>()
            })
            .collect();
        let a: Vec<f32> = r.iter().map(|&v| (v * rho) as f32).collect();
        let zeros = vec![0.0f32; consumer_rows];
        let lin = par_reference(&wc, &a, 1, &zeros, Store::Overwrite)?;
        let abs_wc = abs_matrix(&wc);
        let a_abs: Vec<f32> = a.iter().map(|v| v.abs()).collect();
        let plain = par_reference(&abs_wc, &a_abs, 1, &zeros, Store::Overwrite)?;
        let e32: Vec<f32> = e.iter().map(|&v| v as f32).collect();
        let rot_err = par_reference(&abs_wc, &e32, 1, &zeros, Store::Overwrite)?;
        let r_hi: Vec<f32> = r.iter().zip(&e).map(|(&v, &d)| (v.abs() + d) as f32).collect();
        let quant = b1_quant_bound(&wc, &r_hi)?;
        let rho_up = rho * (1.0 + 1.0 / 1_048_576.0);
        let rel_n = 2.0 * (width as f64 / 32.0 + 24.0) * U;
        let c = matmul_coefficient(width, MatmulKernel::Gemv(GemvKernel::Binary), bits == 2) + rel_n;
        let got_z = download(&ctx.stream, &z)?;
        let cmp = Comparison::of(&got_z, &lin, |j| {
            let (q, re) = (rho_up * quant[j] as f64, rho_up * rot_err[j] as f64 * (1.0 + 4.0 * U));
            c * (plain[j] as f64 + q + re) + q + re + 2.0 * U * lin[j].abs() as f64 + f32::MIN_POSITIVE as f64
        });
        ctx.record("rotate_out normed", &format!("{label} next GEMV vs f64"), cmp);
    }
    Ok(())
}

/// The SwiGLU GEMV with the rotation epilogue against the same GEMV without it followed by
/// `rotate_planes` of its y: y, planes (with (s, X) and sums of squares), the rotated row (when
/// written) and the staging words cleared, bit for bit, twice on one output buffer.
fn check_rotate(ctx: &mut Ctx, n_out: usize, k: usize, block: usize, bits: u8, normed: bool, keep_rot: bool) -> Result<(), VerifyError> {
    let q = if bits == 1 { QMatrix::Q1(ctx.rng.q1_matrix(2 * n_out, k)) } else { QMatrix::Q2(ctx.rng.q2_matrix(2 * n_out, k)) };
    let w = DeviceQMatrix::upload(&ctx.stream, &q)?;
    let signs: Vec<f32> = (0..n_out).map(|_| if ctx.rng.next_u32() & 1 == 0 { 1.0 } else { -1.0 }).collect();
    let signs = upload(&ctx.stream, &signs)?;
    let in_norm = upload(&ctx.stream, &ctx.rng.activations(k, INPUT_RANGE))?;
    let in_eps = normed.then_some(EPS);
    let mut out = B1Planes::new(&ctx.stream, n_out)?;
    for launch in 1..=2 {
        let x = upload(&ctx.stream, &ctx.rng.activations(k, INPUT_RANGE))?;
        let mut planes = B1Planes::new(&ctx.stream, k)?;
        prepare_planes_normed(ctx.gpu(), &x, normed.then_some(&in_norm), &mut planes)?;
        // The two launches.
        let mut y_plain = poisoned(&ctx.stream, n_out)?;
        gemv_from_planes(ctx.gpu(), &w.view(), &planes, in_eps, &mut y_plain, Epilogue::SwiGlu, PlanesEpilogue::None, TilesChoice::Auto)?;
        let mut rot_want = poisoned(&ctx.stream, n_out)?;
        let mut want = B1Planes::new(&ctx.stream, n_out)?;
        rotate_planes(ctx.gpu(), &y_plain, None, &signs, n_out, block, None, Some(&mut rot_want), &mut want)?;
        // The fused launch, over planes holding the previous launch's (every word rewritten).
        let mut y = poisoned(&ctx.stream, n_out)?;
        let mut rot = poisoned(&ctx.stream, n_out)?;
        let dst = RotateOut { planes: &mut out, signs: &signs, norm: None, block, rot: keep_rot.then_some(&mut rot) };
        gemv_from_planes(ctx.gpu(), &w.view(), &planes, in_eps, &mut y, Epilogue::SwiGlu, PlanesEpilogue::Rotate(dst), TilesChoice::Auto)?;

        let label = format!(
            "q{bits} F={n_out} K={k} n={block}{}{} launch {launch}",
            if normed { " normed" } else { "" },
            if keep_rot { " +row" } else { "" }
        );
        let (got_y, want_y) = (download(&ctx.stream, &y)?, download(&ctx.stream, &y_plain)?);
        ctx.record("rotate_out", &format!("{label} y"), floats_identical(&got_y, &want_y));
        let (got, want) = (planes_words(ctx, &out)?, planes_words(ctx, &want)?);
        ctx.record("rotate_out", &format!("{label} planes"), words_equal(&got, &want));
        if keep_rot {
            let (got, want) = (download(&ctx.stream, &rot)?, download(&ctx.stream, &rot_want)?);
            ctx.record("rotate_out", &format!("{label} rotated row"), floats_identical(&got, &want));
        }
        let staged = out.staged_words().map(|c| download(&ctx.stream, c)).transpose()?.unwrap_or_default();
        let (staged, zeros) = (staged.iter().map(|&w| u32::from(w != 0)).collect::<Vec<_>>(), vec![0u32; n_out]);
        ctx.record("rotate_out", &format!("{label} staging words cleared"), words_equal(&staged, &zeros));
    }
    Ok(())
}

fn check_embed(ctx: &mut Ctx, vocab: usize, k: usize, bits: u8, normed: bool) -> Result<(), VerifyError> {
    let q = if bits == 1 { QMatrix::Q1(ctx.rng.q1_matrix(vocab, k)) } else { QMatrix::Q2(ctx.rng.q2_matrix(vocab, k)) };
    let table = DeviceQMatrix::upload(&ctx.stream, &q)?;
    let norm = upload(&ctx.stream, &ctx.rng.activations(k, INPUT_RANGE))?;
    let norm = normed.then_some(&norm);
    let in_table = (ctx.rng.next_u64() % vocab as u64) as u32;
    for id in [in_table, vocab as u32] {
        let ids = upload(&ctx.stream, &[id])?;
        let mut x_want = poisoned(&ctx.stream, k)?;
        embed_rows(ctx.gpu(), &table.view(), &ids, 1, &mut x_want)?;
        let mut want = B1Planes::new(&ctx.stream, k)?;
        prepare_planes_normed(ctx.gpu(), &x_want, norm, &mut want)?;
        let mut x = poisoned(&ctx.stream, k)?;
        let mut got = B1Planes::new(&ctx.stream, k)?;
        embed_prepare_planes(ctx.gpu(), &table.view(), &ids, norm, &mut x, &mut got)?;
        let which = if id == in_table { "row" } else { "id past the table" };
        let label = format!("q{bits} vocab={vocab} K={k}{} {which}", if normed { " normed" } else { "" });
        let bits_of = |v: Vec<f32>| v.iter().map(|f| f.to_bits()).collect::<Vec<u32>>();
        let (got_x, want_x) = (bits_of(download(&ctx.stream, &x)?), bits_of(download(&ctx.stream, &x_want)?));
        ctx.record("embed_planes", &format!("{label} x"), words_equal(&got_x, &want_x));
        let (got, want) = (planes_words(ctx, &got)?, planes_words(ctx, &want)?);
        ctx.record("embed_planes", &format!("{label} planes"), words_equal(&got, &want));
    }
    Ok(())
}

fn check_tiles(ctx: &mut Ctx, n_out: usize, k: usize, bits: u8, normed: bool) -> Result<(), VerifyError> {
    let q = if bits == 1 { QMatrix::Q1(ctx.rng.q1_matrix(n_out, k)) } else { QMatrix::Q2(ctx.rng.q2_matrix(n_out, k)) };
    let w = DeviceQMatrix::upload(&ctx.stream, &q)?;
    let in_norm = upload(&ctx.stream, &ctx.rng.activations(k, INPUT_RANGE))?;
    let x = upload(&ctx.stream, &ctx.rng.activations(k, INPUT_RANGE))?;
    let mut planes = B1Planes::new(&ctx.stream, k)?;
    prepare_planes_normed(ctx.gpu(), &x, normed.then_some(&in_norm), &mut planes)?;
    let in_eps = normed.then_some(EPS);
    let run = |tiles: TilesChoice| -> Result<Vec<f32>, VerifyError> {
        let mut y = poisoned(&ctx.stream, n_out)?;
        gemv_from_planes(ctx.gpu(), &w.view(), &planes, in_eps, &mut y, Epilogue::Store, PlanesEpilogue::None, tiles)?;
        download(&ctx.stream, &y)
    };
    let (want, got) = (run(TilesChoice::Never)?, run(TilesChoice::Always)?);
    let label = format!("q{bits} N={n_out} K={k}{}", if normed { " normed" } else { "" });
    ctx.record("gemv_b1_tiles = gemv_b1", &label, Comparison::of(&got, &want, |_| 0.0));
    Ok(())
}

fn check(ctx: &mut Ctx, n_out: usize, k: usize, epilogue: Epilogue, bits: u8, normed: bool) -> Result<(), VerifyError> {
    let rows = if epilogue == Epilogue::SwiGlu { 2 * n_out } else { n_out };
    let q = if bits == 1 { QMatrix::Q1(ctx.rng.q1_matrix(rows, k)) } else { QMatrix::Q2(ctx.rng.q2_matrix(rows, k)) };
    let w = DeviceQMatrix::upload(&ctx.stream, &q)?;
    let norm = upload(&ctx.stream, &ctx.rng.activations(n_out, INPUT_RANGE))?;
    // `normed`: the GEMV's own input carries RMSNorm weights too (1 / rms from its planes).
    let in_norm = upload(&ctx.stream, &ctx.rng.activations(k, INPUT_RANGE))?;
    let in_eps = normed.then_some(EPS);
    let mut out = B1Planes::new(&ctx.stream, n_out)?;
    for launch in 1..=2 {
        let x = upload(&ctx.stream, &ctx.rng.activations(k, INPUT_RANGE))?;
        let mut planes = B1Planes::new(&ctx.stream, k)?;
        prepare_planes_normed(ctx.gpu(), &x, normed.then_some(&in_norm), &mut planes)?;
        let residual = ctx.rng.activations(n_out, INPUT_RANGE);
        let start = |ctx: &Ctx| -> Result<_, VerifyError> {
            Ok(if epilogue == Epilogue::Add { upload(&ctx.stream, &residual)? } else { poisoned(&ctx.stream, n_out)? })
        };
        let mut y_plain = start(ctx)?;
        gemv_from_planes(ctx.gpu(), &w.view(), &planes, in_eps, &mut y_plain, epilogue, PlanesEpilogue::None, TilesChoice::Auto)?;
        let mut y = start(ctx)?;
        let dst = PlanesOut { planes: &mut out, norm: normed.then_some(&norm) };
        gemv_from_planes(ctx.gpu(), &w.view(), &planes, in_eps, &mut y, epilogue, PlanesEpilogue::Planes(dst), TilesChoice::Auto)?;
        let mut want = B1Planes::new(&ctx.stream, n_out)?;
        prepare_planes_normed(ctx.gpu(), &y_plain, normed.then_some(&norm), &mut want)?;

        let label = format!("{epilogue:?} q{bits} N={n_out} K={k}{} launch {launch}", if normed { " normed" } else { "" });
        let (got_y, want_y) = (download(&ctx.stream, &y)?, download(&ctx.stream, &y_plain)?);
        ctx.record("planes_out", &format!("{label} y"), Comparison::of(&got_y, &want_y, |_| 0.0));
        let (got, want) = (planes_words(ctx, &out)?, planes_words(ctx, &want)?);
        ctx.record("planes_out", &format!("{label} planes"), words_equal(&got, &want));
        let staged = out.staged_words().map(|c| download(&ctx.stream, c)).transpose()?.unwrap_or_default();
        let (staged, zeros) = (staged.iter().map(|&w| u32::from(w != 0)).collect::<Vec<_>>(), vec![0u32; n_out]);
        ctx.record("planes_out", &format!("{label} staging words cleared"), words_equal(&staged, &zeros));
    }
    Ok(())
}

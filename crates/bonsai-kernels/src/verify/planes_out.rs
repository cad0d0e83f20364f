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
//! Two Store GEMVs on one set of planes in one launch (`gemv_pair_from_planes`, a mixer's two
//! projections) are checked against the f64 reference within the binary GEMV's bound (the pair's
//! grid may split K differently from each matrix's own launch, so not bit for bit): both
//! matrices' outputs, including a first matrix whose rows end inside a tile.


use super::attention_planes::{planes_words, words_equal};
use super::gpu::{download, poisoned, upload, DeviceQMatrix};
use super::shapes::ShapeSet;
use super::{Comparison, Ctx, VerifyError};
use crate::launch::embed_rows::embed_rows;
use super::matmul::{abs_matrix, b1_quant_bound, matmul_coefficient, par_reference, random_matrix, MatmulKernel};
use super::F32_UNIT_ROUNDOFF as U;
use crate::launch::matmul::{
    embed_prepare_planes, gemv_from_planes, gemv_pair_fits, gemv_pair_from_planes, prepare_planes_normed, B1Planes, Epilogue,
    GemvKernel, PlanesEpilogue, PlanesOut, TilesChoice,
};
use crate::launch::QuantBits;
use crate::ops::Store;
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
/// (first outputs, second outputs, K) of the GEMV pairs: tiles per CTA dividing 40 first tiles,
/// a first matrix ending inside its 13th tile; then the Bonsai 2 27B mixers' shapes (DeltaNet
/// qkv | z, attention qkv | gate).
const PAIR_SMALL_CASES: [(usize, usize, usize); 2] = [(640, 384, 256), (200, 72, 512)];
const PAIR_27B_CASES: [(usize, usize, usize); 2] = [(10240, 6144, 5120), (8192, 6144, 5120)];
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
    let mut pair_cases = PAIR_SMALL_CASES.to_vec();
    if set == ShapeSet::All {
        pair_cases.extend(PAIR_27B_CASES);
    }
    for bits in [1u8, 2] {
        for &(n_first, n_second, k) in &pair_cases {
            check_pair(ctx, n_first, n_second, k, bits)?;
        }
        for normed in [false, true] {
            for &(vocab, k) in &embed_cases {
                check_embed(ctx, vocab, k, bits, normed)?;
            }
            for &(n_out, k, epilogue) in &cases {
                // 2, 3 and 7 tokens: the multi-token GEMV's `_out` entry points of 2, 4 and 8 tokens (a batched step's planes).
                for tokens in [1, 2, 3, 7] {
                    check(ctx, n_out, k, epilogue, bits, normed, tokens)?;
                }
            }
            for &(n_out, k) in &tiles_cases {
                check_tiles(ctx, n_out, k, bits, normed)?;
            }
        }
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

/// `tokens` rows of x and y (planes of that many rows: the multi-token GEMV past one).
#[allow(clippy::too_many_arguments)]
fn check(ctx: &mut Ctx, n_out: usize, k: usize, epilogue: Epilogue, bits: u8, normed: bool, tokens: usize) -> Result<(), VerifyError> {
    let rows = if epilogue == Epilogue::SwiGlu { 2 * n_out } else { n_out };
    let q = if bits == 1 { QMatrix::Q1(ctx.rng.q1_matrix(rows, k)) } else { QMatrix::Q2(ctx.rng.q2_matrix(rows, k)) };
    let w = DeviceQMatrix::upload(&ctx.stream, &q)?;
    let norm = upload(&ctx.stream, &ctx.rng.activations(n_out, INPUT_RANGE))?;
    // `normed`: the GEMV's own input carries RMSNorm weights too (1 / rms from its planes).
    let in_norm = upload(&ctx.stream, &ctx.rng.activations(k, INPUT_RANGE))?;
    let in_eps = normed.then_some(EPS);
    let mut out = B1Planes::new_rows(&ctx.stream, n_out, tokens)?;
    for launch in 1..=2 {
        let x = upload(&ctx.stream, &ctx.rng.activations(tokens * k, INPUT_RANGE))?;
        let mut planes = B1Planes::new_rows(&ctx.stream, k, tokens)?;
        prepare_planes_normed(ctx.gpu(), &x, normed.then_some(&in_norm), &mut planes)?;
        let residual = ctx.rng.activations(tokens * n_out, INPUT_RANGE);
        let start = |ctx: &Ctx| -> Result<_, VerifyError> {
            Ok(if epilogue == Epilogue::Add { upload(&ctx.stream, &residual)? } else { poisoned(&ctx.stream, tokens * n_out)? })
        };
        let mut y_plain = start(ctx)?;
        gemv_from_planes(ctx.gpu(), &w.view(), &planes, in_eps, &mut y_plain, epilogue, PlanesEpilogue::None, TilesChoice::Auto)?;
        let mut y = start(ctx)?;
        let dst = PlanesOut { planes: &mut out, norm: normed.then_some(&norm) };
        gemv_from_planes(ctx.gpu(), &w.view(), &planes, in_eps, &mut y, epilogue, PlanesEpilogue::Planes(dst), TilesChoice::Auto)?;
        let mut want = B1Planes::new_rows(&ctx.stream, n_out, tokens)?;
        prepare_planes_normed(ctx.gpu(), &y_plain, normed.then_some(&norm), &mut want)?;

        let m = if tokens > 1 { format!(" m={tokens}") } else { String::new() };
        let label = format!("{epilogue:?} q{bits} N={n_out} K={k}{m}{} launch {launch}", if normed { " normed" } else { "" });
        let (got_y, want_y) = (download(&ctx.stream, &y)?, download(&ctx.stream, &y_plain)?);
        ctx.record("planes_out", &format!("{label} y"), Comparison::of(&got_y, &want_y, |_| 0.0));
        let (got, want) = (planes_words(ctx, &out)?, planes_words(ctx, &want)?);
        ctx.record("planes_out", &format!("{label} planes"), words_equal(&got, &want));
        let staged = out.staged_words().map(|c| download(&ctx.stream, c)).transpose()?.unwrap_or_default();
        let (staged, zeros) = (staged.iter().map(|&w| u32::from(w != 0)).collect::<Vec<_>>(), vec![0u32; tokens * n_out]);
        ctx.record("planes_out", &format!("{label} staging words cleared"), words_equal(&staged, &zeros));
    }
    Ok(())
}

fn check_pair(ctx: &mut Ctx, n_first: usize, n_second: usize, k: usize, bits: u8) -> Result<(), VerifyError> {
    let label = format!("q{bits} N={n_first}+{n_second} K={k}");
    let quant_bits = if bits == 1 { QuantBits::One } else { QuantBits::Two };
    if !gemv_pair_fits(ctx.gpu(), quant_bits, k, n_first, n_second)? {
        // The plan then launches the two GEMVs apart; nothing to check on this device.
        println!("gemv pair {label}: no one-wave pair grid on this device, skipped");
        return Ok(());
    }
    let ws = [random_matrix(ctx, n_first, k, bits == 2), random_matrix(ctx, n_second, k, bits == 2)];
    let x = ctx.rng.activations(k, INPUT_RANGE);
    let xd = upload(&ctx.stream, &x)?;
    let mut planes = B1Planes::new(&ctx.stream, k)?;
    prepare_planes_normed(ctx.gpu(), &xd, None, &mut planes)?;
    let dws = [DeviceQMatrix::upload(&ctx.stream, &ws[0])?, DeviceQMatrix::upload(&ctx.stream, &ws[1])?];
    let (mut y1, mut y2) = (poisoned(&ctx.stream, n_first)?, poisoned(&ctx.stream, n_second)?);
    gemv_pair_from_planes(ctx.gpu(), (&dws[0].view(), &mut y1), (&dws[1].view(), &mut y2), &planes)?;
    let got = [download(&ctx.stream, &y1)?, download(&ctx.stream, &y2)?];
    let x_abs: Vec<f32> = x.iter().map(|v| v.abs()).collect();
    let c = matmul_coefficient(k, MatmulKernel::Gemv(GemvKernel::Binary), bits == 2);
    for (which, (w, got)) in ["first", "second"].iter().zip(ws.iter().zip(&got)) {
        let n = w.n();
        let want = par_reference(w, &x, 1, &vec![0.0; n], Store::Overwrite)?;
        let plain = par_reference(&abs_matrix(w), &x_abs, 1, &vec![0.0; n], Store::Overwrite)?;
        let quant = b1_quant_bound(w, &x)?;
        // The binary GEMV's bound (verify/matmul.rs: matmul_coefficient on the magnitude plus the
        // quantization term Q, which enters the magnitude too), plus the reference's rounding.
        let cmp = Comparison::of(got, &want, |i| {
            c * (plain[i] as f64 + quant[i] as f64) + quant[i] as f64 + 2.0 * U * want[i].abs() as f64 + f32::MIN_POSITIVE as f64
        });
        ctx.record("gemv_pair", &format!("{label} {which} matrix"), cmp);
    }
    Ok(())
}

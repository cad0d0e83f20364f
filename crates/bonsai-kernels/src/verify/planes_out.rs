//! Checks of the binary GEMV's planes epilogue (`gemv_from_planes` with a [`PlanesOut`]): the
//! CTAs that complete a 128-group of y quantize it for the next GEMV, instead of a separate
//! `gemv_b1_prepare` launch on y.
//!
//! Both quantize the same stored floats with the same device function (b1_prepare_group), so the
//! required result is bit-identity, tolerance 0: y against the same GEMV without the epilogue, and
//! the planes (planes, (s, X), sums of squares) against `prepare_planes_normed` of that y with the
//! same norm weights. Each case runs twice on one output buffer, so group counters left non-zero
//! by the first launch would show in the second. The plain GEMV also runs as `_gemv_b1_pf`
//! (asking L2 for weights, a hint): its y must be bit-identical too.
//!
//! The owner epilogue (`_gemv_b1_owner`: CTAs holding whole groups, so a different K split) is
//! required bit-identical to the plain kernel at its geometry, its planes to `prepare_planes_normed`
//! of that y; and that y is compared with the default geometry's within the bound of two f32
//! summation orders of the same terms ([`summation_order_bound`]).


use super::attention_planes::{planes_words, words_equal};
use super::gpu::{download, poisoned, upload, DeviceQMatrix};
use super::shapes::ShapeSet;
use super::{Comparison, Ctx, VerifyError};
use super::matmul::{abs_matrix, par_reference};
use super::F32_UNIT_ROUNDOFF as U;
use crate::launch::matmul::{
    gemv_from_planes, gemv_from_planes_owner_geometry, prepare_planes_normed, with_l2_prefetch, B1Planes, Epilogue,
    PlanesOut,
};
use crate::ops::Store;
use crate::weights::{QMatrix, GROUP};

/// Inputs and norm weights are drawn from [-RANGE, RANGE].
const INPUT_RANGE: f32 = 2.0;
const EPS: f32 = 1e-6;
/// (outputs, K, epilogue): every epilogue at small shapes, a CTA range that straddles groups
/// (SwiGLU: 12 tiles x 8 features per CTA at F = 12288), K = 2048 where the owner geometry splits
/// K differently from the default (2 / 1 splits against 4), and Bonsai-8B's decode shapes.
const SMALL_CASES: [(usize, usize, Epilogue); 6] = [
    (256, 256, Epilogue::Store),
    (384, 512, Epilogue::Add),
    (640, 256, Epilogue::SwiGlu),
    (1152, 384, Epilogue::SwiGlu),
    (256, 2048, Epilogue::Add),
    (256, 2048, Epilogue::SwiGlu),
];
const EIGHT_B_CASES: [(usize, usize, Epilogue); 3] =
    [(4096, 4096, Epilogue::Add), (12288, 4096, Epilogue::SwiGlu), (4096, 12288, Epilogue::Add)];

pub(crate) fn run_all(ctx: &mut Ctx, set: ShapeSet) -> Result<(), VerifyError> {
    let mut cases = SMALL_CASES.to_vec();
    if set == ShapeSet::All {
        cases.extend(EIGHT_B_CASES);
    }
    for (n_out, k, epilogue) in cases {
        for bits in [1u8, 2] {
            for normed in [false, true] {
                check(ctx, n_out, k, epilogue, bits, normed)?;
            }
        }
    }
    Ok(())
}

fn check(ctx: &mut Ctx, n_out: usize, k: usize, epilogue: Epilogue, bits: u8, normed: bool) -> Result<(), VerifyError> {
    let rows = if epilogue == Epilogue::SwiGlu { 2 * n_out } else { n_out };
    let q = if bits == 1 { QMatrix::Q1(ctx.rng.q1_matrix(rows, k)) } else { QMatrix::Q2(ctx.rng.q2_matrix(rows, k)) };
    let w = DeviceQMatrix::upload(&ctx.stream, &q)?;
    let norm = upload(&ctx.stream, &ctx.rng.activations(n_out, INPUT_RANGE))?;
    // `normed`: the GEMV's own input carries RMSNorm weights too (1 / rms from its planes).
    let in_norm_host = ctx.rng.activations(k, INPUT_RANGE);
    let in_norm = upload(&ctx.stream, &in_norm_host)?;
    let in_eps = normed.then_some(EPS);
    let mut out = B1Planes::new(&ctx.stream, n_out)?;
    let mut out_owner = B1Planes::new(&ctx.stream, n_out)?;
    for launch in 1..=2 {
        let x_host = ctx.rng.activations(k, INPUT_RANGE);
        let x = upload(&ctx.stream, &x_host)?;
        let mut planes = B1Planes::new(&ctx.stream, k)?;
        prepare_planes_normed(&ctx.lib, &ctx.stream, &x, normed.then_some(&in_norm), &mut planes)?;
        let residual = ctx.rng.activations(n_out, INPUT_RANGE);
        let start = |ctx: &Ctx| -> Result<_, VerifyError> {
            Ok(if epilogue == Epilogue::Add { upload(&ctx.stream, &residual)? } else { poisoned(&ctx.stream, n_out)? })
        };
        let mut y_plain = start(ctx)?;
        gemv_from_planes(&ctx.lib, &ctx.stream, &w.view(), &planes, in_eps, &mut y_plain, epilogue, None)?;
        // The same GEMV as `_gemv_b1_pf`, asking L2 for a matrix's weights (its own): a hint, so y
        // must be bit-identical.
        let mut y_pf = start(ctx)?;
        with_l2_prefetch(&ctx.stream, &w.view(), || {
            gemv_from_planes(&ctx.lib, &ctx.stream, &w.view(), &planes, in_eps, &mut y_pf, epilogue, None)
        })?;
        let mut y = start(ctx)?;
        let dst = PlanesOut { planes: &mut out, norm: normed.then_some(&norm), owner: false };
        gemv_from_planes(&ctx.lib, &ctx.stream, &w.view(), &planes, in_eps, &mut y, epilogue, Some(dst))?;
        let mut want = B1Planes::new(&ctx.stream, n_out)?;
        prepare_planes_normed(&ctx.lib, &ctx.stream, &y_plain, normed.then_some(&norm), &mut want)?;

        let label = format!("{epilogue:?} q{bits} N={n_out} K={k}{} launch {launch}", if normed { " normed" } else { "" });
        let (got_y, want_y) = (download(&ctx.stream, &y)?, download(&ctx.stream, &y_plain)?);
        ctx.record("planes_out", &format!("{label} y"), Comparison::of(&got_y, &want_y, |_| 0.0));
        let got_pf = download(&ctx.stream, &y_pf)?;
        ctx.record("planes_out", &format!("{label} y with L2 prefetch"), Comparison::of(&got_pf, &want_y, |_| 0.0));
        let (got, want) = (planes_words(ctx, &out)?, planes_words(ctx, &want)?);
        ctx.record("planes_out", &format!("{label} planes"), words_equal(&got, &want));
        let counts = out.group_counts().map(|c| download(&ctx.stream, c)).transpose()?.unwrap_or_default();
        let zeros = vec![0u32; n_out / GROUP];
        ctx.record("planes_out", &format!("{label} counters reset"), words_equal(&counts, &zeros));

        let mut y_geom = start(ctx)?;
        gemv_from_planes_owner_geometry(&ctx.lib, &ctx.stream, &w.view(), &planes, in_eps, &mut y_geom, epilogue)?;
        let mut y_owner = start(ctx)?;
        let dst = PlanesOut { planes: &mut out_owner, norm: normed.then_some(&norm), owner: true };
        gemv_from_planes(&ctx.lib, &ctx.stream, &w.view(), &planes, in_eps, &mut y_owner, epilogue, Some(dst))?;
        let mut want_owner = B1Planes::new(&ctx.stream, n_out)?;
        prepare_planes_normed(&ctx.lib, &ctx.stream, &y_geom, normed.then_some(&norm), &mut want_owner)?;
        let (got_owner, want_geom) = (download(&ctx.stream, &y_owner)?, download(&ctx.stream, &y_geom)?);
        ctx.record("planes_out", &format!("{label} owner y"), Comparison::of(&got_owner, &want_geom, |_| 0.0));
        let (got, want) = (planes_words(ctx, &out_owner)?, planes_words(ctx, &want_owner)?);
        ctx.record("planes_out", &format!("{label} owner planes"), words_equal(&got, &want));
        let x_in: Vec<f32> = if normed { x_host.iter().zip(&in_norm_host).map(|(a, b)| a * b).collect() } else { x_host.clone() };
        let inv_rms = if normed {
            1.0 / (x_host.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / k as f64 + EPS as f64).sqrt()
        } else {
            1.0
        };
        let bound = summation_order_bound(&q, &x_in, inv_rms, epilogue, &want_y)?;
        ctx.record("planes_out", &format!("{label} owner vs default split"), Comparison::of(&want_geom, &want_y, |i| bound[i]));
    }
    Ok(())
}

/// How far two binary GEMVs that split K differently may be apart. Both add the same terms
/// t_G = d_G s_G dot_G (per row and 128-group: the integer dot is exact, and each fma into a
/// partial rounds once), then the split partials and the lane pairs: at most n = groups + splits
/// + 4 roundings on any path (16 splits at most, + the pair swaps and 1 / rms), so each is within
/// gamma_n sum|t| of the exact sum and the two within 2 n u M, M = (1 / rms) sum_k |w_k| (|x_k| +
/// 2^-22 max|x_G|) (|s_G q_k| <= |x_k| + s_G / 2, s_G <= 2^-21 max|x_G|). Store / Add add 4u|y|
/// for the final roundings. SwiGLU (y = silu(g) up, rows g and n_out + g): |silu'| <= 1.1 and
/// |silu(g)| <= |g| <= M_g give 1.1 M_up 2nu M_g + M_g 2nu M_up = 4.2 n u M_g M_up, plus 24u|y|
/// for both evaluations of silu and the product. Magnitudes from the host in f32: times 1.01.
fn summation_order_bound(
    w: &QMatrix,
    x: &[f32],
    inv_rms: f64,
    epilogue: Epilogue,
    y: &[f32],
) -> Result<Vec<f64>, VerifyError> {
    let k = x.len();
    let x_quant: Vec<f32> = x
        .chunks(GROUP)
        .flat_map(|g| {
            let max = g.iter().fold(0.0f32, |a, v| a.max(v.abs()));
            g.iter().map(move |v| v.abs() + max * 2f32.powi(-22))
        })
        .collect();
    let magnitude = par_reference(&abs_matrix(w), &x_quant, 1, &vec![0.0; w.n()], Store::Overwrite)?;
    let m = |r: usize| 1.01 * inv_rms * magnitude[r] as f64;
    let n = (k / GROUP + 16 + 4) as f64;
    Ok(match epilogue {
        Epilogue::SwiGlu => {
            let n_out = w.n() / 2;
            (0..n_out).map(|r| 4.2 * n * U * m(r) * m(n_out + r) + 24.0 * U * y[r].abs() as f64).collect()
        }
        _ => (0..w.n()).map(|r| 2.0 * n * U * m(r) + 4.0 * U * y[r].abs() as f64).collect(),
    })
}

//! Checks of the binary GEMV's planes epilogue (`gemv_from_planes` with a [`PlanesOut`]): the
//! CTAs that complete a 128-group of y quantize it for the next GEMV, instead of a separate
//! `gemv_b1_prepare` launch on y.
//!
//! Both quantize the same stored floats with the same device function (b1_prepare_group), so the
//! required result is bit-identity, tolerance 0: y against the same GEMV without the epilogue, and
//! the planes (planes, (s, X), sums of squares) against `prepare_planes_normed` of that y with the
//! same norm weights. Each case runs twice on one output buffer, so group counters left non-zero
//! by the first launch would show in the second.
//!
//! `qkv_rope` rows: the qkv projection whose epilogue does qk_norm_rope_kv_write's work (per head
//! of 128, the same expressions) against the projection and then that kernel: bit for bit.

use super::attention_planes::{floats_identical, planes_words, words_equal};
use super::gpu::{download, poisoned, upload, DeviceQMatrix};
use super::shapes::ShapeSet;
use super::{Comparison, Ctx, VerifyError};
use crate::launch::matmul::{
    gemv_from_planes, prepare_planes_normed, qkv_from_planes_rope, B1Planes, Epilogue, PlanesOut, RopeOut,
};
use crate::launch::qk_norm_rope::{qk_norm_rope_kv_write, RopeTableView};
use crate::launch::HeadShape;
use crate::weights::{QMatrix, GROUP};

/// Inputs and norm weights are drawn from [-RANGE, RANGE].
const INPUT_RANGE: f32 = 2.0;
const EPS: f32 = 1e-6;
/// (outputs, K, epilogue): every epilogue at small shapes, a CTA range that straddles groups
/// (SwiGLU: 12 tiles x 8 features per CTA at F = 12288), and Bonsai-8B's decode shapes.
const SMALL_CASES: [(usize, usize, Epilogue); 4] =
    [(256, 256, Epilogue::Store), (384, 512, Epilogue::Add), (640, 256, Epilogue::SwiGlu), (1152, 384, Epilogue::SwiGlu)];
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
    let in_norm = upload(&ctx.stream, &ctx.rng.activations(k, INPUT_RANGE))?;
    let in_eps = normed.then_some(EPS);
    let mut out = B1Planes::new(&ctx.stream, n_out)?;
    for launch in 1..=2 {
        let x = upload(&ctx.stream, &ctx.rng.activations(k, INPUT_RANGE))?;
        let mut planes = B1Planes::new(&ctx.stream, k)?;
        prepare_planes_normed(&ctx.lib, &ctx.stream, &x, normed.then_some(&in_norm), &mut planes)?;
        let residual = ctx.rng.activations(n_out, INPUT_RANGE);
        let start = |ctx: &Ctx| -> Result<_, VerifyError> {
            Ok(if epilogue == Epilogue::Add { upload(&ctx.stream, &residual)? } else { poisoned(&ctx.stream, n_out)? })
        };
        let mut y_plain = start(ctx)?;
        gemv_from_planes(&ctx.lib, &ctx.stream, &w.view(), &planes, in_eps, &mut y_plain, epilogue, None)?;
        let mut y = start(ctx)?;
        let dst = PlanesOut { planes: &mut out, norm: normed.then_some(&norm) };
        gemv_from_planes(&ctx.lib, &ctx.stream, &w.view(), &planes, in_eps, &mut y, epilogue, Some(dst))?;
        let mut want = B1Planes::new(&ctx.stream, n_out)?;
        prepare_planes_normed(&ctx.lib, &ctx.stream, &y_plain, normed.then_some(&norm), &mut want)?;

        let label = format!("{epilogue:?} q{bits} N={n_out} K={k}{} launch {launch}", if normed { " normed" } else { "" });
        let (got_y, want_y) = (download(&ctx.stream, &y)?, download(&ctx.stream, &y_plain)?);
        ctx.record("planes_out", &format!("{label} y"), Comparison::of(&got_y, &want_y, |_| 0.0));
        let (got, want) = (planes_words(ctx, &out)?, planes_words(ctx, &want)?);
        ctx.record("planes_out", &format!("{label} planes"), words_equal(&got, &want));
        let counts = out.group_counts().map(|c| download(&ctx.stream, c)).transpose()?.unwrap_or_default();
        let zeros = vec![0u32; n_out / crate::weights::GROUP];
        ctx.record("planes_out", &format!("{label} counters reset"), words_equal(&counts, &zeros));
    }
    Ok(())
}

/// (n_q, n_kv, K, pos0, max_seq, max_pos): a live position, one past the RoPE table (NaN heads,
/// and their NaN k in the cache), one past the cache (no cache write), and Bonsai-8B's heads.
const ROPE_CASES: [(usize, usize, usize, usize, usize, usize); 3] =
    [(4, 2, 256, 7, 16, 32), (4, 2, 256, 40, 48, 32), (2, 1, 384, 20, 16, 32)];
const ROPE_EIGHT_B: (usize, usize, usize, usize, usize, usize) = (32, 8, 4096, 100, 128, 256);

/// The qkv projection whose epilogue does qk_norm_rope_kv_write's work against the projection
/// followed by that kernel: qkv, both caches and the counters, bit for bit.
pub(crate) fn run_rope(ctx: &mut Ctx, set: ShapeSet) -> Result<(), VerifyError> {
    let mut cases = ROPE_CASES.to_vec();
    if set == ShapeSet::All {
        cases.push(ROPE_EIGHT_B);
    }
    for (n_q, n_kv, k, pos0, max_seq, max_pos) in cases {
        for bits in [1u8, 2] {
            check_rope(ctx, HeadShape { n_q, n_kv, head_dim: GROUP }, k, bits, (pos0, max_seq, max_pos))?;
        }
    }
    Ok(())
}

fn check_rope(
    ctx: &mut Ctx,
    heads: HeadShape,
    k: usize,
    bits: u8,
    (pos0, max_seq, max_pos): (usize, usize, usize),
) -> Result<(), VerifyError> {
    let rows = heads.qkv_row_len();
    let q = if bits == 1 { QMatrix::Q1(ctx.rng.q1_matrix(rows, k)) } else { QMatrix::Q2(ctx.rng.q2_matrix(rows, k)) };
    let (x, in_norm) = (ctx.rng.activations(k, INPUT_RANGE), ctx.rng.activations(k, INPUT_RANGE));
    let (q_norm, k_norm) = (ctx.rng.activations(GROUP, INPUT_RANGE), ctx.rng.activations(GROUP, INPUT_RANGE));
    let half = GROUP / 2;
    let (cos, sin) = (ctx.rng.activations(max_pos * half, 1.0), ctx.rng.activations(max_pos * half, 1.0));
    // Both paths start from the same random cache bits, so a stray or missing write shows.
    let cache_len = heads.n_kv * max_seq * GROUP;
    let cache_bits: Vec<u16> =
        ctx.rng.activations(cache_len, INPUT_RANGE).iter().map(|v| half::f16::from_f32(*v).to_bits()).collect();

    let (lib, stream) = (&ctx.lib, &ctx.stream);
    let w = DeviceQMatrix::upload(stream, &q)?;
    let mut planes = B1Planes::new(stream, k)?;
    prepare_planes_normed(lib, stream, &upload(stream, &x)?, Some(&upload(stream, &in_norm)?), &mut planes)?;
    let (q_norm, k_norm) = (upload(stream, &q_norm)?, upload(stream, &k_norm)?);
    let (cos, sin) = (upload(stream, &cos)?, upload(stream, &sin)?);
    let table = RopeTableView { max_pos, cos: &cos, sin: &sin };
    let pos = upload(stream, &[pos0 as u32])?;

    let mut qkv_a = poisoned(stream, rows)?;
    let (mut k_a, mut v_a) = (upload(stream, &cache_bits)?, upload(stream, &cache_bits)?);
    gemv_from_planes(lib, stream, &w.view(), &planes, Some(EPS), &mut qkv_a, Epilogue::Store, None)?;
    qk_norm_rope_kv_write(lib, stream, &mut qkv_a, 1, heads, &q_norm, &k_norm, EPS, &table, &pos, max_seq, &mut k_a, &mut v_a)?;

    let mut qkv_b = poisoned(stream, rows)?;
    let (mut k_b, mut v_b) = (upload(stream, &cache_bits)?, upload(stream, &cache_bits)?);
    let mut counts = upload(stream, &vec![0u32; heads.n_q + 2 * heads.n_kv])?;
    let rope = RopeOut {
        shape: heads,
        q_norm: &q_norm,
        k_norm: &k_norm,
        eps: EPS,
        table: &table,
        pos0: &pos,
        max_seq,
        k_cache: &mut k_b,
        v_cache: &mut v_b,
        counts: &mut counts,
    };
    qkv_from_planes_rope(lib, stream, &w.view(), &planes, Some(EPS), &mut qkv_b, rope)?;

    let widen = |v: Vec<u16>| v.into_iter().map(u32::from).collect::<Vec<u32>>();
    let rows_out = [
        ("qkv", floats_identical(&download(stream, &qkv_b)?, &download(stream, &qkv_a)?)),
        ("k cache", words_equal(&widen(download(stream, &k_b)?), &widen(download(stream, &k_a)?))),
        ("v cache", words_equal(&widen(download(stream, &v_b)?), &widen(download(stream, &v_a)?))),
        ("counters reset", {
            let left = download(stream, &counts)?;
            words_equal(&left, &vec![0u32; left.len()])
        }),
    ];
    let label = format!("q{bits} n_q={} n_kv={} K={k} pos0={pos0} max_seq={max_seq} max_pos={max_pos}", heads.n_q, heads.n_kv);
    for (what, cmp) in rows_out {
        ctx.record("qkv_rope", &format!("{label} {what}"), cmp);
    }
    Ok(())
}

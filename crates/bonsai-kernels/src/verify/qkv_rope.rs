//! Checks of the decode qkv projection with its rope epilogue (`qkv_rope_from_planes`, the
//! `*_gemv_b1_rope` kernels): the CTA that completes a head normalises and rotates it and writes
//! the k / v cache rows, instead of a separate `qk_norm_rope_kv_write` launch.
//!
//! The epilogue runs the same arithmetic as that kernel (the shared qk_pair_sq, qk_inv_rms and
//! qk_rope_pair, the head's sum of squares in its block_sum order) on the same GEMV outputs, so
//! the required result is bit-identity, tolerance 0, against (a) the plain Store GEMV on the same
//! planes, then qk_norm_rope_kv_write: qkv (q and k heads rotated, v as computed), both pools
//! (paged over the same scattered block table, pre-filled with the same random values, so a
//! stray, misplaced or missing write shows), and the staging
//! words clear after every launch (each case reuses one set of words across its positions).
//! Positions: inside the cache, past the cache but inside the RoPE table (rotated, no cache
//! write), and past the table (NaN q / k heads, compared by their bits).

use super::attention::PagedCache;
use super::attention_planes::words_equal;
use super::gpu::{download, poisoned, upload, DeviceQMatrix};
use super::shapes::{ShapeSet, MODELS};
use super::{Ctx, VerifyError};
use crate::launch::matmul::{gemv_from_planes, prepare_planes_normed, B1Planes, Epilogue, PlanesEpilogue, RopeOut, TilesChoice};
use crate::launch::qk_norm_rope::{qk_norm_rope, RopeTableView};
use crate::launch::HeadShape;
use crate::ops::qk_norm_rope::Params;
use crate::weights::QMatrix;

const HEAD_DIM: usize = 128;
const MAX_SEQ: usize = 16;
const MAX_POS: usize = 32;
/// Inside the cache, past it (rotated, no cache row), past the RoPE table (NaN heads).
const POSITIONS: [usize; 3] = [5, 20, 40];
/// Inputs, norm weights and cos / sin are drawn from [-RANGE, RANGE].
const INPUT_RANGE: f32 = 2.0;
const EPS: f32 = 1e-6;
/// (name, n_q, n_kv, K): a small GQA shape; the models' shapes with the full set.
const SMALL: (&str, usize, usize, usize) = ("small", 4, 2, 256);
/// GQA group 3 (6 q / 2 kv heads): the epilogue serves every head_dim-128 model, whatever its group.
const SMALL_G3: (&str, usize, usize, usize) = ("g3", 6, 2, 256);

pub(crate) fn run_all(ctx: &mut Ctx, set: ShapeSet) -> Result<(), VerifyError> {
    let mut cases = vec![SMALL, SMALL_G3];
    if set == ShapeSet::All {
        cases.extend(MODELS.iter().filter(|m| !m.ternary).map(|m| (m.name, m.n_q, m.n_kv, m.hidden)));
    }
    for bits in [1u8, 2] {
        for &case in &cases {
            check(ctx, case, bits)?;
        }
    }
    Ok(())
}

/// f16 cache words (and f32 bits) as u32 for [`words_equal`].
fn widened(v: &[u16]) -> Vec<u32> {
    v.iter().map(|&h| u32::from(h)).collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn check(ctx: &mut Ctx, (name, n_q, n_kv, k): (&str, usize, usize, usize), bits_per_weight: u8) -> Result<(), VerifyError> {
    let shape = HeadShape { n_q, n_kv, head_dim: HEAD_DIM };
    let rows = (n_q + 2 * n_kv) * HEAD_DIM;
    let q = if bits_per_weight == 1 {
        QMatrix::Q1(ctx.rng.q1_matrix(rows, k))
    } else {
        QMatrix::Q2(ctx.rng.q2_matrix(rows, k))
    };
    let w = DeviceQMatrix::upload(&ctx.stream, &q)?;
    let in_norm = upload(&ctx.stream, &ctx.rng.activations(k, INPUT_RANGE))?;
    let q_norm = upload(&ctx.stream, &ctx.rng.activations(HEAD_DIM, INPUT_RANGE))?;
    let k_norm = upload(&ctx.stream, &ctx.rng.activations(HEAD_DIM, INPUT_RANGE))?;
    let cos = upload(&ctx.stream, &ctx.rng.activations(MAX_POS * HEAD_DIM / 2, 1.0))?;
    let sin = upload(&ctx.stream, &ctx.rng.activations(MAX_POS * HEAD_DIM / 2, 1.0))?;
    let table = RopeTableView { max_pos: MAX_POS, cos: &cos, sin: &sin };
    let norm_rope = Params { shape, rot_dims: shape.head_dim, q_norm: &q_norm, k_norm: &k_norm, eps: EPS, rope: &table };
    let cache_fill = PagedCache::filled(ctx, shape, MAX_SEQ);
    let (mut cache_want, mut cache_got) = (cache_fill.upload(&ctx.stream)?, cache_fill.upload(&ctx.stream)?);
    let mut staged = ctx.stream.alloc_zeros::<u64>(rows)?;
    for pos in POSITIONS {
        let x = upload(&ctx.stream, &ctx.rng.activations(k, INPUT_RANGE))?;
        let mut planes = B1Planes::new(&ctx.stream, k)?;
        prepare_planes_normed(ctx.gpu(), &x, Some(&in_norm), &mut planes)?;
        let pos0 = upload(&ctx.stream, &[pos as u32])?;

        let mut want = poisoned(&ctx.stream, rows)?;
        gemv_from_planes(ctx.gpu(), &w.view(), &planes, Some(EPS), &mut want, Epilogue::Store, PlanesEpilogue::None, TilesChoice::Auto)?;
        qk_norm_rope(ctx.gpu(), &mut want, 1, norm_rope, &pos0, Some(cache_want.view_mut()))?;

        let mut got = poisoned(&ctx.stream, rows)?;
        let r = RopeOut { norm_rope, pos0: &pos0, cache: cache_got.view_mut(), staged: &mut staged };
        let rope = PlanesEpilogue::Rope(r);
        gemv_from_planes(ctx.gpu(), &w.view(), &planes, Some(EPS), &mut got, Epilogue::Store, rope, TilesChoice::Auto)?;

        let label = format!("{name} q{bits_per_weight} heads {n_q}/{n_kv} K={k} pos {pos}");
        let (got_qkv, want_qkv) = (download(&ctx.stream, &got)?, download(&ctx.stream, &want)?);
        ctx.record("qkv_rope", &format!("{label} qkv"), words_equal(&bits(&got_qkv), &bits(&want_qkv)));
        for (cache, got_c, want_c) in [("k cache", &cache_got.k, &cache_want.k), ("v cache", &cache_got.v, &cache_want.v)] {
            let (g, w) = (download(&ctx.stream, got_c)?, download(&ctx.stream, want_c)?);
            ctx.record("qkv_rope", &format!("{label} {cache}"), words_equal(&widened(&g), &widened(&w)));
        }
        let set_words: Vec<u32> = download(&ctx.stream, &staged)?.iter().map(|&w| u32::from(w != 0)).collect();
        ctx.record("qkv_rope", &format!("{label} staging words cleared"), words_equal(&set_words, &vec![0; rows]));
    }
    Ok(())
}

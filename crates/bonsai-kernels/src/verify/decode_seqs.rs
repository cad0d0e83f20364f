//! Checks of the batched decode kernels (decode_seqs.cu) and the batched greedy pick: each
//! sequence of a table, at its own position, with its own block table into the layers' shared
//! pools and its row anywhere in the batch, against the single-sequence reference ops on that
//! sequence alone. Rows the table does not name, the other sequences' blocks, the spare blocks
//! and the other layer's pools must come back untouched.

use half::f16;

use super::attention_planes::{floats_identical, planes_words, words_equal};
use super::attention::{decode_bound, f16_bits, qk_norm_rope_bound, BoundInputs, DECODE_WIDE_LANES, GENERAL, SPARE_BLOCKS};
use super::gpu::{download, poisoned, upload};
use super::shapes::{Geometry, ShapeSet, MODELS, SMALL};
use super::{Comparison, Ctx, VerifyError};
use crate::launch;
use crate::launch::attention::AttentionScratch;
use crate::launch::decode_seqs::{DeviceSeqTable, SeqTableBuilder};
use crate::launch::matmul::{B1Planes, B1_GROUP_WORDS};
use crate::launch::qk_norm_rope::RopeTableView;
use crate::ops::{self, HeadShape, KvCache, QkvRows};
use crate::rope::RopeTable;

const ROPE_THETA: f64 = 1e6;
const EPS: f32 = 1e-6;
/// Layers of pools; the launches use the last (the table's layer offset).
const LAYERS: usize = 2;

pub(crate) fn run_all(ctx: &mut Ctx, set: ShapeSet) -> Result<(), VerifyError> {
    // Positions at the decode kernel's split edges (one key, a short context in one split, past
    // 128 keys: several splits and a merge), mixed in one batch.
    let positions = [0, 1, 33, 100, 1000];
    let g2_hd256 = Geometry { name: "g2-hd256", hidden: 1024, ffn: 0, n_q: 4, n_kv: 2, head_dim: 256, ternary: false };
    // Bonsai 2's attention heads: G 6 at head_dim 256 (the narrow-lane, 4-key-step instance).
    let g6_hd256 = Geometry { name: "g6-hd256", hidden: 1536, ffn: 0, n_q: 6, n_kv: 1, head_dim: 256, ternary: false };
    let mut geometries = vec![SMALL, DECODE_WIDE_LANES, GENERAL[0], g2_hd256, g6_hd256];
    if set == ShapeSet::All {
        geometries.push(MODELS[2]);
    }
    for g in &geometries {
        check(ctx, g, &positions, g.head_dim)?;
    }
    // Partial RoPE (Bonsai 2 rotates 64 of 256 dims).
    check(ctx, &g2_hd256, &positions, 64)?;
    // One sequence alone, and many (each split count the launcher picks).
    check(ctx, &DECODE_WIDE_LANES, &[77], DECODE_WIDE_LANES.head_dim)?;
    let many: Vec<usize> = (0..40).map(|i| 17 * i + 3).collect();
    check(ctx, &DECODE_WIDE_LANES, &many, DECODE_WIDE_LANES.head_dim)?;
    // Batches whose attention CTAs are of 4 and of 2 warps on this device (the launcher's
    // `seqs_warps`): the fewest sequences that take each, positions up to past one 128-key split.
    let sms = launch::sm_count(&ctx.stream)?;
    for warps in [4, 2] {
        let seqs = (1..)
            .find(|&n| launch::decode_seqs::seqs_warps(sms, n * DECODE_WIDE_LANES.n_kv) == warps)
            .expect("a batch size that takes each warp count");
        let positions: Vec<usize> = (0..seqs).map(|i| (37 * i + 5) % 300).collect();
        check(ctx, &DECODE_WIDE_LANES, &positions, DECODE_WIDE_LANES.head_dim)?;
    }
    for (rows, n) in [(1, 1000), (5, 1000), (64, 4099)] {
        argmax_rows(ctx, rows, n)?;
    }
    for (rows, n) in [(1, 1000), (5, 1000), (6, 4099)] {
        sample_rows(ctx, rows, n)?;
    }
    if set == ShapeSet::All {
        argmax_rows(ctx, 64, 151_936)?;
        sample_rows(ctx, 64, 151_936)?;
    }
    Ok(())
}

/// Row `row`'s words of `words` ([`planes_words`] of planes of `rows` rows of `groups` groups
/// each), in the order [`planes_words`] gives one row's.
fn row_words(words: &[u32], rows: usize, groups: usize, row: usize) -> Vec<u32> {
    let plane_words = groups * B1_GROUP_WORDS;
    let (gsx0, sq0) = (rows * plane_words, rows * plane_words + rows * 2 * groups);
    let mut out = words[row * plane_words..(row + 1) * plane_words].to_vec();
    out.extend(&words[gsx0 + row * 2 * groups..gsx0 + (row + 1) * 2 * groups]);
    out.extend(&words[sq0 + row * groups..sq0 + (row + 1) * groups]);
    out
}

/// One sequence of a check: its row in the batch, position and block table (into every layer's
/// pools).
struct Seq {
    row: usize,
    pos: usize,
    table: Vec<u32>,
}

fn check(ctx: &mut Ctx, g: &Geometry, positions: &[usize], rot_dims: usize) -> Result<(), VerifyError> {
    let shape = HeadShape { n_q: g.n_q, n_kv: g.n_kv, head_dim: g.head_dim };
    let (hd, row_len) = (shape.head_dim, shape.qkv_row_len());
    let n = positions.len();
    // Two rows more than sequences, the sequences' rows in reverse order from the last: rows 0
    // and 1 belong to no sequence.
    let rows = n + 2;
    let max_seq = positions.iter().max().copied().unwrap_or(0) + 4;
    let max_pos = max_seq + 1;
    let rope = RopeTable::new(rot_dims, max_pos, ROPE_THETA, None);
    // The sequences' tables are consecutive runs of one scattered order of the pool's blocks
    // (spare blocks included), so their blocks interleave in the pools.
    let per_seq = ops::kv_table_len(max_seq);
    let (order, blocks) = ops::scattered_kv_table(n * per_seq * ops::KV_BLOCK, SPARE_BLOCKS, |k| ctx.rng.below(k));
    let seqs: Vec<Seq> = positions
        .iter()
        .zip(order.chunks_exact(per_seq))
        .enumerate()
        .map(|(i, (&pos, table))| Seq { row: rows - 1 - i, pos, table: table.to_vec() })
        .collect();
    // Each layer's pools: random rows at each sequence's positions up to its new token's, NaN
    // elsewhere (later positions, spare blocks): a kernel that reads them fails.
    let pool_len = blocks * ops::kv_block_len(shape);
    let mut pools = Vec::with_capacity(LAYERS);
    for _ in 0..LAYERS {
        let (mut k, mut v) = (vec![f16::NAN; pool_len], vec![f16::NAN; pool_len]);
        for s in &seqs {
            for p in 0..=s.pos {
                for head in 0..shape.n_kv {
                    let at = ops::kv_row_offset(shape, s.table[p / ops::KV_BLOCK], head, p);
                    for pool in [&mut k, &mut v] {
                        pool[at..at + hd].iter_mut().for_each(|x| *x = f16::from_f32(ctx.rng.range(-2.0, 2.0)));
                    }
                }
            }
        }
        pools.push((k, v));
    }
    let qkv = ctx.rng.activations(rows * row_len, 3.0);
    let qn: Vec<f32> = (0..hd).map(|_| ctx.rng.range(0.5, 1.5)).collect();
    let kn: Vec<f32> = (0..hd).map(|_| ctx.rng.range(0.5, 1.5)).collect();

    // The device side: buffers, the table, the three launches.
    let mut qd = upload(&ctx.stream, &qkv)?;
    let (qnd, knd) = (upload(&ctx.stream, &qn)?, upload(&ctx.stream, &kn)?);
    let (cd, sd) = (upload(&ctx.stream, &rope.cos)?, upload(&ctx.stream, &rope.sin)?);
    let mut pos_d = Vec::new();
    let mut tables_d = Vec::new();
    for s in &seqs {
        pos_d.push(upload(&ctx.stream, &[s.pos as u32])?);
        tables_d.push(upload(&ctx.stream, &s.table)?);
    }
    let mut pools_d = Vec::new();
    for (k, v) in &pools {
        pools_d.push((upload(&ctx.stream, &f16_bits(k))?, upload(&ctx.stream, &f16_bits(v))?));
    }
    let mut builder = SeqTableBuilder::new(&ctx.stream, rows, max_seq, shape, pools_d.iter().map(|(k, v)| (k, v)))?;
    for (i, s) in seqs.iter().enumerate() {
        builder.push(&ctx.stream, s.row, &pos_d[i], &tables_d[i])?;
    }
    let mut table = DeviceSeqTable::new(&ctx.stream, n, LAYERS)?;
    table.update(&ctx.stream, builder.finish())?;
    let layer = LAYERS - 1;
    let view = RopeTableView { max_pos, cos: &cd, sin: &sd };
    let params = ops::qk_norm_rope::Params { shape, rot_dims, q_norm: &qnd, k_norm: &knd, eps: EPS, rope: &view };
    launch::decode_seqs::qk_norm_rope_kv_write_seqs(ctx.gpu(), &mut qd, params, &table, layer)?;
    let qkv_after = download(&ctx.stream, &qd)?;
    let as_f16 = |b: Vec<u16>| b.into_iter().map(f16::from_bits).collect::<Vec<f16>>();
    let mut pools_after = Vec::new();
    for (k, v) in &pools_d {
        pools_after.push((as_f16(download(&ctx.stream, k)?), as_f16(download(&ctx.stream, v)?)));
    }
    let out_len = rows * shape.q_len();
    let mut od = poisoned(&ctx.stream, out_len)?;
    let mut partials = poisoned(&ctx.stream, launch::decode_seqs::attention_scratch_len(n, shape))?;
    let mut counters = upload(&ctx.stream, &vec![0u32; launch::decode_seqs::attention_counters_len(n, shape)])?;
    let work = AttentionScratch { partials: &mut partials, counters: &mut counters };
    launch::decode_seqs::attention_decode_seqs(ctx.gpu(), &qd, &table, layer, work, &mut od)?;
    let out = download(&ctx.stream, &od)?;
    let counters_left: Vec<u32> = download(&ctx.stream, &counters)?;
    // The same attention writing its outputs' planes too (before the positions move on).
    let with_planes = if launch::decode_seqs::seqs_planes_supported(shape) {
        let mut od2 = poisoned(&ctx.stream, out_len)?;
        let mut planes = B1Planes::new_rows(&ctx.stream, shape.q_len(), rows)?;
        let work = AttentionScratch { partials: &mut partials, counters: &mut counters };
        launch::decode_seqs::attention_decode_seqs_planes(ctx.gpu(), &qd, &table, layer, work, &mut od2, &mut planes)?;
        Some((download(&ctx.stream, &od2)?, planes))
    } else {
        None
    };
    launch::decode_seqs::position_advance_seqs(ctx.gpu(), &table)?;
    let mut positions_after = Vec::new();
    for p in &pos_d {
        positions_after.push(download(&ctx.stream, p)?[0]);
    }

    // 1. qk_norm_rope + KV write: each table row against the reference on that row at its
    // position (qk_norm_rope_kv_write's bounds, attention.rs); untouched rows, blocks and the
    // other layer's pools exact.
    let mut want = qkv.clone();
    let mut bound = vec![0.0f64; qkv.len()];
    let mut pools_want = pools.clone();
    let mut k_bounds = vec![0.0f64; pool_len];
    for s in &seqs {
        let r = s.row * row_len..(s.row + 1) * row_len;
        let p = ops::qk_norm_rope::Params { shape, rot_dims, q_norm: &qn[..], k_norm: &kn[..], eps: EPS, rope: &rope };
        ops::qk_norm_rope::reference(p, &mut want[r.clone()], 1, s.pos)?;
        let b = qk_norm_rope_bound(&qkv[r.clone()], 1, shape, rot_dims, &qn, &kn, &rope, s.pos);
        bound[r.clone()].copy_from_slice(&b);
        let (kw, vw) = &mut pools_want[layer];
        let rows1 = QkvRows { qkv: &want[r.clone()], m: 1, shape, pos0: s.pos };
        ops::kv_write::reference(rows1, KvCache { k: &mut kw[..], v: &mut vw[..], table: &s.table, max_seq })?;
        for head in 0..shape.n_kv {
            let at = ops::kv_row_offset(shape, s.table[s.pos / ops::KV_BLOCK], head, s.pos);
            for d in 0..hd {
                // The stored k: f16 of values within the qk bound: that bound plus one f16 ulp.
                k_bounds[at + d] = b[(shape.n_q + head) * hd + d] + kw[at + d].to_f64().abs() * f64::powi(2.0, -10) + f64::powi(2.0, -24);
            }
        }
    }
    let (mut got_c, mut want_c, mut bound_c) = (Vec::new(), Vec::new(), Vec::new());
    for (l, ((kg, vg), (kw, vw))) in pools_after.iter().zip(&pools_want).enumerate() {
        got_c.extend(kg.iter().chain(vg).map(|h| h.to_f32()));
        want_c.extend(kw.iter().chain(vw).map(|h| h.to_f32()));
        if l == layer {
            bound_c.extend(&k_bounds);
        } else {
            bound_c.extend(std::iter::repeat_n(0.0, pool_len));
        }
        bound_c.extend(std::iter::repeat_n(0.0, pool_len));
    }
    // NaN positions compare equal to NaN references only if the comparison treats them alike:
    // both sides hold the same NaN there, so map them to a sentinel first.
    let unnan = |v: &mut Vec<f32>| v.iter_mut().filter(|x| x.is_nan()).for_each(|x| *x = -7777.0);
    let (mut got_c, mut want_c) = (got_c, want_c);
    unnan(&mut got_c);
    unnan(&mut want_c);
    let mut got_all = qkv_after.clone();
    got_all.extend(&got_c);
    let mut want_all = want.clone();
    want_all.extend(&want_c);
    let n_qkv = qkv.len();
    let cmp = Comparison::of(&got_all, &want_all, |i| if i < n_qkv { bound[i] } else { bound_c[i - n_qkv] });
    let spread = match positions {
        [one] => format!("pos={one}"),
        _ => format!("pos={}..{}", positions.iter().min().unwrap_or(&0), positions.iter().max().unwrap_or(&0)),
    };
    ctx.record("qk_norm_rope_kv_write_seqs", &format!("{} rot={rot_dims} seqs={n} {spread}", g.name), cmp);

    // 2. Attention on the device's own qkv and pools: each table row against the reference
    // over that sequence's blocks (the decode kernel's bound); counters left zero.
    let (mut got_a, mut want_a, mut bound_a) = (Vec::new(), Vec::new(), Vec::new());
    for s in &seqs {
        let q_row = &qkv_after[s.row * row_len..(s.row + 1) * row_len];
        let (kc, vc) = &pools_after[layer];
        let cache = KvCache { k: &kc[..], v: &vc[..], table: &s.table[..], max_seq };
        let mut o = vec![0.0f32; shape.q_len()];
        ops::attention::reference(QkvRows { qkv: q_row, m: 1, shape, pos0: s.pos }, cache, &mut o)?;
        let inputs = BoundInputs { qkv: q_row, m: 1, shape, pos0: s.pos, cache };
        bound_a.extend(decode_bound(&inputs));
        got_a.extend_from_slice(&out[s.row * shape.q_len()..(s.row + 1) * shape.q_len()]);
        want_a.extend(o);
    }
    let n_out = got_a.len();
    got_a.extend(counters_left.iter().map(|&c| c as f32));
    want_a.extend(std::iter::repeat_n(0.0f32, counters_left.len()));
    let cmp = Comparison::of(&got_a, &want_a, |i| if i < n_out { bound_a[i] } else { 0.0 });
    let entry = format!("attention_decode_g{}_hd{hd}_seqs", shape.n_q / shape.n_kv);
    ctx.record("attention_decode_seqs", &format!("{} seqs={n} {entry}", g.name), cmp);

    // 2b. With the outputs' planes (groups 1 / 2 / 4 / 8 at head_dim 128): the same outputs bit
    // for bit (the same kernel body), and each sequence's row of planes exactly what
    // gemv_b1_prepare makes of its output row (the same arithmetic on the same floats).
    if let Some((out2, planes)) = &with_planes {
        let k = shape.q_len();
        let label = format!("{} seqs={n} attention_decode_g{}_hd{hd}_seqs_planes", g.name, shape.n_q / shape.n_kv);
        ctx.record("attention_decode_seqs", &format!("{label} out"), floats_identical(out2, &out));
        let (got_words, groups) = (planes_words(ctx, planes)?, k / crate::weights::GROUP);
        let (mut got, mut want) = (Vec::new(), Vec::new());
        for s in &seqs {
            let row = upload(&ctx.stream, &out[s.row * k..(s.row + 1) * k])?;
            let mut one = B1Planes::new(&ctx.stream, k)?;
            launch::matmul::prepare_planes(ctx.gpu(), &row, &mut one)?;
            want.extend(planes_words(ctx, &one)?);
            got.extend(row_words(&got_words, rows, groups, s.row));
        }
        ctx.record("attention_decode_seqs", &format!("{label} planes"), words_equal(&got, &want));
    }

    // 3. Positions: each one up by one, exactly.
    let got_p: Vec<f32> = positions_after.iter().map(|&p| p as f32).collect();
    let want_p: Vec<f32> = seqs.iter().map(|s| (s.pos + 1) as f32).collect();
    ctx.record("position_advance_seqs", &format!("{} seqs={n}", g.name), Comparison::of(&got_p, &want_p, |_| 0.0));
    Ok(())
}

/// The batched argmax against the host's first-maximum index per row, exactly; row 1 (when
/// present) all NaN but one value, ties everywhere from a coarse grid of values.
fn argmax_rows(ctx: &mut Ctx, rows: usize, n: usize) -> Result<(), VerifyError> {
    let mut x: Vec<f32> = (0..rows * n).map(|_| (ctx.rng.range(-8.0, 8.0) * 4.0).round() / 4.0).collect();
    if rows > 1 {
        x[n..2 * n].iter_mut().for_each(|v| *v = f32::NAN);
        x[n + n / 2] = -3.0;
    }
    let want: Vec<f32> = x
        .chunks(n)
        .map(|row| {
            let mut best: Option<(usize, f32)> = None;
            for (i, &v) in row.iter().enumerate() {
                if !v.is_nan() && best.is_none_or(|(_, b)| v > b) {
                    best = Some((i, v));
                }
            }
            best.map_or(u32::MAX, |(i, _)| i as u32) as f32
        })
        .collect();
    let xd = upload(&ctx.stream, &x)?;
    let mut out = upload(&ctx.stream, &vec![u32::MAX - 1; rows])?;
    let mut keys = upload(&ctx.stream, &vec![0u64; rows])?;
    let mut done = upload(&ctx.stream, &vec![0u32; rows])?;
    launch::argmax::argmax_rows(ctx.gpu(), &xd, rows, n, &mut out, &mut keys, &mut done)?;
    let mut got: Vec<f32> = download(&ctx.stream, &out)?.into_iter().map(|v| v as f32).collect();
    let mut want = want;
    // Keys and counters must be left at zero for the next launch.
    got.extend(download(&ctx.stream, &keys)?.into_iter().map(|v| v as f32));
    got.extend(download(&ctx.stream, &done)?.into_iter().map(|v| v as f32));
    want.extend(std::iter::repeat_n(0.0f32, 2 * rows));
    ctx.record("argmax_rows", &format!("rows={rows} n={n}"), Comparison::of(&got, &want, |_| 0.0));
    Ok(())
}

/// The batched pick (sample_rows) of `rows` rows, every other sequence greedy, rows in reverse
/// sequence order and one sequence in no row: each row's id against the one-row CUDA op
/// (sample_top_k, argmax) on that row with a copy of its sequence's generator, and against the
/// reference; the generators after (a sampled row's advanced once, a greedy one's and the unused
/// one's untouched) and the counters (left zero) exactly.
fn sample_rows(ctx: &mut Ctx, rows: usize, n: usize) -> Result<(), VerifyError> {
    use crate::launch::sample_rows::{RowScratch, SeqSettings};
    use crate::ops::sample_rows::SeqPick;
    use crate::ops::sample_top_k::{SampleParams, Xoshiro256};
    let seqs = rows + 1;
    let sampled = [
        SampleParams { inv_temperature: 1.0 / 0.8, top_k: 40, top_p: 0.95, min_p: 0.05 },
        SampleParams { inv_temperature: 1.0, top_k: 64, top_p: 1.0, min_p: 0.0 },
        SampleParams { inv_temperature: 1.0 / 0.3, top_k: 5, top_p: 0.5, min_p: 0.0 },
    ];
    let picks: Vec<SeqPick> = (0..seqs).map(|s| if s % 2 == 1 { SeqPick::Greedy } else { SeqPick::Sample(sampled[s / 2 % sampled.len()]) }).collect();
    let mut host: Vec<Xoshiro256> = (0..seqs).map(|_| Xoshiro256::new(ctx.rng.next_u64())).collect();
    let row_seqs: Vec<u32> = (0..rows).map(|r| (rows - 1 - r) as u32).collect();
    let mut logits: Vec<f32> = (0..rows * n).map(|_| ctx.rng.range(-6.0, 6.0)).collect();
    for _ in 0..logits.len() / 50 {
        let i = ctx.rng.next_u32() as usize % logits.len();
        logits[i] = f32::NEG_INFINITY;
    }
    let words: Vec<u32> = picks.iter().map(|p| p.device_words()).collect::<Result<Vec<_>, _>>()?.concat();
    let states: Vec<u64> = host.iter().flat_map(|r| r.state()).collect();
    let ld = upload(&ctx.stream, &logits)?;
    let rd = upload(&ctx.stream, &row_seqs)?;
    let sd = upload(&ctx.stream, &words)?;
    let mut gd = upload(&ctx.stream, &states)?;
    let mut candidates = upload(&ctx.stream, &vec![0u64; launch::sample_rows::candidate_scratch_len(rows)])?;
    let mut done = upload(&ctx.stream, &vec![0u32; rows])?;
    let mut out = upload(&ctx.stream, &vec![0x5a5a_5a5au32; rows])?;
    let settings = SeqSettings { settings: &sd, rng: &mut gd, seqs };
    launch::sample_rows::sample_rows(ctx.gpu(), &ld, rows, n, &rd, settings, RowScratch { candidates: &mut candidates, done: &mut done }, &mut out)?;
    let got = download(&ctx.stream, &out)?;
    // The one-row kernels on each row, each on its own copy of its sequence's generator.
    let mut one_row = Vec::with_capacity(rows);
    let mut scratch = upload(&ctx.stream, &vec![0u64; launch::sample_top_k::candidate_scratch_len()])?;
    for (r, &s) in row_seqs.iter().enumerate() {
        let row = upload(&ctx.stream, &logits[r * n..(r + 1) * n])?;
        let mut id = upload(&ctx.stream, &[0u32])?;
        match picks[s as usize] {
            SeqPick::Greedy => launch::argmax::argmax(ctx.gpu(), &row, n, &mut id)?,
            SeqPick::Sample(p) => {
                let mut state = upload(&ctx.stream, &host[s as usize].state())?;
                launch::sample_top_k::sample_top_k(ctx.gpu(), &row, n, &p, &mut state, &mut scratch, &mut id)?;
            }
        }
        one_row.push(download(&ctx.stream, &id)?[0]);
    }
    let want = ops::sample_rows::reference(&logits, n, &row_seqs, &picks, &mut host)?;
    let want_states: Vec<u64> = host.iter().flat_map(|r| r.state()).collect();
    // Exact: ids compare equal unless a draw lands within the device's expf error (2 ulp) of a
    // cumulative boundary, a chance of ~1e-6 per draw; generators and counters bit for bit.
    let mismatches = got.iter().zip(&want).filter(|(g, w)| g != w).count()
        + got.iter().zip(&one_row).filter(|(g, o)| g != o).count()
        + usize::from(download(&ctx.stream, &gd)? != want_states)
        + download(&ctx.stream, &done)?.iter().filter(|&&d| d != 0).count();
    let cmp = Comparison::of(&[mismatches as f32], &[0.0], |_| 0.0);
    ctx.record("sample_rows", &format!("rows={rows} n={n} (half greedy)"), cmp);
    Ok(())
}

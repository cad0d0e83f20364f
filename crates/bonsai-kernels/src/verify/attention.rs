//! Checks of the position-dependent ops: qk_norm_rope, kv_write, attention (decode and prefill).

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};
use half::f16;
use rayon::prelude::*;

use super::attention_mma::prefill_mma_bound;
use super::gpu::{download, poisoned, upload};
use super::shapes::{Geometry, ShapeSet, MODELS, SMALL};
use super::{Comparison, Ctx, VerifyError, F32_UNIT_ROUNDOFF as U};
use crate::launch;
use crate::launch::attention::PrefillKernel;
use crate::launch::qk_norm_rope::RopeTableView;
use crate::ops::{self, HeadShape, KvCache, QkvRows};
use crate::rope::RopeTable;

const ROPE_THETA: f64 = 1e6;
const EPS: f32 = 1e-6;

fn head_shape(g: &Geometry) -> HeadShape {
    HeadShape { n_q: g.n_q, n_kv: g.n_kv, head_dim: g.head_dim }
}

pub(crate) fn run_all(ctx: &mut Ctx, set: ShapeSet) -> Result<(), VerifyError> {
    // (geometry, m tokens, pos0): decode at seq 1, 2, 32, 34, 100, 1001, 4097, 8192 (the decode
    // kernel's split edges: lengths below, at and past a multiple of its 16-key alignment and of
    // its up-to-32 splits; 101 and 1001 are multiples of neither); prefill chunks, odd m.
    let mut cases: Vec<(Geometry, usize, usize)> = vec![
        (SMALL, 1, 0),
        (SMALL, 1, 1),
        (SMALL, 1, 31),
        (SMALL, 1, 33),
        (SMALL, 1, 99),
        (SMALL, 1, 100),
        (SMALL, 1, 1000),
        (SMALL, 1, 4096),
        (SMALL, 1, 8191),
        (SMALL, 7, 93),
        (SMALL, 33, 0),
        (SMALL, 33, 300),
    ];
    if set == ShapeSet::All {
        for g in MODELS.iter().take(3) {
            cases.push((*g, 1, 4096));
            cases.push((*g, 33, 67));
        }
        cases.push((MODELS[2], 1, 8191));
        cases.push((MODELS[2], 1, 32767));
        cases.push((MODELS[0], 512, 0));
        for pos0 in [0, 1, 31, 33, 1000] {
            cases.push((MODELS[2], 1, pos0));
        }
    }
    for &(g, m, pos0) in &cases {
        qk_norm_rope(ctx, &g, m, pos0, g.head_dim)?;
        kv_write(ctx, &g, m, pos0)?;
        qk_norm_rope_kv_write(ctx, &g, m, pos0, g.head_dim)?;
        attention_rows(ctx, &g, m, pos0, CacheSize::Live, PrefillKernel::SplitKeys)?;
    }
    // Partial RoPE: Bonsai 2's attention heads (64 of 256 dims rotated, 6 q heads per kv head),
    // and a quarter and an odd share of SMALL's 64.
    for (g, rot_dims) in [(QWEN35_HEADS, 64), (SMALL, 16), (SMALL, 6)] {
        for (m, pos0) in [(1, 1000), (7, 93)] {
            qk_norm_rope(ctx, &g, m, pos0, rot_dims)?;
            qk_norm_rope_kv_write(ctx, &g, m, pos0, rot_dims)?;
        }
    }
    // The decode kernel's other lane layouts on small shapes (so the emulator runs them too):
    // G 4 at head_dim 128 (the Bonsai models' 16-dim lanes, 2 loads per step) and G 8 (8-dim lanes).
    for g in [DECODE_WIDE_LANES, DECODE_NARROW_LANES] {
        for pos0 in [0, 33, 1000, 8191] {
            attention_rows(ctx, &g, 1, pos0, CacheSize::Live, PrefillKernel::SplitKeys)?;
        }
    }
    // The decode entry points GENERAL's rows below do not reach (groups 3..7 at head_dim 64 and
    // 128, 1 and 2 at 256), each past 128 keys (a merge of several splits).
    for g in &DECODE_GROUPS {
        attention_rows(ctx, g, 1, 1000, CacheSize::Live, PrefillKernel::SplitKeys)?;
    }
    // A captured decode graph: the cache (and the host's bound) far past the live length.
    attention_rows(ctx, &SMALL, 1, 40, CacheSize::Graph, PrefillKernel::SplitKeys)?;
    if set == ShapeSet::All {
        attention_rows(ctx, &MODELS[2], 1, 77, CacheSize::Graph, PrefillKernel::SplitKeys)?;
    }
    // Bonsai 2's attention heads (G 6, head_dim 256: narrow lanes, 4-key steps, two passes of
    // the warps' sums): decode from the first key through one split (up to 128 keys: 40 is the
    // profiled context) to several merged ones, in a graph-sized cache too; a small batch on
    // split keys. The whole 27B layer (4 kv heads) at depth on the device only.
    for pos0 in [0, 39, 127, 128, 1000, 4097] {
        attention_rows(ctx, &QWEN35_HEADS, 1, pos0, CacheSize::Live, PrefillKernel::SplitKeys)?;
    }
    attention_rows(ctx, &QWEN35_HEADS, 1, 39, CacheSize::Graph, PrefillKernel::SplitKeys)?;
    attention_rows(ctx, &QWEN35_HEADS, 5, 60, CacheSize::Live, PrefillKernel::SplitKeys)?;
    if set == ShapeSet::All {
        attention_rows(ctx, &BONSAI2_27B_HEADS, 1, 39, CacheSize::Graph, PrefillKernel::SplitKeys)?;
        attention_rows(ctx, &BONSAI2_27B_HEADS, 1, 32767, CacheSize::Live, PrefillKernel::SplitKeys)?;
    }
    // Head shapes beyond the models' (GENERAL): the per-head ops at a small batch, then decode, a
    // small batch and a prefill chunk on the kernel the launcher picks (split keys for the prefill
    // chunk here; the tensor-core rows are attention_mma's). Positions span several splits of
    // either split size.
    for g in &GENERAL {
        let (m, pos0) = GENERAL_BATCH;
        qk_norm_rope(ctx, g, m, pos0, g.head_dim)?;
        kv_write(ctx, g, m, pos0)?;
        qk_norm_rope_kv_write(ctx, g, m, pos0, g.head_dim)?;
        for (m, pos0) in [GENERAL_DECODE, GENERAL_BATCH, GENERAL_PREFILL] {
            attention_rows(ctx, g, m, pos0, CacheSize::Live, PrefillKernel::SplitKeys)?;
        }
    }
    let (m, pos0) = GENERAL_BATCH;
    qk_norm_rope_kv_write(ctx, &ODD_PAIRS, m, pos0, ODD_PAIRS.head_dim)?;
    for (m, pos0) in [GENERAL_DECODE, GENERAL_BATCH] {
        attention_rows(ctx, &ODD_PAIRS, m, pos0, CacheSize::Live, PrefillKernel::SplitKeys)?;
    }
    Ok(())
}

/// Attention-only head shapes (hidden/ffn unused) covering the GQA groups and head_dims the
/// models do not: groups 1, 2, 3, 4, 5, 8, 16 and 17 (a group over ATT_ROWS = 16, cut into head
/// chunks of 9 and 8), head_dim 64, 80 (a multiple of 4, not of 32), 128 and 256, and below 130
/// (2 mod 4: the wide kernel's pair loads). Group 3 at head_dim 128 is a 6 q / 2 kv head Qwen3
/// geometry.
pub(crate) const GENERAL: [Geometry; 8] = [
    attention_geometry("g3-hd128", 6, 2, 128),
    attention_geometry("g5-hd64", 5, 1, 64),
    attention_geometry("g16-hd64", 16, 1, 64),
    attention_geometry("g17-hd64", 34, 2, 64),
    attention_geometry("g1-hd256", 2, 2, 256),
    attention_geometry("g4-hd256", 8, 2, 256),
    attention_geometry("g8-hd256", 8, 1, 256),
    attention_geometry("g2-hd80", 4, 2, 80),
];
/// A head shape with no other role: hidden = n_q * head_dim, no FFN.
const fn attention_geometry(name: &'static str, n_q: usize, n_kv: usize, head_dim: usize) -> Geometry {
    Geometry { name, hidden: n_q * head_dim, ffn: 0, n_q, n_kv, head_dim, ternary: false }
}
/// Decode-only head shapes for the decode entry points of groups 3, 5, 6, 7 and of head_dim 256
/// that GENERAL leaves out.
const DECODE_GROUPS: [Geometry; 7] = [
    attention_geometry("g3-hd64", 3, 1, 64),
    attention_geometry("g6-hd64", 6, 1, 64),
    attention_geometry("g7-hd64", 14, 2, 64),
    attention_geometry("g5-hd128", 10, 2, 128),
    attention_geometry("g6-hd128", 6, 1, 128),
    attention_geometry("g7-hd128", 7, 1, 128),
    attention_geometry("g2-hd256", 4, 2, 256),
];
/// The 2 mod 4 head_dim (decode and the small batch only: the prefill chunk runs the same kernel).
const ODD_PAIRS: Geometry = attention_geometry("g3-hd130", 3, 1, 130);
/// (m, pos0) of GENERAL's checks: one token at 4 decode splits of 32 keys; 5 tokens over 2 of
/// them; a 33-token chunk over 2 prefill splits of 128 keys.
pub(crate) const GENERAL_DECODE: (usize, usize) = (1, 100);
pub(crate) const GENERAL_BATCH: (usize, usize) = (5, 60);
pub(crate) const GENERAL_PREFILL: (usize, usize) = (33, 150);

/// How big the attention check makes the cache, and the sequence bound it passes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum CacheSize {
    /// A few positions past the live ones; the bound is the live length.
    Live,
    /// GRAPH_CACHE_POSITIONS positions and the bound at the cache size, as a captured decode
    /// graph launches it.
    Graph,
}

/// Attention-only geometries for the decode kernel's lane layouts (hidden/ffn unused here).
pub(crate) const DECODE_WIDE_LANES: Geometry =
    Geometry { name: "g4-hd128", hidden: 1024, ffn: 0, n_q: 8, n_kv: 2, head_dim: 128, ternary: false };
const DECODE_NARROW_LANES: Geometry =
    Geometry { name: "g8-hd64", hidden: 512, ffn: 0, n_q: 8, n_kv: 1, head_dim: 64, ternary: false };

/// Bonsai 2's full-attention heads (reference/bonsai2.md §3.5): 24 q over 4 kv heads of 256 in
/// the model, here one kv head's group of 6 (hidden/ffn unused).
pub(crate) const QWEN35_HEADS: Geometry =
    Geometry { name: "qwen35-hd256", hidden: 1536, ffn: 0, n_q: 6, n_kv: 1, head_dim: 256, ternary: false };
/// All of Bonsai 2 27B's attention heads: 24 q over 4 kv heads of 256.
pub(crate) const BONSAI2_27B_HEADS: Geometry =
    Geometry { name: "bonsai2-27b-attn", hidden: 6144, ffn: 0, n_q: 24, n_kv: 4, head_dim: 256, ternary: false };

/// Cache size of the graph-like attention rows.
const GRAPH_CACHE_POSITIONS: usize = 4096;

fn qk_norm_rope(ctx: &mut Ctx, g: &Geometry, m: usize, pos0: usize, rot_dims: usize) -> Result<(), VerifyError> {
    let shape = head_shape(g);
    let hd = shape.head_dim;
    let row = shape.qkv_row_len();
    let max_pos = pos0 + m + 5;
    let rope = RopeTable::new(rot_dims, max_pos, ROPE_THETA, None);
    let qkv = ctx.rng.activations(m * row, 3.0);
    let qn: Vec<f32> = (0..hd).map(|_| ctx.rng.range(0.5, 1.5)).collect();
    let kn: Vec<f32> = (0..hd).map(|_| ctx.rng.range(0.5, 1.5)).collect();
    let mut want = qkv.clone();
    let p = ops::qk_norm_rope::Params { shape, rot_dims, q_norm: &qn[..], k_norm: &kn[..], eps: EPS, rope: &rope };
    ops::qk_norm_rope::reference(p, &mut want, m, pos0)?;
    let mut qd = upload(&ctx.stream, &qkv)?;
    let (qnd, knd) = (upload(&ctx.stream, &qn)?, upload(&ctx.stream, &kn)?);
    let (cd, sd) = (upload(&ctx.stream, &rope.cos)?, upload(&ctx.stream, &rope.sin)?);
    let pd = upload(&ctx.stream, &[pos0 as u32])?;
    let view = RopeTableView { max_pos, cos: &cd, sin: &sd };
    let pd_params = ops::qk_norm_rope::Params { shape, rot_dims, q_norm: &qnd, k_norm: &knd, eps: EPS, rope: &view };
    let no_cache: Option<KvCache<&mut CudaSlice<u16>, &CudaSlice<u32>>> = None;
    launch::qk_norm_rope::qk_norm_rope(ctx.gpu(), &mut qd, m, pd_params, &pd, no_cache)?;
    let got = download(&ctx.stream, &qd)?;
    let bound = qk_norm_rope_bound(&qkv, m, shape, rot_dims, &qn, &kn, &rope, pos0);
    let cmp = Comparison::of(&got, &want, |i| bound[i]);
    ctx.record("qk_norm_rope", &format!("{} rot={rot_dims} m={m} pos0={pos0}", g.name), cmp);
    Ok(())
}

/// Per-element bound of qk_norm_rope (the v part and untouched elements: 0).
#[allow(clippy::too_many_arguments)]
pub(super) fn qk_norm_rope_bound(qkv: &[f32], m: usize, shape: HeadShape, rot_dims: usize, qn: &[f32], kn: &[f32], rope: &RopeTable, pos0: usize) -> Vec<f64> {
    let (hd, row) = (shape.head_dim, shape.qkv_row_len());
    let half = rot_dims / 2;
    // Normalised pair (x1, x2) in f64 and its rotation: the sum of squares is each pair's
    // a^2 + b^2 (2 roundings), then block_sum's tree over the hd / 2 threads: 5 shuffle levels in
    // a warp and ceil(log2(warps)) over the ceil(hd / 64) warps (the zero lanes' adds are exact).
    // Up to head_dim 256 (4 warps) that is <= 7 levels, 9 roundings of positive terms: <= 10u.
    // /hd, +eps and rsqrtf (2 ulp) give inv within 9u, the two products 11u on x1 and x2;
    // rotation adds 2 products and a sum: |err| <= 14u (|x1|+|x2|) (|cos|+|sin|). Factor 2 for
    // second order. Each level past 7 (head_dim > 256) adds u to the sum of squares, u/2 to inv
    // and to x1, x2: u (|x1|+|x2|)(|cos|+|sin|) with the factor 2. The v part is untouched: exact.
    // Partial RoPE: the threads own other pairs but the same tree; a dim past rot_dims is x1
    // alone (11u, no rotation): the same coefficient on |x| covers it.
    let warps = hd.div_ceil(64).max(1);
    let levels = 5 + warps.next_power_of_two().trailing_zeros() as usize;
    let coeff = 28.0 + levels.saturating_sub(7) as f64;
    let heads = shape.n_q + shape.n_kv;
    let mut bound = vec![0.0f64; m * row];
    for i in 0..m {
        let (cos, sin) = rope.row(pos0 + i);
        for h in 0..heads {
            let w = if h < shape.n_q { &qn } else { &kn };
            let x = &qkv[i * row + h * hd..][..hd];
            let ms = x.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / hd as f64;
            let inv = 1.0 / (ms + EPS as f64).sqrt();
            for j in 0..half {
                let x1 = (x[j] as f64 * inv * w[j] as f64).abs();
                let x2 = (x[j + half] as f64 * inv * w[j + half] as f64).abs();
                let b = coeff * U * (x1 + x2) * (cos[j].abs() + sin[j].abs()) as f64 + f32::MIN_POSITIVE as f64;
                bound[i * row + h * hd + j] = b;
                bound[i * row + h * hd + j + half] = b;
            }
            for j in rot_dims..hd {
                let x1 = (x[j] as f64 * inv * w[j] as f64).abs();
                bound[i * row + h * hd + j] = coeff * U * x1 + f32::MIN_POSITIVE as f64;
            }
        }
    }
    bound
}

/// The fused launch against qk_norm_rope then kv_write of the reference.
fn qk_norm_rope_kv_write(ctx: &mut Ctx, g: &Geometry, m: usize, pos0: usize, rot_dims: usize) -> Result<(), VerifyError> {
    let shape = head_shape(g);
    let (hd, row) = (shape.head_dim, shape.qkv_row_len());
    let (max_pos, max_seq) = (pos0 + m + 5, pos0 + m + 3);
    let rope = RopeTable::new(rot_dims, max_pos, ROPE_THETA, None);
    let qkv = ctx.rng.activations(m * row, 3.0);
    let qn: Vec<f32> = (0..hd).map(|_| ctx.rng.range(0.5, 1.5)).collect();
    let kn: Vec<f32> = (0..hd).map(|_| ctx.rng.range(0.5, 1.5)).collect();
    let cache0 = PagedCache::filled(ctx, shape, max_seq);
    let mut want = qkv.clone();
    let p = ops::qk_norm_rope::Params { shape, rot_dims, q_norm: &qn[..], k_norm: &kn[..], eps: EPS, rope: &rope };
    ops::qk_norm_rope::reference(p, &mut want, m, pos0)?;
    let mut cache_want = cache0.clone();
    let rows = ops::QkvRows { qkv: &want[..], m, shape, pos0 };
    ops::kv_write::reference(rows, cache_want.view_mut())?;

    let mut qd = upload(&ctx.stream, &qkv)?;
    let (qnd, knd) = (upload(&ctx.stream, &qn)?, upload(&ctx.stream, &kn)?);
    let (cd, sd) = (upload(&ctx.stream, &rope.cos)?, upload(&ctx.stream, &rope.sin)?);
    let pd = upload(&ctx.stream, &[pos0 as u32])?;
    let mut cache_d = cache0.upload(&ctx.stream)?;
    let view = RopeTableView { max_pos, cos: &cd, sin: &sd };
    let pd_params = ops::qk_norm_rope::Params { shape, rot_dims, q_norm: &qnd, k_norm: &knd, eps: EPS, rope: &view };
    launch::qk_norm_rope::qk_norm_rope(ctx.gpu(), &mut qd, m, pd_params, &pd, Some(cache_d.view_mut()))?;
    let qk_bound = qk_norm_rope_bound(&qkv, m, shape, rot_dims, &qn, &kn, &rope, pos0);
    let mut got = download(&ctx.stream, &qd)?;
    let (k_got, v_got) = cache_d.download(&ctx.stream)?;
    got.extend(k_got.iter().chain(&v_got).map(|h| h.to_f32()));
    let mut all_want = want.clone();
    all_want.extend(cache_want.k.iter().chain(&cache_want.v).map(|h| h.to_f32()));
    // qkv: qk_norm_rope's bound. k pool: the stored k is f16(gpu k) vs f16(reference k); two
    // values within b of each other round to f16 values within b + one f16 ulp of the larger
    // (2^-10 relative for normals, 2^-24 absolute for subnormals); untouched rows and blocks
    // exact. v pool: bit-identical.
    let n_qkv = m * row;
    let mut bound = qk_bound.clone();
    bound.resize(n_qkv + 2 * cache0.k.len(), 0.0);
    for p in pos0..pos0 + m {
        for h in 0..shape.n_kv {
            let at = cache0.row(h, p);
            for d in 0..hd {
                let b = qk_bound[(p - pos0) * row + (shape.n_q + h) * hd + d];
                let k_want = cache_want.k[at + d].to_f64().abs();
                bound[n_qkv + at + d] = b + k_want * f64::powi(2.0, -10) + f64::powi(2.0, -24);
            }
        }
    }
    let cmp = Comparison::of(&got, &all_want, |i| bound[i]);
    ctx.record("qk_norm_rope_kv_write", &format!("{} rot={rot_dims} m={m} pos0={pos0}", g.name), cmp);
    Ok(())
}

/// Random finite f16 cache contents.
fn random_cache(ctx: &mut Ctx, len: usize) -> Vec<f16> {
    (0..len).map(|_| f16::from_f32(ctx.rng.range(-2.0, 2.0))).collect()
}

/// Pool blocks beyond the ones a check's block table names: the table's blocks are drawn in a
/// shuffled order from more blocks than it uses.
pub(super) const SPARE_BLOCKS: usize = 3;

/// A check's paged KV cache on the host ([`KvCache`]): `max_seq` positions of `shape` over pools
/// of a scattered block table with [`SPARE_BLOCKS`] ([`ops::scattered_kv_table`]), so that a kernel
/// reading or writing a position in the wrong block (or as if the cache were contiguous) fails.
#[derive(Clone)]
pub(super) struct PagedCache {
    pub shape: HeadShape,
    pub table: Vec<u32>,
    pub k: Vec<f16>,
    pub v: Vec<f16>,
    pub max_seq: usize,
}

impl PagedCache {
    /// Random finite values in the rows of positions `0..live`, NaN in every other row and block:
    /// what an attention check reads.
    pub fn new(ctx: &mut Ctx, shape: HeadShape, max_seq: usize, live: usize) -> Self {
        let mut cache = Self::with_pools(ctx, shape, max_seq, |_, len| vec![f16::NAN; len]);
        for p in 0..live.min(max_seq) {
            for g in 0..shape.n_kv {
                let at = cache.row(g, p);
                for pool in [&mut cache.k, &mut cache.v] {
                    pool[at..at + shape.head_dim].copy_from_slice(&random_cache(ctx, shape.head_dim));
                }
            }
        }
        cache
    }

    /// Random finite values everywhere: what a write check starts from, so that a stray or
    /// missing write changes a value.
    pub fn filled(ctx: &mut Ctx, shape: HeadShape, max_seq: usize) -> Self {
        Self::with_pools(ctx, shape, max_seq, random_cache)
    }

    /// Random finite values everywhere over the identity table (block i holds positions
    /// 64 i..64 (i + 1)): what the benches time, the pool as one sequence alone lays it out.
    pub fn identity(ctx: &mut Ctx, shape: HeadShape, max_seq: usize) -> Self {
        let table: Vec<u32> = (0..ops::kv_table_len(max_seq) as u32).collect();
        let len = table.len() * ops::kv_block_len(shape);
        let (k, v) = (random_cache(ctx, len), random_cache(ctx, len));
        Self { shape, table, k, v, max_seq }
    }

    fn with_pools(ctx: &mut Ctx, shape: HeadShape, max_seq: usize, pool: impl Fn(&mut Ctx, usize) -> Vec<f16>) -> Self {
        let (table, blocks) = ops::scattered_kv_table(max_seq, SPARE_BLOCKS, |n| ctx.rng.below(n));
        let len = blocks * ops::kv_block_len(shape);
        let (k, v) = (pool(ctx, len), pool(ctx, len));
        Self { shape, table, k, v, max_seq }
    }

    /// The element offset of position `p`'s row of kv head `g` in the pools.
    pub fn row(&self, g: usize, p: usize) -> usize {
        ops::kv_row_offset(self.shape, self.table[p / ops::KV_BLOCK], g, p)
    }

    pub fn view(&self) -> KvCache<&[f16], &[u32]> {
        KvCache { k: &self.k, v: &self.v, table: &self.table, max_seq: self.max_seq }
    }

    pub fn view_mut(&mut self) -> KvCache<&mut [f16], &[u32]> {
        KvCache { k: &mut self.k, v: &mut self.v, table: &self.table, max_seq: self.max_seq }
    }

    /// The pools (as f16 bits) and the table in device memory.
    pub fn upload(&self, stream: &Arc<CudaStream>) -> Result<DeviceCache, VerifyError> {
        Ok(DeviceCache {
            k: upload(stream, &f16_bits(&self.k))?,
            v: upload(stream, &f16_bits(&self.v))?,
            table: upload(stream, &self.table)?,
            max_seq: self.max_seq,
        })
    }
}

/// A [`PagedCache`] in device memory.
pub(super) struct DeviceCache {
    pub k: CudaSlice<u16>,
    pub v: CudaSlice<u16>,
    pub table: CudaSlice<u32>,
    pub max_seq: usize,
}

impl DeviceCache {
    pub fn view(&self) -> KvCache<&CudaSlice<u16>, &CudaSlice<u32>> {
        KvCache { k: &self.k, v: &self.v, table: &self.table, max_seq: self.max_seq }
    }

    pub fn view_mut(&mut self) -> KvCache<&mut CudaSlice<u16>, &CudaSlice<u32>> {
        KvCache { k: &mut self.k, v: &mut self.v, table: &self.table, max_seq: self.max_seq }
    }

    /// Both pools.
    pub fn download(&self, stream: &Arc<CudaStream>) -> Result<(Vec<f16>, Vec<f16>), VerifyError> {
        let as_f16 = |b: Vec<u16>| b.into_iter().map(f16::from_bits).collect::<Vec<f16>>();
        Ok((as_f16(download(stream, &self.k)?), as_f16(download(stream, &self.v)?)))
    }
}

/// f16 values as the u16 bits the device buffers hold.
pub(super) fn f16_bits(c: &[f16]) -> Vec<u16> {
    c.iter().map(|h| h.to_bits()).collect()
}

fn kv_write(ctx: &mut Ctx, g: &Geometry, m: usize, pos0: usize) -> Result<(), VerifyError> {
    let shape = head_shape(g);
    let max_seq = pos0 + m + 3;
    let qkv = ctx.rng.activations(m * shape.qkv_row_len(), 3.0);
    let cache0 = PagedCache::filled(ctx, shape, max_seq);
    let mut cache_want = cache0.clone();
    let rows = ops::QkvRows { qkv: &qkv[..], m, shape, pos0 };
    ops::kv_write::reference(rows, cache_want.view_mut())?;
    let qd = upload(&ctx.stream, &qkv)?;
    let mut cache_d = cache0.upload(&ctx.stream)?;
    let pd = upload(&ctx.stream, &[pos0 as u32])?;
    launch::kv_write::kv_write(ctx.gpu(), QkvRows { qkv: &qd, m, shape, pos0: &pd }, cache_d.view_mut())?;
    let (k_got, v_got) = cache_d.download(&ctx.stream)?;
    let got: Vec<f32> = k_got.iter().chain(&v_got).map(|h| h.to_f32()).collect();
    let want: Vec<f32> = cache_want.k.iter().chain(&cache_want.v).map(|h| h.to_f32()).collect();
    // Round-to-nearest-even f32 -> f16 on both sides, untouched elsewhere (every other row and
    // block of the pools): bit-identical.
    let cmp = Comparison::of(&got, &want, |_| 0.0);
    ctx.record("kv_write", &format!("{} m={m} pos0={pos0}", g.name), cmp);
    Ok(())
}

/// One check of the attention launch with the prefill kernel `kernel` (used for m > 8 only).
pub(crate) fn attention_rows(
    ctx: &mut Ctx,
    g: &Geometry,
    m: usize,
    pos0: usize,
    cache: CacheSize,
    kernel: PrefillKernel,
) -> Result<(), VerifyError> {
    let shape = head_shape(g);
    // The kernel the launch runs (the tensor-core one only where this device fits it): its bound
    // and its name on the row.
    let chosen = launch::attention::choose_kernel_on(ctx.gpu(), m, shape, kernel)?;
    let mma = matches!(chosen, launch::attention::AttentionKernel::PrefillMma(_));
    let row = shape.qkv_row_len();
    let max_seq = match cache {
        CacheSize::Live => pos0 + m + 3,
        CacheSize::Graph => GRAPH_CACHE_POSITIONS.max(pos0 + m),
    };
    let qkv = ctx.rng.activations(m * row, 2.0);
    // Positions past the last token and the spare blocks are NaN: a kernel that reads beyond the
    // causal limit, or from a block the table does not name there, fails.
    let cache_h = PagedCache::new(ctx, shape, max_seq, pos0 + m);
    let out_row = shape.q_len();
    let mut want = vec![0.0f32; m * out_row];
    want.par_chunks_mut(out_row).enumerate().try_for_each(|(i, o)| {
        let rows = ops::QkvRows { qkv: &qkv[i * row..(i + 1) * row], m: 1, shape, pos0: pos0 + i };
        ops::attention::reference(rows, cache_h.view(), o)
    })?;
    let inputs = BoundInputs { qkv: &qkv, m, shape, pos0, cache: cache_h.view() };
    let bound = if mma { prefill_mma_bound(&inputs) } else { decode_bound(&inputs) };
    debug_assert_eq!(bound.len(), m * out_row);
    let qd = upload(&ctx.stream, &qkv)?;
    let cache_d = cache_h.upload(&ctx.stream)?;
    let pd = upload(&ctx.stream, &[pos0 as u32])?;
    let seq_bound = match cache {
        CacheSize::Live => pos0 + m,
        CacheSize::Graph => max_seq,
    };
    let mut scratch = poisoned(&ctx.stream, launch::attention::scratch_len(m, shape, seq_bound))?;
    let mut od = poisoned(&ctx.stream, m * out_row)?;
    let mut counters = upload(&ctx.stream, &vec![0u32; launch::attention::counters_len(m, shape)])?;
    launch::attention::attention(
        ctx.gpu(),
        QkvRows { qkv: &qd, m, shape, pos0: &pd },
        cache_d.view(),
        seq_bound,
        launch::attention::AttentionScratch { partials: &mut scratch, counters: &mut counters },
        &mut od,
        kernel,
    )?;
    let mut got = download(&ctx.stream, &od)?;
    // The launch must leave its counters at zero (the next launch, or graph replay, relies on it):
    // appended as extra elements with bound 0.
    let left: Vec<u32> = download(&ctx.stream, &counters)?;
    got.extend(left.iter().map(|&c| c as f32));
    want.extend(std::iter::repeat_n(0.0f32, left.len()));
    let n_out = m * out_row;
    let cmp = Comparison::of(&got, &want, |i| if i < n_out { bound[i] } else { 0.0 });
    let graph = if cache == CacheSize::Graph { format!(" max_seq={max_seq} (graph bound)") } else { String::new() };
    let op = if mma { "attention_prefill_mma" } else { "attention" };
    ctx.record(op, &format!("{} m={m} pos0={pos0} seq={}{graph} {}", g.name, pos0 + m, chosen.entry_point()), cmp);
    Ok(())
}

/// The decode / split-key kernels' per-element bound for m query rows (token i at pos0 + i) over
/// the caches (the tensor-core prefill kernel has its own, attention_mma.rs).
pub(super) fn decode_bound(inputs: &BoundInputs<'_>) -> Vec<f64> {
    let hd = inputs.shape.head_dim;
    // Per (token, head) bound. Scores: q*scale rounds once, then hd sequential fmaf:
    // |ds| <= (hd + 1)u max_j sum_d |q_d k_jd| / sqrt(hd); exp(s - max) adds 2 ulp and the
    // rounding of s - max (u |s - max|). A score error ds moves the output by at most
    // ds * max|v_j - o| <= 2 ds max|v|. The weighted sums run sequentially over the keys of a
    // split with a rescale per 32-key chunk, then a combine over splits: (seq + seq/16 + 16)u
    // relative on both numerator and denominator, i.e. 2 (seq + seq/16 + 16)u max|v|.
    // The decode kernel (m = 1) folds log2(e) into the scale and uses exp2 (2 ulp, as expf):
    // the folded constant rsqrtf(hd) * log2e carries <= 2 ulp + 2 roundings = 6u relative, i.e.
    // <= 6u max_j sum_d |q_d k_jd| / sqrt(hd) more on every score; the rounding of s' - max'
    // in log2 units is u |s' - max'| = u |s - max| / ln 2, a relative weight error of
    // u |s - max| as before. Its flush-to-zero drops weights below 2^-126 (max weight 1, sum
    // >= 1): <= seq 2^-126 2 max|v|. Its sums: a lane adds <= seq/2 keys with one rescale per
    // 8-key step (<= seq/8 + 1, each also an exp2 correction of <= 3u + u|dmax| on both sums),
    // then <= 3 shuffle adds (the 8 key slots of a warp at head_dim 64), 8 warps and <= 32 splits
    // (43 adds): within 2 (seq + seq/4 + 48)u max|v|, which also covers the split-key kernel's
    // chain; the test uses that one bound.
    // Neither kernel's chains depend on the GQA group (each row's are its own). At head_dim 256
    // the decode kernel's score is two 8-long chains and 4 shuffle levels (14 roundings with the
    // scaling of q, inside (hd + 7)u) and a lane takes 4 keys of each 8-key step (<= seq/2) with
    // 1 shuffle add after; with the narrow lanes of G 6 it is two 4-long chains and 5 shuffle
    // levels (11 roundings), and a lane takes every key of its warp's 4-key steps, the 8 warps
    // taking turns: <= seq/8 + 4 keys and <= seq/32 + 1 rescales of 3u, (seq/8 + 4) +
    // 3 (seq/32 + 1) <= seq/4 + 7 roundings, no shuffle add (inside the chain above); the two
    // passes of the warps' sums through shared memory change no arithmetic. The
    // split-key kernels' dot is hd sequential fmaf at every head_dim up
    // to 256 (the _hd256 entry point's zero-padded dims at a head_dim of 2 mod 4 add exact
    // zeros). So the bound holds as derived, with the row's hd.
    bound_per_head(inputs, |p, st| {
        let seq = (p + 1) as f64;
        let ds = (hd as f64 + 7.0) * U * st.qk_abs + 3.0 * U + U * (st.s_max - st.s_min);
        let flushed = seq * f64::powi(2.0, -126) * 2.0 * st.v_max;
        let bnd = 2.0 * ds * st.v_max + 2.0 * (seq + seq / 4.0 + 48.0) * U * st.v_max + flushed;
        2.0 * bnd
    })
}

/// What an attention bound needs of one (token, q head) over its keys 0..=p, in f64: the largest
/// sum_d |q_d k_jd| / sqrt(hd), the largest sum_d |k_jd|, the scaled scores' range, max |v|.
pub(super) struct HeadStats {
    pub qk_abs: f64,
    pub k_abs: f64,
    pub s_min: f64,
    pub s_max: f64,
    pub v_max: f64,
}

/// An attention check's inputs, as its bounds read them: m query rows of qkv (token i at
/// position pos0 + i) over a paged cache.
pub(super) struct BoundInputs<'a> {
    pub qkv: &'a [f32],
    pub m: usize,
    pub shape: HeadShape,
    pub pos0: usize,
    pub cache: KvCache<&'a [f16], &'a [u32]>,
}

/// A per-element bound for the rows of `inputs`, one value per (token, q head):
/// `head_bound(p, stats)` for the token at position p.
pub(super) fn bound_per_head(inputs: &BoundInputs<'_>, head_bound: impl Fn(usize, &HeadStats) -> f64 + Sync) -> Vec<f64> {
    let BoundInputs { qkv, m, shape, pos0, cache } = *inputs;
    let KvCache { k: kc, v: vc, table, .. } = cache;
    let (hd, row, out_row) = (shape.head_dim, shape.qkv_row_len(), shape.q_len());
    let scale = 1.0 / (hd as f64).sqrt();
    let mut bound = vec![0.0f64; m * out_row];
    bound.par_chunks_mut(out_row).enumerate().for_each(|(i, b)| {
        let p = pos0 + i;
        for h in 0..shape.n_q {
            let kvh = h / shape.group_size();
            let q = &qkv[i * row + h * hd..][..hd];
            let at = |j: usize| ops::kv_row_offset(shape, table[j / ops::KV_BLOCK], kvh, j);
            let mut st = HeadStats { qk_abs: 0.0, k_abs: 0.0, s_min: f64::MAX, s_max: f64::MIN, v_max: 0.0 };
            for j in 0..=p {
                let (k, v) = (&kc[at(j)..at(j) + hd], &vc[at(j)..at(j) + hd]);
                let (mut s, mut a, mut ka) = (0.0, 0.0, 0.0);
                for d in 0..hd {
                    let (qd, kd) = (q[d] as f64, k[d].to_f64());
                    s += qd * kd;
                    a += (qd * kd).abs();
                    ka += kd.abs();
                    st.v_max = st.v_max.max(v[d].to_f64().abs());
                }
                st.qk_abs = st.qk_abs.max(a * scale);
                st.k_abs = st.k_abs.max(ka);
                st.s_min = st.s_min.min(s * scale);
                st.s_max = st.s_max.max(s * scale);
            }
            let bnd = head_bound(p, &st);
            b[h * hd..(h + 1) * hd].iter_mut().for_each(|x| *x = bnd);
        }
    });
    bound
}

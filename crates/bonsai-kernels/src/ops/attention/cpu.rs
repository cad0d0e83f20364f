//! Fast CPU version: the CPU pool over (token, kv head) tasks; the query heads of one GQA group
//! share each converted k/v row. Two passes over the cache (scores, then the weighted v sum) instead of an
//! online softmax: the score buffer is only (group)·(p + 1) floats, and every exp runs once.

use super::check_shapes;
use crate::cpu::pool::{self, Split};
use crate::cpu::{dot_lanes, simd_level, simd_variants, with_scratch, SimdLevel, LANES};
use crate::ops::{kv_row_offset, HeadShape, KvCache, OpError, QkvRows, KV_BLOCK};
use half::{f16, slice::HalfFloatSliceExt};

pub fn cpu(rows: QkvRows<'_>, cache: KvCache<&[f16], &[u32]>, out: &mut [f32]) -> Result<(), OpError> {
    cpu_at(simd_level(), rows, cache, out)
}

/// [`cpu`] at an explicit SIMD level.
pub fn cpu_at(level: SimdLevel, rows: QkvRows<'_>, cache: KvCache<&[f16], &[u32]>, out: &mut [f32]) -> Result<(), OpError> {
    check_shapes(&rows, &cache, out)?;
    let QkvRows { qkv, m, shape, pos0 } = rows;
    let KvCache { k: k_cache, v: v_cache, table, max_seq } = cache;
    let hd = shape.head_dim;
    let group = shape.group_size();
    // A task reads up to (pos0 + m)·hd cached values from each of K and V: few positions make
    // several tasks one thread's work. A task's cost grows with its token's position (causal),
    // so prefill is cut into several parts per thread, which the threads claim as they finish.
    let split = Split::new(1, pool::MIN_ELEMENTS_PER_PART.div_ceil(2 * (pos0 + m) * hd)).parts_per_thread(8);
    // Query heads g·group .. (g + 1)·group are contiguous in q and in out.
    pool::for_each_rows_mut(out, group * hd, split, &|tasks, out_groups| {
        for (task, out_group) in tasks.zip(out_groups.chunks_exact_mut(group * hd)) {
            let (i, g) = (task / shape.n_kv, task % shape.n_kv);
            let n_pos = pos0 + i + 1;
            let q = &qkv[i * shape.qkv_row_len() + g * group * hd..][..group * hd];
            let rows = HeadRows { k: k_cache, v: v_cache, table, shape, head: g, n_pos };
            // Scores [group][n_pos], one converted cache row, 1/Σ per head; sized for the whole
            // cache so that the buffer stops growing after a thread's first task.
            with_scratch(group * max_seq + hd + group, |buf| {
                let (scores, rest) = buf.split_at_mut(group * max_seq);
                let (row, inv_totals) = rest.split_at_mut(hd);
                attend_group(level, q, rows, hd, &mut scores[..group * n_pos], row, inv_totals, out_group);
            });
        }
    });
    Ok(())
}

/// Positions `0..n_pos` of one kv head in the paged pools: runs of up to KV_BLOCK contiguous rows,
/// one per block (the inner loops then stride through a run as through a contiguous cache).
#[derive(Clone, Copy)]
struct HeadRows<'a> {
    k: &'a [f16],
    v: &'a [f16],
    table: &'a [u32],
    shape: HeadShape,
    head: usize,
    n_pos: usize,
}

impl<'a> HeadRows<'a> {
    /// The head's K rows, one block's run at a time.
    fn k_runs(self) -> impl Iterator<Item = &'a [f16]> {
        self.runs(self.k)
    }

    /// The head's V rows, one block's run at a time.
    fn v_runs(self) -> impl Iterator<Item = &'a [f16]> {
        self.runs(self.v)
    }

    fn runs(self, pool: &'a [f16]) -> impl Iterator<Item = &'a [f16]> {
        let hd = self.shape.head_dim;
        (0..self.n_pos.div_ceil(KV_BLOCK)).map(move |b| {
            let first = b * KV_BLOCK;
            let at = kv_row_offset(self.shape, self.table[b], self.head, first);
            &pool[at..at + (self.n_pos - first).min(KV_BLOCK) * hd]
        })
    }
}

simd_variants! {
    #[allow(clippy::too_many_arguments)]
    fn attend_group(
        q: &[f32],
        rows: HeadRows<'_>,
        hd: usize,
        scores: &mut [f32],
        row: &mut [f32],
        inv_totals: &mut [f32],
        out: &mut [f32],
    ) {
        let n_pos = rows.n_pos;
        let scale = 1.0 / (hd as f32).sqrt();
        for (j, k) in rows.k_runs().flat_map(|run| run.chunks_exact(hd)).enumerate() {
            k.convert_to_f32_slice(row);
            for (head_q, head_scores) in q.chunks_exact(hd).zip(scores.chunks_exact_mut(n_pos)) {
                head_scores[j] = dot_lanes(head_q, row) * scale;
            }
        }
        for (head_scores, inv_total) in scores.chunks_exact_mut(n_pos).zip(inv_totals.iter_mut()) {
            let max = head_scores.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
            let mut lane_sum = [0.0f32; LANES];
            for (j, s) in head_scores.iter_mut().enumerate() {
                *s = (*s - max).exp();
                lane_sum[j % LANES] += *s;
            }
            *inv_total = 1.0 / lane_sum.iter().sum::<f32>();
        }
        out.fill(0.0);
        for (j, v) in rows.v_runs().flat_map(|run| run.chunks_exact(hd)).enumerate() {
            v.convert_to_f32_slice(row);
            for (head_scores, head_out) in scores.chunks_exact(n_pos).zip(out.chunks_exact_mut(hd)) {
                let w = head_scores[j];
                for (o, &vd) in head_out.iter_mut().zip(row.iter()) {
                    *o += w * vd;
                }
            }
        }
        for (head_out, &inv_total) in out.chunks_exact_mut(hd).zip(inv_totals.iter()) {
            head_out.iter_mut().for_each(|o| *o *= inv_total);
        }
    }
}


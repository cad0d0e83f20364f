//! Fast CPU version: flash-style online softmax. A task owns one head and up to
//! [`QUERY_BLOCK`] queries; it walks the head's keys in [`KEY_BLOCK`]-key blocks, and for each
//! query scores the block (8-lane dots), rescales its running sum and accumulator once if the
//! block raised its max, then adds `p·v` for the block's keys (AVX2 copy at run time).

use super::{check_shapes, Inputs, AttnDims};
use crate::cpu::{dot_lanes, simd_level, simd_variants, DisjointWriter, SimdLevel};
use crate::ops::OpError;
use rayon::prelude::*;

/// Queries per task: their K/V block is read once from memory and reused from cache.
pub const QUERY_BLOCK: usize = 16;
/// Keys scored together between rescales (the tolerance counts one rescale per block).
pub const KEY_BLOCK: usize = 64;

pub fn cpu(inputs: Inputs<'_>, out: &mut [f32]) -> Result<(), OpError> {
    cpu_at(simd_level(), inputs, out)
}

/// [`cpu`] at an explicit SIMD level.
pub fn cpu_at(level: SimdLevel, inputs: Inputs<'_>, out: &mut [f32]) -> Result<(), OpError> {
    check_shapes(&inputs, out)?;
    let Inputs { dims, q, k, v } = inputs;
    let blocks_per_head = dims.seq.div_ceil(QUERY_BLOCK);
    let writer = DisjointWriter::new(out);
    (0..dims.heads * blocks_per_head).into_par_iter().for_each(|task| {
        let head = task / blocks_per_head;
        let q0 = (task % blocks_per_head) * QUERY_BLOCK;
        let q1 = (q0 + QUERY_BLOCK).min(dims.seq);
        // Tasks own disjoint (head, query range) pairs, i.e. disjoint out[i, head·hd..] slices.
        query_block(level, dims, q, k, v, QueryRun { head, q0, q1 }, writer);
    });
    Ok(())
}

/// Queries `q0..q1` of head `head`: one task's share.
#[derive(Clone, Copy)]
struct QueryRun {
    head: usize,
    q0: usize,
    q1: usize,
}

simd_variants! {
    /// Attention of queries `q0..q1` of `head` over all keys, written to `out`.
    fn query_block(
        dims: AttnDims,
        q: &[f32],
        k: &[f32],
        v: &[f32],
        run: QueryRun,
        out: DisjointWriter,
    ) {
        let QueryRun { head, q0, q1 } = run;
        let AttnDims { heads, seq, head_dim: hd } = dims;
        let scale = dims.scale() as f32;
        let head_base = head * seq * hd;
        let queries = q1 - q0;
        let mut running_max = [f32::NEG_INFINITY; QUERY_BLOCK];
        let mut running_sum = [0.0f32; QUERY_BLOCK];
        let mut acc = vec![0.0f32; queries * hd];
        let mut probs = [0.0f32; KEY_BLOCK];
        for k0 in (0..seq).step_by(KEY_BLOCK) {
            let k1 = (k0 + KEY_BLOCK).min(seq);
            let k_block = &k[head_base + k0 * hd..head_base + k1 * hd];
            let v_block = &v[head_base + k0 * hd..head_base + k1 * hd];
            for (qi, acc_row) in acc.chunks_exact_mut(hd).enumerate() {
                let q_row = &q[head_base + (q0 + qi) * hd..head_base + (q0 + qi + 1) * hd];
                let scores = &mut probs[..k1 - k0];
                for (s, k_row) in scores.iter_mut().zip(k_block.chunks_exact(hd)) {
                    *s = dot_lanes(q_row, k_row) * scale;
                }
                let block_max = scores.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
                let new_max = running_max[qi].max(block_max);
                if new_max > running_max[qi] {
                    // exp(−inf) = 0 on the first block, where sum and acc are still 0 anyway.
                    let factor = (running_max[qi] - new_max).exp();
                    running_sum[qi] *= factor;
                    acc_row.iter_mut().for_each(|a| *a *= factor);
                    running_max[qi] = new_max;
                }
                for (s, v_row) in scores.iter_mut().zip(v_block.chunks_exact(hd)) {
                    let p = (*s - new_max).exp();
                    running_sum[qi] += p;
                    for (a, &x) in acc_row.iter_mut().zip(v_row) {
                        *a += p * x;
                    }
                }
            }
        }
        for (qi, acc_row) in acc.chunks_exact(hd).enumerate() {
            let base = (q0 + qi) * heads * hd + head * hd;
            for (d, &a) in acc_row.iter().enumerate() {
                // SAFETY: only this task writes row q0 + qi, columns head·hd.., (see the caller);
                // `out` outlives the parallel loop.
                unsafe { *out.slot(base + d) = a / running_sum[qi] };
            }
        }
    }
}


//! The definition, in f64 (two passes: scores and max, then normalised weights).

use super::check_shapes;
use crate::ops::{kv_row_offset, KvCache, OpError, QkvRows, KV_BLOCK};
use half::f16;

pub fn reference(rows: QkvRows<'_>, cache: KvCache<&[f16], &[u32]>, out: &mut [f32]) -> Result<(), OpError> {
    check_shapes(&rows, &cache, out)?;
    let QkvRows { qkv, m, shape, pos0 } = rows;
    let KvCache { k: k_cache, v: v_cache, table, .. } = cache;
    let hd = shape.head_dim;
    let scale = 1.0 / (hd as f64).sqrt();
    for i in 0..m {
        let p = pos0 + i;
        for h in 0..shape.n_q {
            let g = h / shape.group_size();
            let q = &qkv[i * shape.qkv_row_len() + h * hd..][..hd];
            let at = |j: usize, d: usize| kv_row_offset(shape, table[j / KV_BLOCK], g, j) + d;
            let scores: Vec<f64> = (0..=p)
                .map(|j| {
                    (0..hd).map(|d| q[d] as f64 * k_cache[at(j, d)].to_f64()).sum::<f64>() * scale
                })
                .collect();
            let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
            let total: f64 = weights.iter().sum();
            for d in 0..hd {
                let acc: f64 = (0..=p).map(|j| weights[j] * v_cache[at(j, d)].to_f64()).sum();
                out[i * shape.q_len() + h * hd + d] = (acc / total) as f32;
            }
        }
    }
    Ok(())
}

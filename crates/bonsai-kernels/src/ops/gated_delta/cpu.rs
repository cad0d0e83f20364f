//! Fast CPU version: q̂, k̂ and the gates for every row first, then rayon over V heads, each running
//! its rows' recurrence on its own d×d state in two passes over the state per row (decay and
//! Sᵀk̂; rank-1 update and Sᵀq̂), vectorised along the value index j.

use super::{DeltaShape, L2_NORM_EPS};
use crate::cpu::dot_lanes;
use crate::ops::OpError;
use rayon::prelude::*;

/// `ln(1 + e^x)` in f32 without overflow.
#[inline(always)]
pub(crate) fn softplus_f32(x: f32) -> f32 {
    x.max(0.0) + (-x.abs()).exp().ln_1p()
}

/// `1 / (1 + e^-x)` in f32 through `e^-|x|` (never overflows).
#[inline(always)]
pub(crate) fn sigmoid_f32(x: f32) -> f32 {
    let e = (-x.abs()).exp();
    if x >= 0.0 { 1.0 / (1.0 + e) } else { e / (1.0 + e) }
}

/// `out = x·rsqrt(Σx² + eps)·scale` in f32.
fn l2_normalize_into(x: &[f32], scale: f32, out: &mut [f32]) {
    let r = 1.0 / (dot_lanes(x, x) + L2_NORM_EPS).sqrt();
    for (o, &v) in out.iter_mut().zip(x) {
        *o = v * r * scale;
    }
}

#[allow(clippy::too_many_arguments)]
pub fn cpu(
    shape: DeltaShape,
    conv_out: &[f32],
    alpha: &[f32],
    beta: &[f32],
    ssm_a: &[f32],
    dt_bias: &[f32],
    state: &mut [f32],
    out: &mut [f32],
) -> Result<(), OpError> {
    let rows = shape.check(conv_out, alpha, beta, ssm_a, dt_bias, state, out)?;
    if rows == 0 {
        return Ok(());
    }
    let DeltaShape { k_heads, v_heads, head_dim: d } = shape;
    let qk_len = k_heads * d;
    // Normalised q̂ | k̂ per row: [rows, 2·k_heads·d].
    let mut qk = vec![0.0f32; rows * 2 * qk_len];
    let q_scale = 1.0 / (d as f32).sqrt();
    qk.par_chunks_mut(2 * qk_len).zip(conv_out.par_chunks(shape.conv_row_len())).for_each(|(dst, row)| {
        for (head, (o, x)) in dst.chunks_mut(d).zip(row[..2 * qk_len].chunks(d)).enumerate() {
            l2_normalize_into(x, if head < k_heads { q_scale } else { 1.0 }, o);
        }
    });
    // Each head's outputs, [rows, d], scattered into `out` afterwards.
    let per_head: Vec<Vec<f32>> = state
        .par_chunks_mut(d * d)
        .enumerate()
        .map(|(h, s)| {
            let kh = h % k_heads;
            let mut o_rows = vec![0.0f32; rows * d];
            let mut kv = vec![0.0f32; d];
            let mut delta = vec![0.0f32; d];
            for t in 0..rows {
                let q = &qk[t * 2 * qk_len + kh * d..][..d];
                let k = &qk[t * 2 * qk_len + qk_len + kh * d..][..d];
                let v = &conv_out[t * shape.conv_row_len() + 2 * qk_len + h * d..][..d];
                let g = ssm_a[h] * softplus_f32(alpha[t * v_heads + h] + dt_bias[h]);
                let decay = g.exp();
                let b = sigmoid_f32(beta[t * v_heads + h]);
                kv.fill(0.0);
                for (s_row, &k_i) in s.chunks_exact_mut(d).zip(k) {
                    for (x, acc) in s_row.iter_mut().zip(kv.iter_mut()) {
                        *x *= decay;
                        *acc += *x * k_i;
                    }
                }
                for ((dl, &vj), &kvj) in delta.iter_mut().zip(v).zip(&kv) {
                    *dl = b * (vj - kvj);
                }
                let o = &mut o_rows[t * d..(t + 1) * d];
                for ((s_row, &k_i), &q_i) in s.chunks_exact_mut(d).zip(k).zip(q) {
                    for ((x, &dl), acc) in s_row.iter_mut().zip(&delta).zip(o.iter_mut()) {
                        *x += k_i * dl;
                        *acc += *x * q_i;
                    }
                }
            }
            o_rows
        })
        .collect();
    for (h, o_rows) in per_head.iter().enumerate() {
        for (t, o) in o_rows.chunks(d).enumerate() {
            out[t * shape.out_row_len() + h * d..][..d].copy_from_slice(o);
        }
    }
    Ok(())
}

//! Fast CPU version: q̂, k̂ and the gates for every row first, then rayon over V heads, each running
//! its rows' recurrence on its own d×d state in two passes over the state per row (decay and
//! Sᵀk̂; rank-1 update and Sᵀq̂), vectorised along the value index j.

use super::{DeltaInputs, DeltaShape, L2_NORM_EPS};
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

/// Normalised q̂ | k̂ of every row: [rows, 2·k_heads·d].
fn normalized_qk(shape: DeltaShape, conv_out: &[f32], rows: usize) -> Vec<f32> {
    let DeltaShape { k_heads, head_dim: d, .. } = shape;
    let qk_len = k_heads * d;
    let mut qk = vec![0.0f32; rows * 2 * qk_len];
    let q_scale = 1.0 / (d as f32).sqrt();
    qk.par_chunks_mut(2 * qk_len).zip(conv_out.par_chunks(shape.conv_row_len())).for_each(|(dst, row)| {
        for (head, (o, x)) in dst.chunks_mut(d).zip(row[..2 * qk_len].chunks(d)).enumerate() {
            l2_normalize_into(x, if head < k_heads { q_scale } else { 1.0 }, o);
        }
    });
    qk
}

pub fn cpu(
    shape: DeltaShape,
    inputs: DeltaInputs<'_>,
    state: &mut [f32],
    out: &mut [f32],
) -> Result<(), OpError> {
    let DeltaInputs { conv_out, alpha, beta, ssm_a, dt_bias } = inputs;
    let rows = shape.check(inputs, state, out)?;
    if rows == 0 {
        return Ok(());
    }
    let DeltaShape { k_heads, v_heads, head_dim: d } = shape;
    let qk_len = k_heads * d;
    let qk = normalized_qk(shape, conv_out, rows);
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

/// `y += a·x` along a row.
#[inline(always)]
fn axpy(y: &mut [f32], a: f32, x: &[f32]) {
    for (y, &x) in y.iter_mut().zip(x) {
        *y += a * x;
    }
}

/// The chunked form (reference/bonsai2.md §3.6 step 7) in f32 with the CUDA chunked kernels'
/// arithmetic (gated_delta_chunked.cu): γ = cumsum(g) in f64, D and the decays through expf of
/// f32-rounded differences, A and P, the forward substitution for U and W, then per chunk
/// V' = U − W·S, O = QE·S + P·V', S = e^{γ_last}·S + KTᵀ·V'. Rayon over V heads; every loop
/// runs along a row of d values.
pub fn cpu_chunked(
    shape: DeltaShape,
    inputs: DeltaInputs<'_>,
    state: &mut [f32],
    out: &mut [f32],
) -> Result<(), OpError> {
    let DeltaInputs { conv_out, alpha, beta, ssm_a, dt_bias } = inputs;
    let rows = shape.check(inputs, state, out)?;
    if rows == 0 {
        return Ok(());
    }
    let DeltaShape { k_heads, v_heads, head_dim: d } = shape;
    let qk_len = k_heads * d;
    let qk = normalized_qk(shape, conv_out, rows);
    let chunk = super::CHUNK;
    let per_head: Vec<Vec<f32>> = state
        .par_chunks_mut(d * d)
        .enumerate()
        .map(|(h, s)| {
            let kh = h % k_heads;
            let mut o_rows = vec![0.0f32; rows * d];
            let (mut a, mut p) = (vec![0.0f32; chunk * chunk], vec![0.0f32; chunk * chunk]);
            let (mut u, mut w) = (vec![0.0f32; chunk * d], vec![0.0f32; chunk * d]);
            let (mut vp, mut row) = (vec![0.0f32; chunk * d], vec![0.0f32; d]);
            for t0 in (0..rows).step_by(chunk) {
                let n = chunk.min(rows - t0);
                let q = |i: usize| &qk[(t0 + i) * 2 * qk_len + kh * d..][..d];
                let k = |i: usize| &qk[(t0 + i) * 2 * qk_len + qk_len + kh * d..][..d];
                let v = |i: usize| &conv_out[(t0 + i) * shape.conv_row_len() + 2 * qk_len + h * d..][..d];
                let b: Vec<f32> = (0..n).map(|i| sigmoid_f32(beta[(t0 + i) * v_heads + h])).collect();
                let mut cum = 0.0f64;
                let gamma: Vec<f64> = (0..n)
                    .map(|i| {
                        cum += (ssm_a[h] * softplus_f32(alpha[(t0 + i) * v_heads + h] + dt_bias[h])) as f64;
                        cum
                    })
                    .collect();
                let exp_diff = |x: f64| (x as f32).exp();
                for i in 0..n {
                    for j in 0..=i {
                        let dij = exp_diff(gamma[i] - gamma[j]);
                        p[i * chunk + j] = dot_lanes(q(i), k(j)) * dij;
                        a[i * chunk + j] = if j < i { b[i] * dot_lanes(k(i), k(j)) * dij } else { 0.0 };
                    }
                }
                // (I + A)·[U | W] = [β⊙V | β⊙e^γ⊙K], row by row.
                for i in 0..n {
                    let bw = b[i] * exp_diff(gamma[i]);
                    let (u_done, u_rest) = u.split_at_mut(i * d);
                    let (w_done, w_rest) = w.split_at_mut(i * d);
                    let (ui, wi) = (&mut u_rest[..d], &mut w_rest[..d]);
                    for (c, (uc, wc)) in ui.iter_mut().zip(wi.iter_mut()).enumerate() {
                        *uc = b[i] * v(i)[c];
                        *wc = bw * k(i)[c];
                    }
                    for j in 0..i {
                        let aij = -a[i * chunk + j];
                        axpy(ui, aij, &u_done[j * d..(j + 1) * d]);
                        axpy(wi, aij, &w_done[j * d..(j + 1) * d]);
                    }
                }
                // V' = U − W·S and O = (q̂⊙e^γ)·S + P·V', row by row.
                for i in 0..n {
                    let vpi = &mut vp[i * d..(i + 1) * d];
                    vpi.copy_from_slice(&u[i * d..(i + 1) * d]);
                    row.fill(0.0);
                    let decay = exp_diff(gamma[i]);
                    for r in 0..d {
                        axpy(vpi, -w[i * d + r], &s[r * d..(r + 1) * d]);
                        axpy(&mut row, q(i)[r] * decay, &s[r * d..(r + 1) * d]);
                    }
                    for l in 0..=i {
                        axpy(&mut row, p[i * chunk + l], &vp[l * d..(l + 1) * d]);
                    }
                    o_rows[(t0 + i) * d..(t0 + i + 1) * d].copy_from_slice(&row);
                }
                // S = e^{γ_last}·S + (k̂⊙e^{γ_last − γ})ᵀ·V'.
                let last = gamma[n - 1];
                let decay = exp_diff(last);
                let kt: Vec<f32> = (0..n).map(|l| exp_diff(last - gamma[l])).collect();
                for r in 0..d {
                    row.fill(0.0);
                    for l in 0..n {
                        axpy(&mut row, k(l)[r] * kt[l], &vp[l * d..(l + 1) * d]);
                    }
                    for (x, &add) in s[r * d..(r + 1) * d].iter_mut().zip(&row) {
                        *x = decay * *x + add;
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

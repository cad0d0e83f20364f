//! The definition, in f64: the plain recurrence, row by row.

use super::{DeltaInputs, DeltaShape, L2_NORM_EPS};
use crate::ops::OpError;

/// `x·rsqrt(Σx² + eps)·scale` in f64.
fn l2_normalized(x: &[f32], scale: f64) -> Vec<f64> {
    let r = 1.0 / (x.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() + L2_NORM_EPS as f64).sqrt();
    x.iter().map(|&v| v as f64 * r * scale).collect()
}

/// `ln(1 + e^x)` without overflow.
pub(crate) fn softplus_f64(x: f64) -> f64 {
    x.max(0.0) + (-x.abs()).exp().ln_1p()
}

pub fn reference(
    shape: DeltaShape,
    inputs: DeltaInputs<'_>,
    state: &mut [f32],
    out: &mut [f32],
) -> Result<(), OpError> {
    shape.check(inputs, state, out)?;
    let mut s: Vec<f64> = state.iter().map(|&v| v as f64).collect();
    let mut o = vec![0.0f64; out.len()];
    recurrence_f64(shape, inputs, &mut s, &mut o);
    narrow_into(&o, out);
    narrow_into(&s, state);
    Ok(())
}

fn narrow_into(src: &[f64], dst: &mut [f32]) {
    for (d, &v) in dst.iter_mut().zip(src) {
        *d = v as f32;
    }
}

/// The recurrence with the state and the outputs in f64 (shapes already checked).
pub(crate) fn recurrence_f64(
    shape: DeltaShape,
    inputs: DeltaInputs<'_>,
    s: &mut [f64],
    out: &mut [f64],
) {
    let DeltaInputs { conv_out, alpha, beta, ssm_a, dt_bias } = inputs;
    let DeltaShape { k_heads, v_heads, head_dim: d } = shape;
    let rows = conv_out.len() / shape.conv_row_len();
    let q_scale = 1.0 / (d as f64).sqrt();
    let mut kv = vec![0.0f64; d];
    for t in 0..rows {
        let row = &conv_out[t * shape.conv_row_len()..(t + 1) * shape.conv_row_len()];
        let (q_all, rest) = row.split_at(k_heads * d);
        let (k_all, v_all) = rest.split_at(k_heads * d);
        for h in 0..v_heads {
            let kh = h % k_heads;
            let q = l2_normalized(&q_all[kh * d..(kh + 1) * d], q_scale);
            let k = l2_normalized(&k_all[kh * d..(kh + 1) * d], 1.0);
            let v = &v_all[h * d..(h + 1) * d];
            let g = ssm_a[h] as f64 * softplus_f64(alpha[t * v_heads + h] as f64 + dt_bias[h] as f64);
            let b = 1.0 / (1.0 + (-(beta[t * v_heads + h] as f64)).exp());
            let sh = &mut s[h * d * d..(h + 1) * d * d];
            let decay = g.exp();
            sh.iter_mut().for_each(|x| *x *= decay);
            for (j, kv_j) in kv.iter_mut().enumerate() {
                *kv_j = (0..d).map(|i| sh[i * d + j] * k[i]).sum();
            }
            for i in 0..d {
                for j in 0..d {
                    sh[i * d + j] += k[i] * b * (v[j] as f64 - kv[j]);
                }
            }
            for j in 0..d {
                out[t * shape.out_row_len() + h * d + j] = (0..d).map(|i| sh[i * d + j] * q[i]).sum();
            }
        }
    }
}

/// Rows per chunk of the chunked form (§3.6 step 7); the CUDA chunked kernels use the same.
pub const CHUNK: usize = 64;

/// One chunk of one V head, every intermediate of the chunked form in f64 (row-major, `n` rows
/// of the chunk, `d` columns): what [`reference_chunked`] runs and what the chunked error bound
/// (bound.rs) reads.
pub(crate) struct ChunkMath {
    pub n: usize,
    pub q: Vec<f64>,
    pub k: Vec<f64>,
    pub v: Vec<f64>,
    /// Per row: the gate g, its input x = alpha + dt_bias, β, and γ = cumsum(g) within the chunk.
    pub g: Vec<f64>,
    pub x: Vec<f64>,
    pub b: Vec<f64>,
    pub gamma: Vec<f64>,
    /// `[n, n]`: D (j <= i), A (strictly lower), T = (I + A)⁻¹, P = (q̂k̂ᵀ)⊙D (j <= i).
    pub dm: Vec<f64>,
    pub a: Vec<f64>,
    pub t: Vec<f64>,
    pub p: Vec<f64>,
    /// `[n, d]`: U = T(β⊙V), W = T(β⊙e^γ⊙K), V' = U − W·S_in, O.
    pub u: Vec<f64>,
    pub w: Vec<f64>,
    pub vp: Vec<f64>,
    pub o: Vec<f64>,
    /// `[d, d]`: the state after the chunk.
    pub s_out: Vec<f64>,
}

/// The chunk of rows `rows` of V head `h`, from the state `s_in` (`[d, d]`, S[i][j]).
pub(crate) fn chunk_math(
    shape: DeltaShape,
    inputs: DeltaInputs<'_>,
    h: usize,
    rows: std::ops::Range<usize>,
    s_in: &[f64],
) -> ChunkMath {
    let DeltaInputs { conv_out, alpha, beta, ssm_a, dt_bias } = inputs;
    let DeltaShape { k_heads, v_heads, head_dim: d } = shape;
    let kh = h % k_heads;
    let n = rows.len();
    let q_scale = 1.0 / (d as f64).sqrt();
    let (mut q, mut k, mut v) = (Vec::with_capacity(n * d), Vec::with_capacity(n * d), Vec::with_capacity(n * d));
    let (mut g, mut x, mut b, mut gamma) = (vec![0.0; n], vec![0.0; n], vec![0.0; n], vec![0.0; n]);
    let mut cum = 0.0;
    for (r, t) in rows.clone().enumerate() {
        let row = &conv_out[t * shape.conv_row_len()..(t + 1) * shape.conv_row_len()];
        q.extend(l2_normalized(&row[kh * d..(kh + 1) * d], q_scale));
        k.extend(l2_normalized(&row[(k_heads + kh) * d..(k_heads + kh + 1) * d], 1.0));
        v.extend(row[(2 * k_heads + h) * d..(2 * k_heads + h + 1) * d].iter().map(|&e| e as f64));
        x[r] = alpha[t * v_heads + h] as f64 + dt_bias[h] as f64;
        g[r] = ssm_a[h] as f64 * softplus_f64(x[r]);
        b[r] = 1.0 / (1.0 + (-(beta[t * v_heads + h] as f64)).exp());
        cum += g[r];
        gamma[r] = cum;
    }
    let dot = |x: &[f64], y: &[f64]| -> f64 { x.iter().zip(y).map(|(a, b)| a * b).sum() };
    let (mut dm, mut a, mut p) = (vec![0.0; n * n], vec![0.0; n * n], vec![0.0; n * n]);
    for i in 0..n {
        for j in 0..=i {
            dm[i * n + j] = (gamma[i] - gamma[j]).exp();
            p[i * n + j] = dot(&q[i * d..(i + 1) * d], &k[j * d..(j + 1) * d]) * dm[i * n + j];
            if j < i {
                a[i * n + j] = b[i] * dot(&k[i * d..(i + 1) * d], &k[j * d..(j + 1) * d]) * dm[i * n + j];
            }
        }
    }
    // T = (I + A)⁻¹ by forward substitution on the identity's columns: T_ij = [i = j] − Σ_{j<=l<i} A_il T_lj.
    let mut t = vec![0.0; n * n];
    for i in 0..n {
        t[i * n + i] = 1.0;
        for j in 0..i {
            t[i * n + j] = -(j..i).map(|l| a[i * n + l] * t[l * n + j]).sum::<f64>();
        }
    }
    let (mut u, mut w) = (vec![0.0; n * d], vec![0.0; n * d]);
    for i in 0..n {
        for l in 0..=i {
            let til = t[i * n + l];
            for c in 0..d {
                u[i * d + c] += til * b[l] * v[l * d + c];
                w[i * d + c] += til * b[l] * gamma[l].exp() * k[l * d + c];
            }
        }
    }
    let mut vp = u.clone();
    for i in 0..n {
        for r in 0..d {
            let wir = w[i * d + r];
            for c in 0..d {
                vp[i * d + c] -= wir * s_in[r * d + c];
            }
        }
    }
    let mut o = vec![0.0; n * d];
    for i in 0..n {
        let decay = gamma[i].exp();
        for r in 0..d {
            let qe = q[i * d + r] * decay;
            for c in 0..d {
                o[i * d + c] += qe * s_in[r * d + c];
            }
        }
        for j in 0..=i {
            let pij = p[i * n + j];
            for c in 0..d {
                o[i * d + c] += pij * vp[j * d + c];
            }
        }
    }
    let last = if n == 0 { 0.0 } else { gamma[n - 1] };
    let mut s_out: Vec<f64> = s_in.iter().map(|&s| s * last.exp()).collect();
    for l in 0..n {
        let kd = (last - gamma[l]).exp();
        for r in 0..d {
            let kr = k[l * d + r] * kd;
            for c in 0..d {
                s_out[r * d + c] += kr * vp[l * d + c];
            }
        }
    }
    ChunkMath { n, q, k, v, g, x, b, gamma, dm, a, t, p, u, w, vp, o, s_out }
}

/// The same function as [`reference`], computed in the chunked form (§3.6 step 7) with chunks of
/// `chunk` rows (the last one partial), in f64 throughout: it equals the recurrence up to f64
/// rounding. The outputs and the state are rounded to f32 once at the end, like the recurrence's.
pub fn reference_chunked(
    shape: DeltaShape,
    chunk: usize,
    inputs: DeltaInputs<'_>,
    state: &mut [f32],
    out: &mut [f32],
) -> Result<(), OpError> {
    shape.check(inputs, state, out)?;
    if chunk == 0 {
        return Err(OpError::Shape { op: super::OP, detail: "chunk length 0".into() });
    }
    let mut s: Vec<f64> = state.iter().map(|&v| v as f64).collect();
    let mut o = vec![0.0f64; out.len()];
    chunked_f64(shape, chunk, inputs, &mut s, &mut o);
    narrow_into(&o, out);
    narrow_into(&s, state);
    Ok(())
}

/// The chunked form with the state and the outputs in f64 (shapes already checked, chunk > 0).
pub(crate) fn chunked_f64(
    shape: DeltaShape,
    chunk: usize,
    inputs: DeltaInputs<'_>,
    state: &mut [f64],
    out: &mut [f64],
) {
    let d = shape.head_dim;
    let conv_out = inputs.conv_out;
    let rows = conv_out.len() / shape.conv_row_len();
    for (h, s) in state.chunks_mut(d * d).enumerate() {
        for start in (0..rows).step_by(chunk) {
            let m = chunk_math(shape, inputs, h, start..(start + chunk).min(rows), s);
            for (r, o_row) in m.o.chunks(d).enumerate() {
                out[(start + r) * shape.out_row_len() + h * d..][..d].copy_from_slice(o_row);
            }
            s.copy_from_slice(&m.s_out);
        }
    }
}

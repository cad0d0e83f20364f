//! The definition, in f64: the plain recurrence, row by row.

use super::{DeltaShape, L2_NORM_EPS};
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

#[allow(clippy::too_many_arguments)]
pub fn reference(
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
    let DeltaShape { k_heads, v_heads, head_dim: d } = shape;
    let mut s: Vec<f64> = state.iter().map(|&v| v as f64).collect();
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
                let o: f64 = (0..d).map(|i| sh[i * d + j] * q[i]).sum();
                out[t * shape.out_row_len() + h * d + j] = o as f32;
            }
        }
    }
    for (dst, &v) in state.iter_mut().zip(&s) {
        *dst = v as f32;
    }
    Ok(())
}

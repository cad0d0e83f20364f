//! The definition, in f64.

use super::Params;
use crate::ops::OpError;

pub fn reference(p: Params<'_>, qkv: &mut [f32], m: usize, pos0: usize) -> Result<(), OpError> {
    p.check(qkv, m, pos0)?;
    let Params { shape, rot_dims, q_norm, k_norm, eps, rope } = p;
    let hd = shape.head_dim;
    let half = rot_dims / 2;
    for i in 0..m {
        let (cos, sin) = rope.row(pos0 + i);
        let row = &mut qkv[i * shape.qkv_row_len()..(i + 1) * shape.qkv_row_len()];
        for h in 0..shape.n_q + shape.n_kv {
            let weight = if h < shape.n_q { q_norm } else { k_norm };
            let head = &mut row[h * hd..(h + 1) * hd];
            let mean_sq = head.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / hd as f64;
            let r = 1.0 / (mean_sq + eps as f64).sqrt();
            let n: Vec<f64> =
                head.iter().zip(weight).map(|(&v, &w)| v as f64 * r * w as f64).collect();
            for d in 0..half {
                let (c, s) = (cos[d] as f64, sin[d] as f64);
                head[d] = (n[d] * c - n[d + half] * s) as f32;
                head[d + half] = (n[d + half] * c + n[d] * s) as f32;
            }
            for d in rot_dims..hd {
                head[d] = n[d] as f32;
            }
        }
    }
    Ok(())
}

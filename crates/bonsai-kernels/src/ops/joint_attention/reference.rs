//! The definition, in f64: exact scores, a max-shifted softmax, the weighted sum of values.

use super::{check_shapes, Inputs, AttnDims};
use crate::ops::OpError;

pub fn reference(inputs: Inputs<'_>, out: &mut [f32]) -> Result<(), OpError> {
    check_shapes(&inputs, out)?;
    let Inputs { dims, q, k, v } = inputs;
    let AttnDims { heads, seq, head_dim: hd } = dims;
    // The range of row i of head h in a [H, seq, hd] tensor.
    let row = |h: usize, i: usize| (h * seq + i) * hd..(h * seq + i + 1) * hd;
    for h in 0..heads {
        for i in 0..seq {
            let qi = &q[row(h, i)];
            let scores: Vec<f64> = (0..seq)
                .map(|j| {
                    let dot: f64 =
                        qi.iter().zip(&k[row(h, j)]).map(|(&a, &b)| a as f64 * b as f64).sum();
                    dot * dims.scale()
                })
                .collect();
            let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
            let total: f64 = weights.iter().sum();
            for d in 0..hd {
                let acc: f64 =
                    weights.iter().enumerate().map(|(j, w)| w * v[row(h, j)][d] as f64).sum();
                out[i * heads * hd + h * hd + d] = (acc / total) as f32;
            }
        }
    }
    Ok(())
}

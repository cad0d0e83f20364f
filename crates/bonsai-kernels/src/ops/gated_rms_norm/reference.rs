//! The definition, in f64.

use super::check_shapes;
use crate::ops::OpError;

pub fn reference(x: &[f32], z: &[f32], weight: &[f32], eps: f32, y: &mut [f32]) -> Result<(), OpError> {
    check_shapes(x, z, weight, y)?;
    let d = weight.len();
    for ((xh, zh), yh) in x.chunks(d).zip(z.chunks(d)).zip(y.chunks_mut(d)) {
        let mean_sq = xh.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / d as f64;
        let r = 1.0 / (mean_sq + eps as f64).sqrt();
        for (((o, &v), &g), &w) in yh.iter_mut().zip(xh).zip(zh).zip(weight) {
            let g = g as f64;
            *o = (v as f64 * r * w as f64 * (g / (1.0 + (-g).exp()))) as f32;
        }
    }
    Ok(())
}

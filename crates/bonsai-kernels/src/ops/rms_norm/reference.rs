//! The definition, in f64.

use super::check_shapes;
use crate::ops::OpError;

pub fn reference(x: &[f32], weight: &[f32], eps: f32, y: &mut [f32]) -> Result<(), OpError> {
    check_shapes(x, weight, y)?;
    let n = weight.len();
    for (xr, yr) in x.chunks(n).zip(y.chunks_mut(n)) {
        let mean_sq = xr.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / n as f64;
        let r = 1.0 / (mean_sq + eps as f64).sqrt();
        for ((o, &v), &w) in yr.iter_mut().zip(xr).zip(weight) {
            *o = (v as f64 * r * w as f64) as f32;
        }
    }
    Ok(())
}

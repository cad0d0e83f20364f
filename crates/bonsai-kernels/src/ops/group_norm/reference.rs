//! The definition, in f64 (two-pass, sequential sums).

use super::{check_shapes, Params};
use crate::ops::OpError;

pub fn reference(x: &[f32], p: Params<'_>, y: &mut [f32]) -> Result<(), OpError> {
    let layout = check_shapes(x, &p, y)?;
    let Params { gamma, beta, eps, .. } = p;
    let group_len = layout.channels_per_group * layout.plane;
    for (g, (xg, yg)) in x.chunks(group_len).zip(y.chunks_mut(group_len)).enumerate() {
        let n = group_len as f64;
        let mean = xg.iter().map(|&v| v as f64).sum::<f64>() / n;
        let var = xg.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n;
        let inv_std = 1.0 / (var + eps as f64).sqrt();
        for (i, (o, &v)) in yg.iter_mut().zip(xg).enumerate() {
            let c = g * layout.channels_per_group + i / layout.plane;
            *o = ((v as f64 - mean) * inv_std * gamma[c] as f64 + beta[c] as f64) as f32;
        }
    }
    Ok(())
}

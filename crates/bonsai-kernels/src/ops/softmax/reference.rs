//! The definition, in f64.

use super::check_shapes;
use crate::ops::OpError;

pub fn reference(x: &mut [f32], n: usize) -> Result<(), OpError> {
    check_shapes(x, n)?;
    for row in x.chunks_mut(n) {
        let max = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
        let exps: Vec<f64> = row.iter().map(|&v| (v as f64 - max).exp()).collect();
        let sum: f64 = exps.iter().sum();
        for (v, e) in row.iter_mut().zip(exps) {
            *v = (e / sum) as f32;
        }
    }
    Ok(())
}

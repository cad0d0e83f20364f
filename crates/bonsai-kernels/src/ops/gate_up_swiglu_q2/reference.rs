//! The definition: gate and up dot products in f64, silu(g)·u in f64, one rounding.

use super::check_shapes;
use crate::ops::OpError;
use crate::weights::Q2Matrix;

pub fn reference(w: &Q2Matrix, x: &[f32], m: usize, out: &mut [f32]) -> Result<(), OpError> {
    check_shapes(w, x, m, out)?;
    let f_len = w.n / 2;
    let dot = |row: usize, i: usize| -> f64 {
        (0..w.k).map(|k| w.weight(row, k) as f64 * x[i * w.k + k] as f64).sum()
    };
    for i in 0..m {
        for f in 0..f_len {
            let gate = dot(f, i);
            let up = dot(f_len + f, i);
            out[i * f_len + f] = (gate / (1.0 + (-gate).exp()) * up) as f32;
        }
    }
    Ok(())
}

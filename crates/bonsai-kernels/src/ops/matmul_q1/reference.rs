//! The definition: every product in f64, one rounding to f32 at the end.

use super::check_shapes;
use crate::ops::{OpError, Store};
use crate::weights::Q1Matrix;

pub fn reference(
    w: &Q1Matrix,
    x: &[f32],
    m: usize,
    y: &mut [f32],
    store: Store,
) -> Result<(), OpError> {
    check_shapes(w, x, m, y)?;
    for i in 0..m {
        for n in 0..w.n {
            let mut sum = match store {
                Store::Overwrite => 0.0f64,
                Store::Add => y[i * w.n + n] as f64,
            };
            for k in 0..w.k {
                sum += w.weight(n, k) as f64 * x[i * w.k + k] as f64;
            }
            y[i * w.n + n] = sum as f32;
        }
    }
    Ok(())
}

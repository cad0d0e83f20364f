//! The definition, in f64.

use super::{check_shapes, Inputs, GemmDims};
use crate::ops::OpError;

pub fn reference(inputs: Inputs<'_>, out: &mut [f32]) -> Result<(), OpError> {
    check_shapes(&inputs, out)?;
    let Inputs { dims, a, w, bias } = inputs;
    let GemmDims { n, k, .. } = dims;
    for (a_row, out_row) in a.chunks(k).zip(out.chunks_mut(n)) {
        for (col, slot) in out_row.iter_mut().enumerate() {
            let w_row = &w[col * k..(col + 1) * k];
            let dot: f64 = a_row.iter().zip(w_row).map(|(&x, &y)| x as f64 * y as f64).sum();
            let b = bias.map_or(0.0, |b| b[col] as f64);
            *slot = (dot + b) as f32;
        }
    }
    Ok(())
}

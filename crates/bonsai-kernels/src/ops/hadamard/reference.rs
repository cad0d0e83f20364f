//! The definition, in f64: signs and permutation, then the butterflies per block (exact up to
//! f64 rounding, far below f32's; tests.rs checks them against the matrix H_n itself).

use super::HadamardParams;
use crate::ops::OpError;

pub fn reference(p: HadamardParams<'_>, x: &[f32], y: &mut [f32]) -> Result<(), OpError> {
    p.check(x, y)?;
    let width = p.signs.len();
    let scale = 1.0 / (p.block as f64).sqrt();
    let mut row = vec![0.0f64; width];
    for (xr, yr) in x.chunks(width).zip(y.chunks_mut(width)) {
        for (i, v) in row.iter_mut().enumerate() {
            let source = p.tiled_to_grouped.map_or(i, |perm| perm.tiled_index(i));
            *v = if p.inverse { xr[i] as f64 } else { xr[source] as f64 * p.signs[i] as f64 };
        }
        for block in row.chunks_mut(p.block) {
            fwht_f64(block);
        }
        for (i, o) in yr.iter_mut().enumerate() {
            let sign = if p.inverse { p.signs[i] as f64 } else { 1.0 };
            *o = (row[i] * scale * sign) as f32;
        }
    }
    Ok(())
}

/// Unnormalized Sylvester-order Walsh-Hadamard transform in place (`v.len()` a power of two).
pub(crate) fn fwht_f64(v: &mut [f64]) {
    let mut len = 1;
    while len < v.len() {
        for start in (0..v.len()).step_by(2 * len) {
            for i in start..start + len {
                let (a, b) = (v[i], v[i + len]);
                v[i] = a + b;
                v[i + len] = a - b;
            }
        }
        len *= 2;
    }
}

//! The definition, in f64: signs and permutation, then the butterflies per block (exact up to
//! f64 rounding, far below f32's; tests.rs checks them against the matrix H_n itself).

use super::{HadamardParams, RowNorm};
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

/// The forward transform of the RMSNorm'd row (`norm`; the plain forward transform without one),
/// all in f64: `y = BlockH(s ⊙ P(x / rms(x) · w))`, the row the fused decode launch quantizes.
pub fn reference_normed(p: HadamardParams<'_>, norm: Option<RowNorm<'_>>, x: &[f32], y: &mut [f32]) -> Result<(), OpError> {
    p.check_normed(norm, x, y)?;
    let Some(norm) = norm else { return reference(p, x, y) };
    let width = p.signs.len();
    let scale = 1.0 / (p.block as f64).sqrt();
    let mut normed = vec![0.0f64; width];
    let mut row = vec![0.0f64; width];
    // x / rms(x) · weight over `xs` (a row or a head).
    let rms_norm = |xs: &[f32], weight: &[f32], eps: f32, out: &mut [f64]| {
        let mean_sq = xs.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / xs.len() as f64;
        let r = 1.0 / (mean_sq + eps as f64).sqrt();
        for ((n, &v), &w) in out.iter_mut().zip(xs).zip(weight) {
            *n = v as f64 * r * w as f64;
        }
    };
    for (row_index, (xr, yr)) in x.chunks(width).zip(y.chunks_mut(width)).enumerate() {
        match norm {
            RowNorm::Rms { weight, eps } => rms_norm(xr, weight, eps, &mut normed),
            RowNorm::Gated { z, weight, eps } => {
                let zr = &z[row_index * width..(row_index + 1) * width];
                let d = weight.len();
                for ((xh, zh), nh) in xr.chunks(d).zip(zr.chunks(d)).zip(normed.chunks_mut(d)) {
                    rms_norm(xh, weight, eps, nh);
                    for (n, &g) in nh.iter_mut().zip(zh) {
                        let g = g as f64;
                        *n *= g / (1.0 + (-g).exp());
                    }
                }
            }
        }
        for (i, v) in row.iter_mut().enumerate() {
            *v = normed[p.tiled_to_grouped.map_or(i, |perm| perm.tiled_index(i))] * p.signs[i] as f64;
        }
        for block in row.chunks_mut(p.block) {
            fwht_f64(block);
        }
        for (o, &v) in yr.iter_mut().zip(&row) {
            *o = (v * scale) as f32;
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

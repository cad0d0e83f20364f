//! Fast CPU version: the CPU pool over rows; 8-lane sum of squares and a scaled multiply per row
//! (AVX2 copy at run time).

use super::check_shapes;
use crate::cpu::pool::{self, Split};
use crate::cpu::{dot_lanes, simd_level, simd_variants, SimdLevel};
use crate::ops::OpError;

pub fn cpu(x: &[f32], weight: &[f32], eps: f32, y: &mut [f32]) -> Result<(), OpError> {
    cpu_at(simd_level(), x, weight, eps, y)
}

/// [`cpu`] at an explicit SIMD level.
pub fn cpu_at(
    level: SimdLevel,
    x: &[f32],
    weight: &[f32],
    eps: f32,
    y: &mut [f32],
) -> Result<(), OpError> {
    check_shapes(x, weight, y)?;
    let n = weight.len();
    let split = Split::new(1, pool::MIN_ELEMENTS_PER_PART.div_ceil(n));
    pool::for_each_rows_mut(y, n, split, &|rows, y_rows| {
        for (yr, xr) in y_rows.chunks_exact_mut(n).zip(x[rows.start * n..rows.end * n].chunks_exact(n)) {
            normalize_row(level, xr, weight, eps, yr);
        }
    });
    Ok(())
}

/// `out = x · w / sqrt(mean(x²) + eps)` for one row (also used by `qk_norm_rope`).
#[inline(always)]
pub(crate) fn normalize_row_generic(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    let mean_sq = dot_lanes(x, x) / x.len() as f32;
    let r = 1.0 / (mean_sq + eps).sqrt();
    for ((o, &v), &w) in out.iter_mut().zip(x).zip(weight) {
        *o = v * r * w;
    }
}

simd_variants! {
    fn normalize_row(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) = normalize_row_generic;
}

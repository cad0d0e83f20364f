//! Fast CPU version: rayon over rows; per row max, exp + lane sum, scale (AVX2 copy at run time).

use super::check_shapes;
use crate::cpu::{simd_level, simd_variants, SimdLevel, LANES};
use crate::ops::OpError;
use rayon::prelude::*;

pub fn cpu(x: &mut [f32], n: usize) -> Result<(), OpError> {
    cpu_at(simd_level(), x, n)
}

/// [`cpu`] at an explicit SIMD level.
pub fn cpu_at(level: SimdLevel, x: &mut [f32], n: usize) -> Result<(), OpError> {
    check_shapes(x, n)?;
    x.par_chunks_mut(n).for_each(|row| softmax_row(level, row));
    Ok(())
}

#[inline(always)]
pub(crate) fn softmax_row_generic(row: &mut [f32]) {
    let max = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    let mut acc = [0.0f32; LANES];
    for (i, v) in row.iter_mut().enumerate() {
        *v = (*v - max).exp();
        acc[i % LANES] += *v;
    }
    let inv_sum = 1.0 / acc.iter().sum::<f32>();
    for v in row.iter_mut() {
        *v *= inv_sum;
    }
}

simd_variants! { fn softmax_row(row: &mut [f32]) = softmax_row_generic; }

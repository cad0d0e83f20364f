//! Fast CPU version: rayon over chunks; one f32 expression per element (AVX2 copy at run time).

use super::OP;
use crate::cpu::{simd_level, simd_variants, SimdLevel};
use crate::ops::{check_len, OpError};
use rayon::prelude::*;

/// Elements per rayon task: large enough that scheduling costs vanish next to the exps.
const CHUNK: usize = 1 << 14;

pub fn cpu(x: &[f32], y: &mut [f32]) -> Result<(), OpError> {
    cpu_at(simd_level(), x, y)
}

/// [`cpu`] at an explicit SIMD level.
pub fn cpu_at(level: SimdLevel, x: &[f32], y: &mut [f32]) -> Result<(), OpError> {
    check_len(OP, "y", x.len(), y.len())?;
    y.par_chunks_mut(CHUNK).zip(x.par_chunks(CHUNK)).for_each(|(yc, xc)| silu_slice(level, xc, yc));
    Ok(())
}

/// `x ← silu(x)` (cannot fail: there is no shape to mismatch).
pub fn cpu_in_place(x: &mut [f32]) {
    cpu_in_place_at(simd_level(), x)
}

/// [`cpu_in_place`] at an explicit SIMD level.
pub fn cpu_in_place_at(level: SimdLevel, x: &mut [f32]) {
    x.par_chunks_mut(CHUNK).for_each(|c| silu_slice_in_place(level, c));
}

/// `x·sigmoid(x)` in f32 through `exp(−|x|)`, which cannot overflow.
#[inline(always)]
pub(crate) fn silu_f32(x: f32) -> f32 {
    let e = (-x.abs()).exp();
    let numerator = if x >= 0.0 { 1.0 } else { e };
    x * (numerator / (1.0 + e))
}

#[inline(always)]
fn silu_slice_generic(x: &[f32], y: &mut [f32]) {
    for (o, &v) in y.iter_mut().zip(x) {
        *o = silu_f32(v);
    }
}

#[inline(always)]
fn silu_slice_in_place_generic(x: &mut [f32]) {
    for v in x.iter_mut() {
        *v = silu_f32(*v);
    }
}

simd_variants! { fn silu_slice(x: &[f32], y: &mut [f32]) = silu_slice_generic; }
simd_variants! { fn silu_slice_in_place(x: &mut [f32]) = silu_slice_in_place_generic; }

//! Fast CPU version: the CPU pool over contiguous element ranges, each a vectorised add (AVX2 copy at run time).

use super::OP;
use crate::cpu::{simd_level, simd_variants, SimdLevel};
use crate::cpu::pool::{self, Split};
use crate::ops::{check_len, OpError};

/// Part boundaries fall on whole 512-bit vectors.
const ALIGN: usize = 16;

pub fn cpu(a: &mut [f32], b: &[f32]) -> Result<(), OpError> {
    cpu_at(simd_level(), a, b)
}

/// [`cpu`] at an explicit SIMD level.
pub fn cpu_at(level: SimdLevel, a: &mut [f32], b: &[f32]) -> Result<(), OpError> {
    check_len(OP, "b", a.len(), b.len())?;
    pool::for_each_rows_mut(a, 1, Split::new(ALIGN, pool::MIN_ELEMENTS_PER_PART), &|range, a_part| {
        add_chunk(level, a_part, &b[range]);
    });
    Ok(())
}

#[inline(always)]
fn add_chunk_generic(a: &mut [f32], b: &[f32]) {
    for (x, &y) in a.iter_mut().zip(b) {
        *x += y;
    }
}

simd_variants! { fn add_chunk(a: &mut [f32], b: &[f32]) = add_chunk_generic; }

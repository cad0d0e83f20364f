//! Fast CPU version: rayon over chunks, each chunk a vectorised add (AVX2 copy at run time).

use super::OP;
use crate::cpu::{simd_level, simd_variants, SimdLevel};
use crate::ops::{check_len, OpError};
use rayon::prelude::*;

/// Elements per rayon task: below this, threading costs more than the add.
const CHUNK: usize = 1 << 14;

pub fn cpu(a: &mut [f32], b: &[f32]) -> Result<(), OpError> {
    cpu_at(simd_level(), a, b)
}

/// [`cpu`] at an explicit SIMD level.
pub fn cpu_at(level: SimdLevel, a: &mut [f32], b: &[f32]) -> Result<(), OpError> {
    check_len(OP, "b", a.len(), b.len())?;
    a.par_chunks_mut(CHUNK).zip(b.par_chunks(CHUNK)).for_each(|(ca, cb)| add_chunk(level, ca, cb));
    Ok(())
}

#[inline(always)]
fn add_chunk_generic(a: &mut [f32], b: &[f32]) {
    for (x, &y) in a.iter_mut().zip(b) {
        *x += y;
    }
}

simd_variants! { fn add_chunk(a: &mut [f32], b: &[f32]) = add_chunk_generic; }

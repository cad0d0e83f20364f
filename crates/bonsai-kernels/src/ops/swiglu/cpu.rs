//! Fast CPU version: rayon over rows; the same f32 epilogue the fused matmul uses.

use super::check_shapes;
use crate::cpu::qgemm::silu_mul;
use crate::cpu::{simd_level, simd_variants, SimdLevel};
use crate::ops::OpError;
use rayon::prelude::*;

pub fn cpu(gate_up: &[f32], m: usize, out: &mut [f32]) -> Result<(), OpError> {
    cpu_at(simd_level(), gate_up, m, out)
}

/// [`cpu`] at an explicit SIMD level.
pub fn cpu_at(level: SimdLevel, gate_up: &[f32], m: usize, out: &mut [f32]) -> Result<(), OpError> {
    let f_len = check_shapes(gate_up, m, out)?;
    if f_len == 0 {
        return Ok(());
    }
    out.par_chunks_mut(f_len)
        .zip(gate_up.par_chunks(2 * f_len))
        .for_each(|(o, gu)| swiglu_row(level, gu, o));
    Ok(())
}

#[inline(always)]
fn swiglu_row_generic(gate_up: &[f32], out: &mut [f32]) {
    let (gate, up) = gate_up.split_at(out.len());
    for ((o, &g), &u) in out.iter_mut().zip(gate).zip(up) {
        *o = silu_mul(g, u);
    }
}

simd_variants! { fn swiglu_row(gate_up: &[f32], out: &mut [f32]) = swiglu_row_generic; }

//! Fast CPU version: the CPU pool over rows; the same f32 epilogue the fused matmul uses.

use super::check_shapes;
use crate::cpu::qgemm::silu_mul;
use crate::cpu::{simd_level, simd_variants, SimdLevel};
use crate::cpu::pool::{self, Split};
use crate::ops::OpError;

pub fn cpu(gate_up: &[f32], m: usize, out: &mut [f32]) -> Result<(), OpError> {
    cpu_at(simd_level(), gate_up, m, out)
}

/// [`cpu`] at an explicit SIMD level.
pub fn cpu_at(level: SimdLevel, gate_up: &[f32], m: usize, out: &mut [f32]) -> Result<(), OpError> {
    let f_len = check_shapes(gate_up, m, out)?;
    if f_len == 0 {
        return Ok(());
    }
    let split = Split::new(1, pool::MIN_ELEMENTS_PER_PART.div_ceil(f_len));
    pool::for_each_rows_mut(out, f_len, split, &|rows, out_rows| {
        let gate_up_rows = &gate_up[rows.start * 2 * f_len..rows.end * 2 * f_len];
        for (o, gu) in out_rows.chunks_exact_mut(f_len).zip(gate_up_rows.chunks_exact(2 * f_len)) {
            swiglu_row(level, gu, o);
        }
    });
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

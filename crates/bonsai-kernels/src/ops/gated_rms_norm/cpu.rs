//! Fast CPU version: rayon over heads; `rms_norm`'s row kernel, then the SiLU gate.

use super::check_shapes;
use crate::cpu::simd_level;
use crate::ops::rms_norm::normalize_row_generic;
use crate::ops::silu::silu_f32;
use crate::ops::OpError;
use rayon::prelude::*;

/// Heads per rayon task: a decode row's 48 heads of 128 stay one task.
const HEADS_PER_TASK: usize = 64;

pub fn cpu(x: &[f32], z: &[f32], weight: &[f32], eps: f32, y: &mut [f32]) -> Result<(), OpError> {
    check_shapes(x, z, weight, y)?;
    let d = weight.len();
    let level = simd_level();
    let chunk = d * HEADS_PER_TASK;
    y.par_chunks_mut(chunk).zip(x.par_chunks(chunk)).zip(z.par_chunks(chunk)).for_each(|((yc, xc), zc)| {
        gate_heads(level, xc, zc, weight, eps, yc);
    });
    Ok(())
}

crate::cpu::simd_variants! {
    fn gate_heads(x: &[f32], z: &[f32], weight: &[f32], eps: f32, y: &mut [f32]) {
        let d = weight.len();
        for ((xh, zh), yh) in x.chunks(d).zip(z.chunks(d)).zip(y.chunks_mut(d)) {
            normalize_row_generic(xh, weight, eps, yh);
            for (o, &g) in yh.iter_mut().zip(zh) {
                *o *= silu_f32(g);
            }
        }
    }
}

//! Fast CPU version: rayon over chunks; one f32 expression per element (AVX2 copy at run time).

use super::check_shapes;
use crate::cpu::{simd_level, simd_variants};
use crate::ops::gated_delta::sigmoid_f32;
use crate::ops::OpError;
use rayon::prelude::*;

/// Elements per rayon task: large enough that scheduling costs vanish next to the exps.
const CHUNK: usize = 1 << 14;

pub fn cpu(x: &[f32], g: &[f32], y: &mut [f32]) -> Result<(), OpError> {
    check_shapes(x, g, y)?;
    let level = simd_level();
    y.par_chunks_mut(CHUNK).zip(x.par_chunks(CHUNK)).zip(g.par_chunks(CHUNK)).for_each(|((yc, xc), gc)| {
        gate_slice(level, xc, gc, yc);
    });
    Ok(())
}

simd_variants! {
    fn gate_slice(x: &[f32], g: &[f32], y: &mut [f32]) {
        for ((o, &v), &gate) in y.iter_mut().zip(x).zip(g) {
            *o = v * sigmoid_f32(gate);
        }
    }
}

//! Fast CPU version: rayon over [`ROW_BLOCK`]-row slabs of the output; inside a slab, columns go
//! in [`COL_BLOCK`]-wide blocks so those W rows stay in cache while every A row of the slab
//! passes over them. Each element is one 8-lane dot product (AVX2 copy at run time).

use super::{check_shapes, Inputs, GemmDims};
use crate::cpu::{dot_lanes, simd_level, simd_variants, SimdLevel};
use crate::ops::OpError;
use rayon::prelude::*;

/// Output rows per rayon task.
const ROW_BLOCK: usize = 8;
/// W rows (output columns) visited together while they are cache-resident.
const COL_BLOCK: usize = 32;

pub fn cpu(inputs: Inputs<'_>, out: &mut [f32]) -> Result<(), OpError> {
    cpu_at(simd_level(), inputs, out)
}

/// [`cpu`] at an explicit SIMD level.
pub fn cpu_at(level: SimdLevel, inputs: Inputs<'_>, out: &mut [f32]) -> Result<(), OpError> {
    check_shapes(&inputs, out)?;
    let Inputs { dims, a, w, bias } = inputs;
    let GemmDims { n, k, .. } = dims;
    out.par_chunks_mut(ROW_BLOCK * n)
        .zip(a.par_chunks(ROW_BLOCK * k))
        .for_each(|(out_slab, a_slab)| slab(level, a_slab, w, bias, k, n, out_slab));
    Ok(())
}

simd_variants! {
    /// One slab of rows: `out_slab[r, c] = a_slab[r] · w[c] + bias[c]`.
    fn slab(
        a_slab: &[f32],
        w: &[f32],
        bias: Option<&[f32]>,
        k: usize,
        n: usize,
        out_slab: &mut [f32],
    ) {
        for col0 in (0..n).step_by(COL_BLOCK) {
            let col1 = (col0 + COL_BLOCK).min(n);
            for (a_row, out_row) in a_slab.chunks_exact(k).zip(out_slab.chunks_exact_mut(n)) {
                for col in col0..col1 {
                    let dot = dot_lanes(a_row, &w[col * k..(col + 1) * k]);
                    out_row[col] = match bias {
                        Some(b) => dot + b[col],
                        None => dot,
                    };
                }
            }
        }
    }
}


//! Fast CPU version: implicit GEMM over tiles of one output row. A task gathers the 3x3
//! neighbourhoods of its [`PIXEL_TILE`] pixels into a small patch buffer laid out like a filter
//! (`[ci][kh][kw]`, zeros for padding), then each output channel is one 8-lane dot product of
//! its filter row with a patch (AVX2 copy at run time).

use super::{check_shapes, Inputs, ConvDims, TAPS};
use crate::cpu::{dot_lanes, simd_level, simd_variants, DisjointWriter, SimdLevel};
use crate::ops::OpError;
use rayon::prelude::*;

/// Output pixels (along one row) per task: the patch buffer is PIXEL_TILE · 9 · Cin floats
/// (1.2 MB at Cin = 512), bounded whatever the image size.
pub const PIXEL_TILE: usize = 64;

pub fn cpu(inputs: Inputs<'_>, y: &mut [f32]) -> Result<(), OpError> {
    cpu_at(simd_level(), inputs, y)
}

/// [`cpu`] at an explicit SIMD level.
pub fn cpu_at(level: SimdLevel, inputs: Inputs<'_>, y: &mut [f32]) -> Result<(), OpError> {
    check_shapes(&inputs, y)?;
    let Inputs { dims, x, weight, bias } = inputs;
    let tiles_per_row = dims.w.div_ceil(PIXEL_TILE);
    let out = DisjointWriter::new(y);
    (0..dims.h * tiles_per_row).into_par_iter().for_each_init(
        || vec![0.0f32; PIXEL_TILE * dims.c_in * TAPS],
        |patches, task| {
            let oh = task / tiles_per_row;
            let ow0 = (task % tiles_per_row) * PIXEL_TILE;
            let ow1 = (ow0 + PIXEL_TILE).min(dims.w);
            let run = PixelRun { oh, ow0, ow1 };
            gather_patches(dims, x, run, patches);
            // Tasks own disjoint (row oh, columns ow0..ow1) pixel runs, so their writes never meet.
            tile(level, dims, weight, bias, patches, run, out);
        },
    );
    Ok(())
}

/// Output pixels `(oh, ow0..ow1)`: one task's share of the image.
#[derive(Clone, Copy)]
struct PixelRun {
    oh: usize,
    ow0: usize,
    ow1: usize,
}

/// `patches[p][ci][kh][kw] = x[ci, oh + kh − 1, ow0 + p + kw − 1]` (0 outside the image).
fn gather_patches(dims: ConvDims, x: &[f32], run: PixelRun, patches: &mut [f32]) {
    let ConvDims { c_in, h, w, .. } = dims;
    let PixelRun { oh, ow0, ow1 } = run;
    let patch_len = c_in * TAPS;
    for (p, patch) in patches.chunks_exact_mut(patch_len).take(ow1 - ow0).enumerate() {
        let ow = ow0 + p;
        for ci in 0..c_in {
            for kh in 0..3 {
                let row = (oh + kh).checked_sub(1).filter(|&r| r < h);
                for kw in 0..3 {
                    let col = (ow + kw).checked_sub(1).filter(|&c| c < w);
                    patch[ci * TAPS + kh * 3 + kw] = match (row, col) {
                        (Some(r), Some(c)) => x[(ci * h + r) * w + c],
                        _ => 0.0,
                    };
                }
            }
        }
    }
}

simd_variants! {
    /// Every output channel of pixels `(oh, ow0..ow1)`: `bias[co] + filter[co] · patch[p]`.
    fn tile(
        dims: ConvDims,
        weight: &[f32],
        bias: &[f32],
        patches: &[f32],
        run: PixelRun,
        out: DisjointWriter,
    ) {
        let ConvDims { c_in, h, w, .. } = dims;
        let PixelRun { oh, ow0, ow1 } = run;
        let patch_len = c_in * TAPS;
        for (co, filter) in weight.chunks_exact(patch_len).enumerate() {
            for (p, patch) in patches.chunks_exact(patch_len).take(ow1 - ow0).enumerate() {
                let value = dot_lanes(filter, patch) + bias[co];
                // SAFETY: this task alone writes row oh, columns ow0..ow1 of every channel (see the
                // caller); `y` outlives the parallel loop.
                unsafe { *out.slot((co * h + oh) * w + ow0 + p) = value };
            }
        }
    }
}


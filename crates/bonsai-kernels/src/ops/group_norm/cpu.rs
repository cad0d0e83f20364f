//! Fast CPU version: rayon over groups for the f64 statistics (8-lane sums, AVX2 copy at run
//! time), then rayon over channels for the f32 `y = (x − μ)·a + beta` pass.

use super::{check_shapes, Params};
use crate::cpu::{simd_level, simd_variants, SimdLevel, LANES};
use crate::ops::OpError;
use rayon::prelude::*;

pub fn cpu(x: &[f32], p: Params<'_>, y: &mut [f32]) -> Result<(), OpError> {
    cpu_at(simd_level(), x, p, y)
}

/// [`cpu`] at an explicit SIMD level.
pub fn cpu_at(level: SimdLevel, x: &[f32], p: Params<'_>, y: &mut [f32]) -> Result<(), OpError> {
    let layout = check_shapes(x, &p, y)?;
    let Params { gamma, beta, eps, .. } = p;
    let group_len = layout.channels_per_group * layout.plane;
    // (mean, 1/sqrt(var + eps)) per group, both f64.
    let stats: Vec<(f64, f64)> = x
        .par_chunks(group_len)
        .map(|xg| {
            let n = xg.len() as f64;
            let mean = sum_lanes(level, xg) / n;
            let var = centred_square_sum_lanes(level, xg, mean) / n;
            (mean, 1.0 / (var + eps as f64).sqrt())
        })
        .collect();
    y.par_chunks_mut(layout.plane).zip(x.par_chunks(layout.plane)).enumerate().for_each(
        |(c, (yc, xc))| {
            let (mean, inv_std) = stats[c / layout.channels_per_group];
            let scale = inv_std * gamma[c] as f64;
            affine(level, xc, mean as f32, scale as f32, beta[c], yc);
        },
    );
    Ok(())
}

/// Σ x in f64 over [`LANES`] interleaved accumulators.
#[inline(always)]
fn sum_lanes_generic(x: &[f32]) -> f64 {
    let mut acc = [0.0f64; LANES];
    let mut chunks = x.chunks_exact(LANES);
    for chunk in &mut chunks {
        for l in 0..LANES {
            acc[l] += chunk[l] as f64;
        }
    }
    for (l, &v) in chunks.remainder().iter().enumerate() {
        acc[l] += v as f64;
    }
    acc.iter().sum()
}

/// Σ (x − mean)² in f64 over [`LANES`] interleaved accumulators.
#[inline(always)]
fn centred_square_sum_lanes_generic(x: &[f32], mean: f64) -> f64 {
    let mut acc = [0.0f64; LANES];
    let mut chunks = x.chunks_exact(LANES);
    for chunk in &mut chunks {
        for l in 0..LANES {
            let d = chunk[l] as f64 - mean;
            acc[l] += d * d;
        }
    }
    for (l, &v) in chunks.remainder().iter().enumerate() {
        let d = v as f64 - mean;
        acc[l] += d * d;
    }
    acc.iter().sum()
}

/// `y = (x − mean)·scale + shift` in f32.
#[inline(always)]
fn affine_generic(x: &[f32], mean: f32, scale: f32, shift: f32, y: &mut [f32]) {
    for (o, &v) in y.iter_mut().zip(x) {
        *o = (v - mean) * scale + shift;
    }
}

simd_variants! { fn sum_lanes(x: &[f32]) -> f64 = sum_lanes_generic; }
simd_variants! {
    fn centred_square_sum_lanes(x: &[f32], mean: f64) -> f64 = centred_square_sum_lanes_generic;
}
simd_variants! {
    fn affine(x: &[f32], mean: f32, scale: f32, shift: f32, y: &mut [f32]) = affine_generic;
}

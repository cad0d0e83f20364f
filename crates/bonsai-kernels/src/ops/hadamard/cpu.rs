//! Fast CPU version: rayon over rows; per row, the signed (and permuted) load, f32 butterflies per
//! block, then the 1/sqrt(n) scale (and the inverse's signs); AVX2 copy at run time.

use super::{HadamardParams, RowNorm, VHeadPerm};
use crate::cpu::{simd_level, simd_variants};
use crate::ops::OpError;
use rayon::prelude::*;

pub fn cpu(p: HadamardParams<'_>, x: &[f32], y: &mut [f32]) -> Result<(), OpError> {
    p.check(x, y)?;
    let width = p.signs.len();
    let level = simd_level();
    y.par_chunks_mut(width).zip(x.par_chunks(width)).for_each(|(yr, xr)| {
        transform_row(level, p.signs, p.block, p.inverse, p.tiled_to_grouped, xr, yr);
    });
    Ok(())
}

/// [`reference_normed`](super::reference_normed) in f32: `rms_norm`'s (or `gated_rms_norm`'s) CPU
/// version, then [`cpu`]'s transform of its rows (the same operations as the two ops one after
/// the other).
pub fn cpu_normed(p: HadamardParams<'_>, norm: Option<RowNorm<'_>>, x: &[f32], y: &mut [f32]) -> Result<(), OpError> {
    p.check_normed(norm, x, y)?;
    let Some(norm) = norm else { return cpu(p, x, y) };
    let mut normed = vec![0.0f32; x.len()];
    match norm {
        RowNorm::Rms { weight, eps } => crate::ops::rms_norm::cpu(x, weight, eps, &mut normed)?,
        RowNorm::Gated { z, weight, eps } => crate::ops::gated_rms_norm::cpu(x, z, weight, eps, &mut normed)?,
    }
    cpu(p, &normed, y)
}

simd_variants! {
    #[allow(clippy::too_many_arguments)]
    fn transform_row(signs: &[f32], block: usize, inverse: bool, perm: Option<VHeadPerm>, x: &[f32], y: &mut [f32]) {
        let scale = 1.0 / (block as f32).sqrt();
        match (inverse, perm) {
            (true, _) => y.copy_from_slice(x),
            (false, None) => {
                for ((o, &v), &s) in y.iter_mut().zip(x).zip(signs) {
                    *o = v * s;
                }
            }
            (false, Some(perm)) => {
                for (i, (o, &s)) in y.iter_mut().zip(signs).enumerate() {
                    *o = x[perm.tiled_index(i)] * s;
                }
            }
        }
        for b in y.chunks_mut(block) {
            fwht_f32(b);
        }
        if inverse {
            for (o, &s) in y.iter_mut().zip(signs) {
                *o *= scale * s;
            }
        } else {
            for o in y.iter_mut() {
                *o *= scale;
            }
        }
    }
}

/// Unnormalized Sylvester-order Walsh-Hadamard transform in place (`v.len()` a power of two).
#[inline(always)]
fn fwht_f32(v: &mut [f32]) {
    let mut len = 1;
    while len < v.len() {
        for pair in v.chunks_exact_mut(2 * len) {
            let (lo, hi) = pair.split_at_mut(len);
            for (a, b) in lo.iter_mut().zip(hi.iter_mut()) {
                let (u, w) = (*a, *b);
                *a = u + w;
                *b = u - w;
            }
        }
        len *= 2;
    }
}

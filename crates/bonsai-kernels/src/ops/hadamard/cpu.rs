//! Fast CPU version: rayon over rows; per row, the signed (and permuted) load, f32 butterflies per
//! block, then the 1/sqrt(n) scale (and the inverse's signs).

use super::HadamardParams;
use crate::ops::OpError;
use rayon::prelude::*;

pub fn cpu(p: HadamardParams<'_>, x: &[f32], y: &mut [f32]) -> Result<(), OpError> {
    p.check(x, y)?;
    let width = p.signs.len();
    let scale = 1.0 / (p.block as f32).sqrt();
    y.par_chunks_mut(width).zip(x.par_chunks(width)).for_each(|(yr, xr)| {
        match (p.inverse, p.tiled_to_grouped) {
            (true, _) => yr.copy_from_slice(xr),
            (false, None) => {
                for ((o, &v), &s) in yr.iter_mut().zip(xr).zip(p.signs) {
                    *o = v * s;
                }
            }
            (false, Some(perm)) => {
                for (i, (o, &s)) in yr.iter_mut().zip(p.signs).enumerate() {
                    *o = xr[perm.tiled_index(i)] * s;
                }
            }
        }
        for block in yr.chunks_mut(p.block) {
            fwht_f32(block);
        }
        if p.inverse {
            for (o, &s) in yr.iter_mut().zip(p.signs) {
                *o *= scale * s;
            }
        } else {
            for o in yr.iter_mut() {
                *o *= scale;
            }
        }
    });
    Ok(())
}

/// Unnormalized Sylvester-order Walsh-Hadamard transform in place (`v.len()` a power of two).
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

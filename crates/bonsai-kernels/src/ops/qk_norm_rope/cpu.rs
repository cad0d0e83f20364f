//! Fast CPU version: the CPU pool over tokens; per head the `rms_norm` row kernel into the thread's scratch,
//! then the rotation (AVX2 copy at run time).

use super::Params;
use crate::cpu::pool::{self, Split};
use crate::cpu::{simd_level, simd_variants, with_scratch, SimdLevel};
use crate::ops::rms_norm::normalize_row_generic;
use crate::ops::OpError;

pub fn cpu(p: Params<'_>, qkv: &mut [f32], m: usize, pos0: usize) -> Result<(), OpError> {
    cpu_at(simd_level(), p, qkv, m, pos0)
}

/// [`cpu`] at an explicit SIMD level.
pub fn cpu_at(level: SimdLevel, p: Params<'_>, qkv: &mut [f32], m: usize, pos0: usize) -> Result<(), OpError> {
    p.check(qkv, m, pos0)?;
    let Params { shape, rot_dims, q_norm, k_norm, eps, rope } = p;
    if m == 0 {
        return Ok(());
    }
    let hd = shape.head_dim;
    let qk_len = (shape.n_q + shape.n_kv) * hd;
    let row_len = shape.qkv_row_len();
    let split = Split::new(1, pool::MIN_ELEMENTS_PER_PART.div_ceil(qk_len));
    pool::for_each_rows_mut(&mut qkv[..m * row_len], row_len, split, &|tokens, rows| {
        with_scratch(hd, |normed| {
            for (i, row) in tokens.zip(rows.chunks_exact_mut(row_len)) {
                let (cos, sin) = rope.row(pos0 + i);
                for (h, head) in row[..qk_len].chunks_exact_mut(hd).enumerate() {
                    let weight = if h < shape.n_q { q_norm } else { k_norm };
                    norm_rotate_head(level, head, rot_dims, weight, eps, cos, sin, normed);
                }
            }
        });
    });
    Ok(())
}

simd_variants! {
    fn norm_rotate_head(
        head: &mut [f32],
        rot_dims: usize,
        weight: &[f32],
        eps: f32,
        cos: &[f32],
        sin: &[f32],
        normed: &mut [f32],
    ) {
        normalize_row_generic(head, weight, eps, normed);
        let (rotated, passed) = head.split_at_mut(rot_dims);
        let (n_rotated, n_passed) = normed.split_at(rot_dims);
        let (n_lo, n_hi) = n_rotated.split_at(rot_dims / 2);
        let (x_lo, x_hi) = rotated.split_at_mut(rot_dims / 2);
        for d in 0..x_lo.len() {
            x_lo[d] = n_lo[d] * cos[d] - n_hi[d] * sin[d];
            x_hi[d] = n_hi[d] * cos[d] + n_lo[d] * sin[d];
        }
        passed.copy_from_slice(n_passed);
    }
}


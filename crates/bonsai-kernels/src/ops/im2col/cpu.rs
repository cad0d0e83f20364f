//! Fast CPU version: rayon over the `C·9` output rows; each output row is a shifted copy of the
//! channel plane, built row by row from one slice copy plus the zero border.

use super::{KERNEL, OP, PAD, TAPS};
use crate::ops::{ImageShape, OpError};
use rayon::prelude::*;

pub fn cpu(x: &[f32], image: ImageShape, cols: &mut [f32]) -> Result<(), OpError> {
    image.check(OP, x, ("cols", cols), TAPS)?;
    let ImageShape { height, width, .. } = image;
    let plane = height * width;
    cols.par_chunks_mut(plane).enumerate().for_each(|(row, out)| {
        let (c, tap) = (row / TAPS, row % TAPS);
        let (ky, kx) = (tap / KERNEL, tap % KERNEL);
        let src = &x[c * plane..(c + 1) * plane];
        shifted_plane(src, height, width, ky, kx, out);
    });
    Ok(())
}

/// `out[oy, ox] = src[oy + ky − PAD, ox + kx − PAD]`, zero outside `src`.
fn shifted_plane(src: &[f32], height: usize, width: usize, ky: usize, kx: usize, out: &mut [f32]) {
    // Output columns [x_lo, x_hi) read source columns [x_lo + kx − PAD, x_hi + kx − PAD).
    let x_lo = PAD.saturating_sub(kx).min(width);
    let x_hi = (width + PAD).saturating_sub(kx).min(width).max(x_lo);
    for (oy, out_row) in out.chunks_exact_mut(width).enumerate() {
        let sy = oy + ky;
        if sy < PAD || sy >= height + PAD {
            out_row.fill(0.0);
            continue;
        }
        let src_row = &src[(sy - PAD) * width..(sy - PAD + 1) * width];
        out_row[..x_lo].fill(0.0);
        let src_start = x_lo + kx - PAD;
        out_row[x_lo..x_hi].copy_from_slice(&src_row[src_start..src_start + (x_hi - x_lo)]);
        out_row[x_hi..].fill(0.0);
    }
}

//! Fast CPU version: rayon over input rows; each input row is widened once (every value written
//! twice) into the first of its two output rows, which is then copied into the second.

use super::OP;
use crate::ops::{ImageShape, OpError};
use rayon::prelude::*;

pub fn cpu(x: &[f32], image: ImageShape, y: &mut [f32]) -> Result<(), OpError> {
    image.check(OP, x, ("y", y), 4)?;
    let width = image.width;
    let out_w = 2 * width;
    // Output rows 2r and 2r+1 of the flattened [C·2H, 2W] come from input row r of [C·H, W].
    y.par_chunks_mut(2 * out_w).zip(x.par_chunks(width)).for_each(|(out_pair, in_row)| {
        let (first, second) = out_pair.split_at_mut(out_w);
        for (pair, &v) in first.chunks_exact_mut(2).zip(in_row) {
            pair[0] = v;
            pair[1] = v;
        }
        second.copy_from_slice(first);
    });
    Ok(())
}

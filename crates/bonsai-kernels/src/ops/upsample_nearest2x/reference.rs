//! The definition: one index formula per output element.

use super::OP;
use crate::ops::{ImageShape, OpError};

pub fn reference(x: &[f32], image: ImageShape, y: &mut [f32]) -> Result<(), OpError> {
    image.check(OP, x, ("y", y), 4)?;
    let ImageShape { channels, height, width } = image;
    let (out_h, out_w) = (2 * height, 2 * width);
    for c in 0..channels {
        for i in 0..out_h {
            for j in 0..out_w {
                y[(c * out_h + i) * out_w + j] = x[(c * height + i / 2) * width + j / 2];
            }
        }
    }
    Ok(())
}

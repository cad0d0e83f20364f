//! The definition: one bounds-checked gather per output element.

use super::{KERNEL, OP, PAD, TAPS};
use crate::ops::{ImageShape, OpError};

pub fn reference(x: &[f32], image: ImageShape, cols: &mut [f32]) -> Result<(), OpError> {
    image.check(OP, x, ("cols", cols), TAPS)?;
    let ImageShape { channels, height, width } = image;
    let plane = height * width;
    for c in 0..channels {
        for ky in 0..KERNEL {
            for kx in 0..KERNEL {
                let row = c * TAPS + ky * KERNEL + kx;
                for oy in 0..height {
                    for ox in 0..width {
                        // Source position, shifted by +PAD so it stays unsigned.
                        let (sy, sx) = (oy + ky, ox + kx);
                        let inside =
                            sy >= PAD && sy < height + PAD && sx >= PAD && sx < width + PAD;
                        cols[row * plane + oy * width + ox] = if inside {
                            x[c * plane + (sy - PAD) * width + (sx - PAD)]
                        } else {
                            0.0
                        };
                    }
                }
            }
        }
    }
    Ok(())
}

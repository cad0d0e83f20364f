//! The definition, in f64, straight from the formula (no im2col).

use super::{check_shapes, Inputs, ConvDims, TAPS};
use crate::ops::OpError;

pub fn reference(inputs: Inputs<'_>, y: &mut [f32]) -> Result<(), OpError> {
    check_shapes(&inputs, y)?;
    let Inputs { dims, x, weight, bias } = inputs;
    let ConvDims { c_in, c_out, h, w } = dims;
    for co in 0..c_out {
        for oh in 0..h {
            for ow in 0..w {
                let mut acc = bias[co] as f64;
                for ci in 0..c_in {
                    for kh in 0..3 {
                        for kw in 0..3 {
                            // Input row/column oh + kh − 1, ow + kw − 1; outside the image is 0.
                            let (Some(ih), Some(iw)) =
                                ((oh + kh).checked_sub(1), (ow + kw).checked_sub(1))
                            else {
                                continue;
                            };
                            if ih >= h || iw >= w {
                                continue;
                            }
                            let wt = weight[(co * c_in + ci) * TAPS + kh * 3 + kw] as f64;
                            acc += wt * x[(ci * h + ih) * w + iw] as f64;
                        }
                    }
                }
                y[(co * h + oh) * w + ow] = acc as f32;
            }
        }
    }
    Ok(())
}

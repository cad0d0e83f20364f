//! The definition: gate and up dot products in f64, silu(g)·u in f64, one rounding
//! ([`crate::ops::quant_reference::gate_up_swiglu`], shared with the other weight format).

use super::check_shapes;
use crate::ops::{quant_reference, OpError};
use crate::weights::Q1Matrix;

pub fn reference(w: &Q1Matrix, x: &[f32], m: usize, out: &mut [f32]) -> Result<(), OpError> {
    check_shapes(w, x, m, out)?;
    quant_reference::gate_up_swiglu(w, x, m, out);
    Ok(())
}

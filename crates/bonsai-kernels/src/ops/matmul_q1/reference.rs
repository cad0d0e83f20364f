//! The definition: every product in f64, one rounding to f32 at the end
//! ([`crate::ops::quant_reference::matmul`], shared with the other weight format).

use super::check_shapes;
use crate::ops::{quant_reference, OpError, Store};
use crate::weights::Q1Matrix;

pub fn reference(
    w: &Q1Matrix,
    x: &[f32],
    m: usize,
    y: &mut [f32],
    store: Store,
) -> Result<(), OpError> {
    check_shapes(w, x, m, y)?;
    quant_reference::matmul(w, x, m, y, store);
    Ok(())
}

//! The definition.

use super::OP;
use crate::ops::{check_len, OpError};

pub fn reference(a: &mut [f32], b: &[f32]) -> Result<(), OpError> {
    check_len(OP, "b", a.len(), b.len())?;
    for (x, &y) in a.iter_mut().zip(b) {
        *x = (*x as f64 + y as f64) as f32;
    }
    Ok(())
}

//! The definition, in f64.

use super::OP;
use crate::ops::{check_len, OpError};

pub fn reference(x: &[f32], y: &mut [f32]) -> Result<(), OpError> {
    check_len(OP, "y", x.len(), y.len())?;
    for (o, &v) in y.iter_mut().zip(x) {
        let v = v as f64;
        let e = (-v.abs()).exp();
        let sigmoid = if v >= 0.0 { 1.0 / (1.0 + e) } else { e / (1.0 + e) };
        *o = (v * sigmoid) as f32;
    }
    Ok(())
}

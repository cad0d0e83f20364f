//! The definition, in f64.

use super::check_shapes;
use crate::ops::OpError;

pub fn reference(gate_up: &[f32], m: usize, out: &mut [f32]) -> Result<(), OpError> {
    let f_len = check_shapes(gate_up, m, out)?;
    for i in 0..m {
        for f in 0..f_len {
            let g = gate_up[i * 2 * f_len + f] as f64;
            let u = gate_up[i * 2 * f_len + f_len + f] as f64;
            out[i * f_len + f] = (g / (1.0 + (-g).exp()) * u) as f32;
        }
    }
    Ok(())
}

//! The definition, in f64 (one rounding per output).

use super::ConvShape;
use crate::ops::OpError;

pub fn reference(x: &[f32], weight: &[f32], state: &mut [f32], y: &mut [f32]) -> Result<(), OpError> {
    let (ConvShape { channels, kernel }, rows) = ConvShape::infer(x, weight, state, y)?;
    let history = kernel - 1;
    // u_j for j in −(K−1)..rows: the state rows, then the inputs.
    let input = |j: usize, ch: usize| -> f32 {
        if j < history { state[j * channels + ch] } else { x[(j - history) * channels + ch] }
    };
    for t in 0..rows {
        for ch in 0..channels {
            let c: f64 = (0..kernel).map(|k| weight[ch * kernel + k] as f64 * input(t + k, ch) as f64).sum();
            y[t * channels + ch] = (c / (1.0 + (-c).exp())) as f32;
        }
    }
    let new_state: Vec<f32> =
        (rows..rows + history).flat_map(|j| (0..channels).map(move |ch| (j, ch))).map(|(j, ch)| input(j, ch)).collect();
    state.copy_from_slice(&new_state);
    Ok(())
}

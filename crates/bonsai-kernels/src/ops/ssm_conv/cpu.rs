//! Fast CPU version: rayon over rows (each reads its K-row window of [state; x]), then the state
//! takes the last K−1 rows.

use super::ConvShape;
use crate::ops::silu::silu_f32;
use crate::ops::OpError;
use rayon::prelude::*;

pub fn cpu(x: &[f32], weight: &[f32], state: &mut [f32], y: &mut [f32]) -> Result<(), OpError> {
    let (ConvShape { channels, kernel }, rows) = ConvShape::infer(x, weight, state, y)?;
    let history = kernel - 1;
    {
        let state: &[f32] = state;
        let row_of = |j: usize| -> &[f32] {
            if j < history { &state[j * channels..(j + 1) * channels] } else { &x[(j - history) * channels..(j - history + 1) * channels] }
        };
        y.par_chunks_mut(channels).enumerate().for_each(|(t, yr)| {
            for (ch, o) in yr.iter_mut().enumerate() {
                let taps = &weight[ch * kernel..(ch + 1) * kernel];
                let mut c = 0.0f32;
                for (k, &w) in taps.iter().enumerate() {
                    c += w * row_of(t + k)[ch];
                }
                *o = silu_f32(c);
            }
        });
    }
    // Row j of the new state is row rows + j of [state; x]; ascending j reads only rows at or
    // after the one it overwrites, so the shift is safe in place.
    for j in 0..history {
        let source = rows + j;
        if source < history {
            state.copy_within(source * channels..(source + 1) * channels, j * channels);
        } else {
            let from = (source - history) * channels;
            state[j * channels..(j + 1) * channels].copy_from_slice(&x[from..from + channels]);
        }
    }
    Ok(())
}

//! Tap order and the state's roll on hand-made cases; one call over many rows equals one call per
//! row; cpu == reference within 1.1·γ_K·Σ|w·u| + 8u·|y| + 2^-126 (derivation in the op's doc).

use super::{cpu, reference};
use crate::ops::test_util::{assert_within, gamma, widen, TestRng, F32_UNIT_ROUNDOFF};
use crate::ops::OpError;

type ConvFn = fn(&[f32], &[f32], &mut [f32], &mut [f32]) -> Result<(), OpError>;

fn silu(v: f64) -> f32 {
    (v / (1.0 + (-v).exp())) as f32
}

#[test]
fn taps_read_the_state_then_the_rows_and_the_state_rolls() {
    // C = 2, K = 3. Channel 0 takes only tap 0 (the input two rows back), channel 1 only tap 2
    // (the current row). State rows (oldest first): (10, 20), (11, 21).
    let weight = [1.0, 0.0, 0.0, 0.0, 0.0, 1.0];
    let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    for f in [reference as ConvFn, cpu] {
        let mut state = [10.0, 20.0, 11.0, 21.0];
        let mut y = [f32::NAN; 6];
        f(&x, &weight, &mut state, &mut y).expect("shape");
        let want = [silu(10.0), silu(2.0), silu(11.0), silu(4.0), silu(1.0), silu(6.0)];
        // silu of the same f64 value: both sides round one formula; the CPU's f32 silu is within
        // 6u relative of it (op doc), and these values are exact inputs (one nonzero tap).
        for (g, w) in y.iter().zip(want) {
            assert!((g - w).abs() <= 6.0 * F32_UNIT_ROUNDOFF as f32 * w.abs(), "{y:?} vs {want:?}");
        }
        assert_eq!(state, [3.0, 4.0, 5.0, 6.0], "the state keeps the last K-1 inputs");
        // One row: the state shifts by one.
        let mut y1 = [0.0; 2];
        f(&[7.0, 8.0], &weight, &mut state, &mut y1).expect("shape");
        assert_eq!(state, [5.0, 6.0, 7.0, 8.0]);
        // No rows: nothing changes.
        f(&[], &weight, &mut state, &mut []).expect("shape");
        assert_eq!(state, [5.0, 6.0, 7.0, 8.0]);
    }
}

#[test]
fn one_call_equals_one_call_per_row() {
    // Every output reads the same f32 inputs either way, and the state holds copies: bit-identical.
    let mut rng = TestRng::new("ssm_conv_split");
    let (rows, channels, kernel) = (6, 37, 4);
    let x = rng.vec(rows * channels, -2.0, 2.0);
    let weight = rng.vec(channels * kernel, -1.0, 1.0);
    let state0 = rng.vec((kernel - 1) * channels, -2.0, 2.0);
    for f in [reference as ConvFn, cpu] {
        let (mut whole_state, mut whole) = (state0.clone(), vec![0.0; x.len()]);
        f(&x, &weight, &mut whole_state, &mut whole).expect("shape");
        let (mut step_state, mut steps) = (state0.clone(), vec![0.0; x.len()]);
        for (xr, yr) in x.chunks(channels).zip(steps.chunks_mut(channels)) {
            f(xr, &weight, &mut step_state, yr).expect("shape");
        }
        assert_eq!(whole, steps);
        assert_eq!(whole_state, step_state);
    }
}

#[test]
fn cpu_matches_reference() {
    let mut rng = TestRng::new("ssm_conv");
    for (rows, channels, kernel) in [(1usize, 10240usize, 4usize), (2, 5, 4), (9, 300, 4), (5, 64, 1), (3, 16, 2)] {
        let x = rng.vec(rows * channels, -3.0, 3.0);
        let weight = rng.vec(channels * kernel, -1.0, 1.0);
        let state0 = rng.vec((kernel - 1) * channels, -3.0, 3.0);
        let (mut want_state, mut want) = (state0.clone(), vec![0.0; x.len()]);
        reference(&x, &weight, &mut want_state, &mut want).expect("shape");
        let (mut got_state, mut got) = (state0.clone(), vec![f32::NAN; x.len()]);
        cpu(&x, &weight, &mut got_state, &mut got).expect("shape");
        let history = kernel - 1;
        let input = |j: usize, ch: usize| {
            if j < history { state0[j * channels + ch] } else { x[(j - history) * channels + ch] }
        };
        let bound: Vec<f64> = (0..x.len())
            .map(|i| {
                let (t, ch) = (i / channels, i % channels);
                let a: f64 = (0..kernel).map(|k| (weight[ch * kernel + k] * input(t + k, ch)).abs() as f64).sum();
                1.1 * gamma(kernel) * a + 8.0 * F32_UNIT_ROUNDOFF * (want[i] as f64).abs() + f32::MIN_POSITIVE as f64
            })
            .collect();
        assert_within(&format!("ssm_conv rows={rows} C={channels} K={kernel}"), &got, &widen(&want), &bound);
        assert_eq!(got_state, want_state, "the state is a copy of inputs");
    }
}

#[test]
fn bad_shapes_are_errors() {
    let weight = [1.0f32; 8]; // C = 2, K = 4 with a state of 6
    let mut state = [0.0f32; 6];
    let mut y = [0.0f32; 4];
    assert!(reference(&[1.0; 4], &weight, &mut state, &mut y).is_ok());
    assert!(cpu(&[1.0; 3], &weight, &mut state, &mut y[..3]).is_err(), "partial row");
    assert!(cpu(&[1.0; 4], &weight, &mut state, &mut y[..2]).is_err(), "short y");
    assert!(cpu(&[1.0; 4], &weight, &mut [0.0; 8], &mut y).is_err(), "state as long as the weight");
    assert!(reference(&[1.0; 3], &[1.0; 7], &mut [0.0; 4], &mut y[..3]).is_err(), "C = 3 does not divide the weight");
}

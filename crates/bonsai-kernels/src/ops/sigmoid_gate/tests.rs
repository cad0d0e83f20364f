//! cpu == reference within 8u·|y| + 2^-126 (derivation in the op's doc), saturation, bad shapes.

use super::{cpu, reference};
use crate::ops::test_util::{assert_within, widen, TestRng, F32_UNIT_ROUNDOFF};

#[test]
fn cpu_matches_reference() {
    let mut rng = TestRng::new("sigmoid_gate");
    for len in [0usize, 1, 7, 6144, 100_003] {
        let x = rng.vec(len, -10.0, 10.0);
        let mut g = rng.vec(len, -20.0, 20.0);
        // Far tails: the exp underflows (g = ±120) or saturates to exactly 1.
        if len > 4 {
            g[0] = 120.0;
            g[1] = -120.0;
            g[2] = 0.0;
        }
        let mut want = vec![0.0; len];
        reference(&x, &g, &mut want).expect("shape");
        let mut got = vec![f32::NAN; len];
        cpu(&x, &g, &mut got).expect("shape");
        let bound: Vec<f64> =
            want.iter().map(|&w| 8.0 * F32_UNIT_ROUNDOFF * (w as f64).abs() + f32::MIN_POSITIVE as f64).collect();
        assert_within(&format!("sigmoid_gate len={len}"), &got, &widen(&want), &bound);
        if len > 4 {
            assert_eq!(got[0], x[0], "sigmoid(120) is 1 in f32");
            assert_eq!(got[2], x[2] * 0.5);
        }
    }
}

#[test]
fn bad_shapes_are_errors() {
    let mut y = [0.0f32; 3];
    assert!(cpu(&[1.0; 3], &[1.0; 2], &mut y).is_err());
    assert!(reference(&[1.0; 3], &[1.0; 3], &mut y[..2]).is_err());
}

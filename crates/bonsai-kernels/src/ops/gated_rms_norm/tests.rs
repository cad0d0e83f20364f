//! cpu == reference within (γ_{d+1} + 16u)·|y| + 2^-126 (derivation in the op's doc); the gate by hand.

use super::{cpu, reference};
use crate::ops::test_util::{assert_within, gamma, widen, TestRng, F32_UNIT_ROUNDOFF};

const EPS: f32 = 1e-6;

#[test]
fn gate_by_hand() {
    // x = (3, 4): mean(x²) = 12.5; w = 1; z = (0, large): silu(0) = 0, silu(30) = 30 to f32
    // precision (e^-30 < u). y = (0, 4·30/sqrt(12.5 + 1e-6)).
    let mut y = [f32::NAN; 2];
    reference(&[3.0, 4.0], &[0.0, 30.0], &[1.0, 1.0], EPS, &mut y).expect("shape");
    let want = (4.0 * 30.0 / (12.5f64 + 1e-6).sqrt()) as f32;
    assert_eq!(y, [0.0, want]);
    let mut y2 = [f32::NAN; 2];
    cpu(&[3.0, 4.0], &[0.0, 30.0], &[1.0, 1.0], EPS, &mut y2).expect("shape");
    assert_eq!(y2[0], 0.0);
    assert!((y2[1] - want).abs() <= 16.0 * F32_UNIT_ROUNDOFF as f32 * want);
}

#[test]
fn cpu_matches_reference() {
    let mut rng = TestRng::new("gated_rms_norm");
    for (heads, d) in [(1usize, 1usize), (48, 128), (7, 64), (3, 33), (200, 128)] {
        let x = rng.vec(heads * d, -3.0, 3.0);
        let z = rng.vec(heads * d, -8.0, 8.0);
        let weight = rng.vec(d, -2.0, 2.0);
        let mut want = vec![0.0; x.len()];
        reference(&x, &z, &weight, EPS, &mut want).expect("shape");
        let mut got = vec![f32::NAN; x.len()];
        cpu(&x, &z, &weight, EPS, &mut got).expect("shape");
        let rel = gamma(d + 1) + 16.0 * F32_UNIT_ROUNDOFF;
        let bound: Vec<f64> = want.iter().map(|&w| rel * (w as f64).abs() + f32::MIN_POSITIVE as f64).collect();
        assert_within(&format!("gated_rms_norm heads={heads} d={d}"), &got, &widen(&want), &bound);
    }
}

#[test]
fn bad_shapes_are_errors() {
    let mut y = [0.0f32; 8];
    assert!(cpu(&[1.0; 8], &[1.0; 8], &[1.0; 3], EPS, &mut y).is_err(), "d does not divide x");
    assert!(cpu(&[1.0; 8], &[1.0; 7], &[1.0; 4], EPS, &mut y).is_err(), "short z");
    assert!(reference(&[1.0; 8], &[1.0; 8], &[1.0; 4], EPS, &mut y[..4]).is_err(), "short y");
    assert!(reference(&[], &[], &[], EPS, &mut []).is_err(), "d = 0");
}

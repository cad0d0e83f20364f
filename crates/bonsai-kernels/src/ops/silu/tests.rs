//! cpu == reference for `silu` within 8u·|y| + 2^−126 (derivation in the op's doc).

use super::{cpu_at, cpu_in_place_at, reference};
use crate::cpu::available_levels;
use crate::ops::test_util::{assert_within, widen, TestRng, F32_UNIT_ROUNDOFF};

/// Relative bound from the op's doc.
const REL_BOUND_ULPS: f64 = 8.0;

/// Inputs the random ones may miss: signed zeros, tiny values, the subnormal-exp band near −100,
/// exp's underflow to 0, and huge magnitudes.
const EDGE_VALUES: [f32; 12] =
    [0.0, -0.0, 1e-30, -1e-30, 1.0, -1.0, -87.5, -100.0, -104.5, -200.0, 1e30, -1e30];

fn bound(want: &[f32]) -> Vec<f64> {
    want.iter()
        .map(|&w| REL_BOUND_ULPS * F32_UNIT_ROUNDOFF * (w as f64).abs() + f32::MIN_POSITIVE as f64)
        .collect()
}

#[test]
fn cpu_matches_reference() {
    let mut rng = TestRng::new("silu");
    for len in [0usize, 1, 7, 40_000] {
        // ±120 covers the bend near 0, both saturated tails and the subnormal band.
        let mut x = rng.vec(len, -120.0, 120.0);
        x.extend_from_slice(&EDGE_VALUES);
        let mut want = vec![0.0; x.len()];
        reference(&x, &mut want).expect("shapes");
        let bound = bound(&want);
        for level in available_levels() {
            let what = format!("silu len={} {level:?}", x.len());
            let mut got = vec![f32::NAN; x.len()];
            cpu_at(level, &x, &mut got).expect("shapes");
            assert_within(&what, &got, &widen(&want), &bound);
            let mut in_place = x.clone();
            cpu_in_place_at(level, &mut in_place);
            assert_eq!(in_place, got, "{what}: in place differs from out of place");
        }
    }
}

#[test]
fn known_values() {
    // silu(0) = 0, silu(x) -> x for large x, -> 0 for very negative x.
    let x = [0.0f32, 50.0, -200.0];
    for level in available_levels() {
        let mut y = [f32::NAN; 3];
        cpu_at(level, &x, &mut y).expect("shapes");
        assert_eq!(y[0], 0.0, "{level:?}");
        assert_eq!(y[1], 50.0, "{level:?}");
        assert!(y[2] <= 0.0 && y[2] > -1e-30, "{level:?}: silu(-200) = {}", y[2]);
    }
}

#[test]
fn bad_shapes_are_errors() {
    let mut y = vec![0.0; 4];
    assert!(super::cpu(&[0.0; 5], &mut y).is_err());
    assert!(reference(&[0.0; 3], &mut y).is_err());
}

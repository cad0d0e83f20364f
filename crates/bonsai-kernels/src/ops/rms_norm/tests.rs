//! cpu == reference for `rms_norm` within (γ_{n+1} + 8u)·|x·w·r| (derivation in the op's doc).

use super::{cpu_at, reference};
use crate::cpu::available_levels;
use crate::ops::test_util::{assert_within, gamma, widen, TestRng, F32_UNIT_ROUNDOFF};

/// Qwen3's eps.
const EPS: f32 = 1e-6;

#[test]
fn cpu_matches_reference() {
    let mut rng = TestRng::new("rms_norm");
    for (rows, n) in [(1usize, 1usize), (1, 4096), (5, 128), (3, 2049)] {
        let x = rng.vec(rows * n, -4.0, 4.0);
        let weight = rng.vec(n, -2.0, 2.0);
        let mut want = vec![0.0; rows * n];
        reference(&x, &weight, EPS, &mut want).expect("shape");
        let rel = gamma(n + 1) + 8.0 * F32_UNIT_ROUNDOFF;
        let mut bound = Vec::with_capacity(x.len());
        for xr in x.chunks(n) {
            let mean_sq = xr.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / n as f64;
            let r = 1.0 / (mean_sq + EPS as f64).sqrt();
            bound.extend(
                xr.iter().zip(&weight).map(|(&v, &w)| rel * (v as f64 * w as f64 * r).abs()),
            );
        }
        for level in available_levels() {
            let mut got = vec![f32::NAN; rows * n];
            cpu_at(level, &x, &weight, EPS, &mut got).expect("shape");
            assert_within(
                &format!("rms_norm rows={rows} n={n} {level:?}"),
                &got,
                &widen(&want),
                &bound,
            );
        }
    }
}

#[test]
fn zero_row_stays_zero_and_finite() {
    for level in available_levels() {
        let mut y = vec![f32::NAN; 8];
        cpu_at(level, &[0.0; 8], &[1.5; 8], EPS, &mut y).expect("shape");
        assert_eq!(y, vec![0.0; 8], "{level:?}");
    }
}

#[test]
fn bad_shapes_are_errors() {
    let mut y = vec![0.0; 6];
    assert!(super::cpu(&[1.0; 6], &[1.0; 4], EPS, &mut y).is_err());
    assert!(reference(&[1.0; 6], &[1.0; 3], EPS, &mut y[..5]).is_err());
    assert!(reference(&[], &[], EPS, &mut []).is_err());
}

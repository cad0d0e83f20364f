//! cpu == reference for `swiglu` within 8u·|out| (derivation in the op's doc).

use super::{cpu_at, reference};
use crate::cpu::available_levels;
use crate::ops::test_util::{assert_within, widen, TestRng, F32_UNIT_ROUNDOFF};

/// Relative bound from the op's doc.
const REL_BOUND_ULPS: f64 = 8.0;

#[test]
fn cpu_matches_reference() {
    let mut rng = TestRng::new("swiglu");
    for (m, f_len) in [(1usize, 1usize), (1, 12288), (3, 17), (7, 256)] {
        // Gates reach both saturated tails (±20) and the bend near 0.
        let gate_up = rng.vec(m * 2 * f_len, -20.0, 20.0);
        let mut want = vec![0.0; m * f_len];
        reference(&gate_up, m, &mut want).expect("shapes");
        let bound: Vec<f64> = want
            .iter()
            .map(|&w| {
                REL_BOUND_ULPS * F32_UNIT_ROUNDOFF * (w as f64).abs() + f32::MIN_POSITIVE as f64
            })
            .collect();
        for level in available_levels() {
            let mut got = vec![f32::NAN; m * f_len];
            cpu_at(level, &gate_up, m, &mut got).expect("shapes");
            assert_within(
                &format!("swiglu m={m} F={f_len} {level:?}"),
                &got,
                &widen(&want),
                &bound,
            );
        }
    }
}

#[test]
fn bad_shapes_are_errors() {
    let mut out = vec![0.0; 4];
    assert!(super::cpu(&[0.0; 7], 2, &mut out).is_err());
    assert!(reference(&[0.0; 8], 3, &mut out).is_err());
}

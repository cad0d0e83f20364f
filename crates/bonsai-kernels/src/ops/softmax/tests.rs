//! cpu == reference for `softmax` within the relative bound derived in the op's doc.

use super::{cpu_at, reference};
use crate::cpu::available_levels;
use crate::ops::test_util::{assert_within, gamma, widen, TestRng, F32_UNIT_ROUNDOFF};

#[test]
fn cpu_matches_reference() {
    let mut rng = TestRng::new("softmax");
    let u = F32_UNIT_ROUNDOFF;
    for (rows, n, spread) in
        [(1usize, 1usize, 1.0f32), (3, 7, 5.0), (2, 1000, 30.0), (1, 151_669, 20.0)]
    {
        let x = rng.vec(rows * n, -spread, spread);
        let mut want = x.clone();
        reference(&mut want, n).expect("shape");
        let mut bound = Vec::with_capacity(x.len());
        for (row_x, row_y) in x.chunks(n).zip(want.chunks(n)) {
            let max = row_x.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)) as f64;
            for (&xv, &yv) in row_x.iter().zip(row_y) {
                let rel = u * (xv as f64 - max).abs() + gamma(n) + 5.0 * u;
                bound.push(2.0 * rel * yv as f64 + f32::MIN_POSITIVE as f64);
            }
        }
        for level in available_levels() {
            let mut got = x.clone();
            cpu_at(level, &mut got, n).expect("shape");
            assert_within(
                &format!("softmax rows={rows} n={n} {level:?}"),
                &got,
                &widen(&want),
                &bound,
            );
        }
    }
}

#[test]
fn single_element_and_equal_rows_are_exact() {
    for level in available_levels() {
        let mut one = [3.5f32];
        cpu_at(level, &mut one, 1).expect("shape");
        assert_eq!(one, [1.0]);
        let mut four = [-2.0f32; 4];
        cpu_at(level, &mut four, 4).expect("shape");
        assert_eq!(four, [0.25; 4]);
    }
}

#[test]
fn bad_row_length_is_an_error() {
    assert!(super::cpu(&mut [0.0; 5], 2).is_err());
    assert!(reference(&mut [0.0; 4], 0).is_err());
}

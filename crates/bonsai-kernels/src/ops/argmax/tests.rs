//! argmax is exact: cpu == reference, plus the tie / NaN / empty rules.

use super::{cpu, reference};
use crate::ops::test_util::TestRng;
use crate::ops::OpError;

#[test]
fn cpu_equals_reference_on_random_vectors() {
    let mut rng = TestRng::new("argmax");
    for len in [1usize, 2, 100, (1 << 14) + 3, 151_669] {
        let mut x = rng.vec(len, -5.0, 5.0);
        // Sprinkle NaNs and plant a tie of the maximum in two chunks.
        for _ in 0..len / 50 {
            let i = rng.below(len);
            x[i] = f32::NAN;
        }
        assert_eq!(cpu(&x), reference(&x), "len {len}");
        if len > 2 {
            let (a, b) = (rng.below(len / 2), len / 2 + rng.below(len - len / 2));
            x[a] = 9.0;
            x[b] = 9.0;
            assert_eq!(cpu(&x), Ok(a.min(b)), "tie len {len}");
            assert_eq!(reference(&x), Ok(a.min(b)), "tie len {len}");
        }
    }
}

#[test]
fn edge_rules() {
    let none = Err(OpError::NoCandidate { op: super::OP });
    assert_eq!(cpu(&[]), none);
    assert_eq!(reference(&[]), none);
    assert_eq!(cpu(&[f32::NAN, f32::NAN]), none);
    assert_eq!(cpu(&[f32::NAN, -1.0, f32::NAN]), Ok(1));
    assert_eq!(cpu(&[1.0, f32::INFINITY, f32::INFINITY]), Ok(1));
    assert_eq!(cpu(&[f32::NEG_INFINITY, f32::NEG_INFINITY]), Ok(0));
    assert_eq!(reference(&[2.0, f32::NAN, 2.0]), Ok(0));
    assert_eq!(cpu(&[-0.0, 0.0]), Ok(0), "-0 == +0: a tie, lowest index");
}

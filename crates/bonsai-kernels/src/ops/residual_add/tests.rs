//! A correctly rounded f32 add is unique, so cpu must equal reference bit for bit.

use super::{cpu_at, reference};
use crate::cpu::available_levels;
use crate::ops::test_util::TestRng;

#[test]
fn cpu_equals_reference_bitwise() {
    let mut rng = TestRng::new("residual_add");
    // Lengths: 1, odd, a chunk boundary + 1, several chunks.
    for len in [1usize, 7, 4097, (1 << 14) + 1, 100_003] {
        let a0 = rng.vec(len, -10.0, 10.0);
        let b = rng.vec(len, -10.0, 10.0);
        let mut want = a0.clone();
        reference(&mut want, &b).expect("lengths");
        for level in available_levels() {
            let mut got = a0.clone();
            cpu_at(level, &mut got, &b).expect("lengths");
            assert_eq!(got, want, "len {len} {level:?}");
        }
    }
}

#[test]
fn length_mismatch_is_an_error() {
    assert!(super::cpu(&mut [1.0, 2.0], &[1.0]).is_err());
    assert!(reference(&mut [1.0], &[1.0, 2.0]).is_err());
}

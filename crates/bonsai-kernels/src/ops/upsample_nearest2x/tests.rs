//! cpu == reference for `upsample_nearest2x`, bit for bit (the op only copies).

use super::{cpu, reference};
use crate::ops::ImageShape;
use crate::ops::test_util::TestRng;

#[test]
fn cpu_matches_reference_exactly() {
    let mut rng = TestRng::new("upsample_nearest2x");
    for (c, h, w) in [(1usize, 1usize, 1usize), (3, 5, 7), (4, 1, 9), (2, 33, 1), (8, 32, 32)] {
        let x = rng.vec(c * h * w, -3.0, 3.0);
        let mut want = vec![f32::NAN; 4 * x.len()];
        reference(&x, ImageShape::new(c, h, w), &mut want).expect("shapes");
        let mut got = vec![f32::NAN; 4 * x.len()];
        cpu(&x, ImageShape::new(c, h, w), &mut got).expect("shapes");
        let (want_bits, got_bits): (Vec<u32>, Vec<u32>) =
            (want.iter().map(|v| v.to_bits()).collect(), got.iter().map(|v| v.to_bits()).collect());
        assert_eq!(got_bits, want_bits, "upsample_nearest2x {c}x{h}x{w}");
    }
}

#[test]
fn known_pattern() {
    // One channel 2x2 [[1, 2], [3, 4]] -> 4x4 blocks of each value.
    let mut y = vec![0.0; 16];
    cpu(&[1.0, 2.0, 3.0, 4.0], ImageShape::new(1, 2, 2), &mut y).expect("shapes");
    let want = [
        1.0, 1.0, 2.0, 2.0, //
        1.0, 1.0, 2.0, 2.0, //
        3.0, 3.0, 4.0, 4.0, //
        3.0, 3.0, 4.0, 4.0,
    ];
    assert_eq!(y, want);
}

#[test]
fn bad_shapes_are_errors() {
    let mut y = vec![0.0; 16];
    assert!(cpu(&[0.0; 4], ImageShape::new(1, 2, 2), &mut y[..15]).is_err());
    assert!(cpu(&[0.0; 3], ImageShape::new(1, 2, 2), &mut y).is_err());
    assert!(reference(&[], ImageShape::new(0, 2, 2), &mut []).is_err());
    assert!(cpu(&[], ImageShape::new(1, usize::MAX, 2), &mut []).is_err());
}

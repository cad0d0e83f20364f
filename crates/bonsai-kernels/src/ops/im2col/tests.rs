//! cpu == reference for `im2col`, bit for bit (the op only copies and zero-fills).

use super::{cpu, reference, TAPS};
use crate::ops::ImageShape;
use crate::ops::test_util::TestRng;

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn cpu_matches_reference_exactly() {
    let mut rng = TestRng::new("im2col");
    // 1-wide and 1-high images make every tap but the centre fall on the border.
    for (c, h, w) in [(1usize, 1usize, 1usize), (1, 1, 6), (2, 5, 1), (3, 4, 7), (5, 16, 16)] {
        let x = rng.vec(c * h * w, -3.0, 3.0);
        let mut want = vec![f32::NAN; TAPS * x.len()];
        reference(&x, ImageShape::new(c, h, w), &mut want).expect("shapes");
        let mut got = vec![f32::NAN; TAPS * x.len()];
        cpu(&x, ImageShape::new(c, h, w), &mut got).expect("shapes");
        assert_eq!(bits(&got), bits(&want), "im2col {c}x{h}x{w}");
    }
}

#[test]
fn known_patch_of_a_2x2_image() {
    // x = [[1, 2], [3, 4]]; the centre tap (row 4) is x itself, the top-left tap (row 0) reads
    // up-left: only output (1, 1) sees x[0, 0].
    let x = [1.0, 2.0, 3.0, 4.0];
    let mut cols = vec![f32::NAN; TAPS * 4];
    cpu(&x, ImageShape::new(1, 2, 2), &mut cols).expect("shapes");
    assert_eq!(&cols[4 * 4..5 * 4], &x);
    assert_eq!(&cols[0..4], &[0.0, 0.0, 0.0, 1.0]);
    assert_eq!(&cols[8 * 4..9 * 4], &[4.0, 0.0, 0.0, 0.0]);
}

#[test]
fn bad_shapes_are_errors() {
    let mut cols = vec![0.0; TAPS * 4];
    assert!(cpu(&[0.0; 4], ImageShape::new(1, 2, 2), &mut cols[..35]).is_err());
    assert!(reference(&[0.0; 3], ImageShape::new(1, 2, 2), &mut cols).is_err());
    assert!(cpu(&[], ImageShape::new(1, 0, 2), &mut []).is_err());
    assert!(cpu(&[], ImageShape::new(usize::MAX, 2, 2), &mut []).is_err());
}

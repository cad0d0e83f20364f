//! Round trips and edge cases of every block type, with derived error bounds.

mod common;

use bonsai_gguf::{dequantize, quantize, GgufError, TensorType, TwoBitLayout};
use common::Rng;
use half::f16;

const TWO_BIT: [TwoBitLayout; 3] = [
    TwoBitLayout::Tq2G128ScaleLast,
    TwoBitLayout::Pq2G128ScaleFirst,
    TwoBitLayout::Q2G64ScaleFirst,
];
const ALL_TYPES: [TensorType; 8] = [
    TensorType::F32,
    TensorType::F16,
    TensorType::BF16,
    TensorType::Q8_0,
    TensorType::Q1_0,
    TensorType::TwoBit(TwoBitLayout::Tq2G128ScaleLast),
    TensorType::TwoBit(TwoBitLayout::Pq2G128ScaleFirst),
    TensorType::TwoBit(TwoBitLayout::Q2G64ScaleFirst),
];
/// Groups per random test vector.
const N_GROUPS: usize = 37;

fn round_trip(ty: TensorType, src: &[f32]) -> Vec<f32> {
    let bytes = quantize(ty, src).expect("quantize");
    assert_eq!(
        bytes.len(),
        src.len() / ty.block_elems() * ty.block_bytes(),
        "{} byte count",
        ty.name()
    );
    let mut out = vec![f32::NAN; src.len()];
    dequantize(ty, &bytes, &mut out).expect("dequantize");
    out
}

/// Relative rounding error of an f16/bf16 conversion (round-to-nearest: half an ulp).
const F16_REL: f32 = 1.0 / 2048.0; // 2^-11
const BF16_REL: f32 = 1.0 / 256.0; // 2^-8

#[test]
fn float_types_round_trip_within_half_an_ulp() {
    let mut rng = Rng::fresh("float_types");
    // Magnitudes in [1e-3, 1e3]: inside the f16 normal range, so the relative bound holds.
    let src: Vec<f32> =
        (0..1000).map(|_| rng.sym(1.0).signum() * 10f32.powf(rng.sym(3.0))).collect();
    assert_eq!(round_trip(TensorType::F32, &src), src, "F32 is exact");
    for (ty, rel) in [(TensorType::F16, F16_REL), (TensorType::BF16, BF16_REL)] {
        for (x, y) in src.iter().zip(round_trip(ty, &src)) {
            assert!((x - y).abs() <= rel * x.abs(), "{}: {x} -> {y}", ty.name());
        }
    }
}

#[test]
fn q8_0_error_is_at_most_half_a_step() {
    let mut rng = Rng::fresh("q8_0");
    let src = rng.vec(32 * N_GROUPS, 3.0);
    let out = round_trip(TensorType::Q8_0, &src);
    for (g, (xs, ys)) in src.chunks(32).zip(out.chunks(32)).enumerate() {
        let absmax = xs.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let d = f16::from_f32(absmax / 127.0).to_f32();
        // q = round(x/d): |x - q·d| <= d/2; the 1e-6 relative slack covers f32 rounding of x/d.
        let bound = d / 2.0 * (1.0 + 1e-6);
        for (x, y) in xs.iter().zip(ys) {
            assert!((x - y).abs() <= bound, "group {g}: {x} -> {y}, d {d}");
        }
    }
}

#[test]
fn q1_0_is_exact_on_plus_minus_d_and_picks_the_l2_optimal_scale() {
    let mut rng = Rng::fresh("q1_0");
    // Exact: every input already ±d with d an f16 value; mean |x| = d exactly.
    let d = f16::from_f32(rng.sym(1.0).abs() + 0.01).to_f32();
    let signs: Vec<f32> =
        (0..128 * N_GROUPS).map(|_| if rng.below(2) == 0 { d } else { -d }).collect();
    assert_eq!(round_trip(TensorType::Q1_0, &signs), signs);

    // Optimal: for fixed signs the squared error is a parabola in d with its minimum at mean |x|,
    // so the stored f16 scale must do no worse than its f16 neighbours.
    let src = rng.vec(128 * N_GROUPS, 2.0);
    let bytes = quantize(TensorType::Q1_0, &src).expect("quantize");
    for (g, xs) in src.chunks(128).enumerate() {
        let stored = f16::from_le_bytes([bytes[g * 18], bytes[g * 18 + 1]]);
        let sq_err = |scale: f16| -> f64 {
            let s = f64::from(scale.to_f32());
            xs.iter().map(|&x| (f64::from(x.abs()) - s).powi(2)).sum()
        };
        let (up, down) =
            (f16::from_bits(stored.to_bits() + 1), f16::from_bits(stored.to_bits() - 1));
        assert!(
            sq_err(stored) <= sq_err(up) && sq_err(stored) <= sq_err(down),
            "group {g} scale {stored}"
        );
        // And the signs are those of x (zero counts as positive).
        let out = round_trip(TensorType::Q1_0, xs);
        for (x, y) in xs.iter().zip(&out) {
            assert_eq!(*x >= 0.0, *y >= 0.0, "group {g}: sign of {x} -> {y}");
        }
    }
}

#[test]
fn q1_0_scale_is_the_nearest_f16_even_next_to_a_midpoint() {
    // Mean a hair above the midpoint of the f16 values 0.978515625 and 0.97900390625: rounded to
    // f32 first it would sit exactly on the midpoint and round to the even, lower neighbour.
    let midpoint = 4009.0f32 / 4096.0; // 0.978759765625, exact in f32
    let mut src = vec![midpoint; 127];
    src.push(midpoint + 2f32.powi(-20));
    let bytes = quantize(TensorType::Q1_0, &src).expect("quantize");
    let stored = f16::from_le_bytes([bytes[0], bytes[1]]);
    assert_eq!(stored.to_f64(), 0.979_003_906_25, "scale {stored}");
}

#[test]
fn two_bit_layouts_are_exact_on_ternary_inputs_and_bounded_otherwise() {
    let mut rng = Rng::fresh("two_bit");
    for layout in TWO_BIT {
        let ty = TensorType::TwoBit(layout);
        let group = ty.block_elems();
        // Exact on {-d, 0, +d} with d an f16 value and at least one ±d per group (so absmax = d).
        let d = f16::from_f32(rng.sym(1.0).abs() + 0.01).to_f32();
        let mut tern: Vec<f32> =
            (0..group * N_GROUPS).map(|_| [-d, 0.0, d][rng.below(3)]).collect();
        for g in 0..N_GROUPS {
            tern[g * group] = d;
        }
        assert_eq!(round_trip(ty, &tern), tern, "{} exact on ternary input", ty.name());

        // Bound: a = absmax over the scale's group, stored d = f16(a). Codes ±1 apply when
        // |x| >= a/2, so |x - d·sign| <= a/2 + |a - d|; zeros apply when |x| < a/2. Hence
        // |err| <= a/2 + |a - d|. Every layout scales 128-weight groups (Q2_0 g64 writes the
        // group's scale into both of its blocks).
        let scale_group = 128;
        let src = rng.vec(group * N_GROUPS, 1.5);
        let out = round_trip(ty, &src);
        for (xs, ys) in src.chunks(scale_group).zip(out.chunks(scale_group)) {
            let a = xs.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let bound = a / 2.0 + (a - f16::from_f32(a).to_f32()).abs();
            for (x, y) in xs.iter().zip(ys) {
                assert!((x - y).abs() <= bound * (1.0 + 1e-6), "{}: {x} -> {y}, a {a}", ty.name());
            }
        }
    }
}

#[test]
fn code_maps_match_the_spec() {
    // One block per layout with codes 00, 01, 10, 11 repeating (byte 0b11_10_01_00 = 0xE4), d = 2.
    let d = f16::from_f32(2.0).to_le_bytes();
    let cases: [(TwoBitLayout, Vec<u8>, [f32; 4]); 3] = [
        (
            TwoBitLayout::Tq2G128ScaleLast,
            [vec![0xE4; 32], d.to_vec()].concat(),
            [-2.0, 0.0, 2.0, 0.0],
        ),
        (
            TwoBitLayout::Pq2G128ScaleFirst,
            [d.to_vec(), vec![0xE4; 32]].concat(),
            [-2.0, 0.0, 2.0, 4.0],
        ),
        (
            TwoBitLayout::Q2G64ScaleFirst,
            [d.to_vec(), vec![0xE4; 16]].concat(),
            [-2.0, 0.0, 2.0, 4.0],
        ),
    ];
    for (layout, bytes, expect) in cases {
        let ty = TensorType::TwoBit(layout);
        let mut out = vec![0.0; ty.block_elems()];
        dequantize(ty, &bytes, &mut out).expect("dequantize");
        for (j, v) in out.iter().enumerate() {
            assert_eq!(*v, expect[j % 4], "{} weight {j}", ty.name());
        }
    }
    // Q1_0: bit 1 -> +d, LSB first. Byte 0x01 sets only weight 0 of each 8.
    let bytes = [d.to_vec(), vec![0x01; 16]].concat();
    let mut out = vec![0.0; 128];
    dequantize(TensorType::Q1_0, &bytes, &mut out).expect("dequantize");
    for (j, v) in out.iter().enumerate() {
        assert_eq!(*v, if j % 8 == 0 { 2.0 } else { -2.0 }, "Q1_0 weight {j}");
    }
}

#[test]
fn all_zero_groups_give_zero_scale_and_zeros() {
    for ty in ALL_TYPES {
        let src = vec![0.0f32; ty.block_elems() * 4];
        let out = round_trip(ty, &src);
        assert!(out.iter().all(|v| *v == 0.0), "{} decodes zeros, got {:?}", ty.name(), &out[..4]);
    }
    // A zero group next to a non-zero one keeps its own zero scale.
    let mut src = vec![0.0f32; 256];
    src[200] = 1.0;
    let out = round_trip(TensorType::TwoBit(TwoBitLayout::Tq2G128ScaleLast), &src);
    assert!(out[..128].iter().all(|v| *v == 0.0));
    assert_eq!(out[200], 1.0);
}

#[test]
fn bad_lengths_and_inputs_are_typed_errors() {
    for ty in ALL_TYPES {
        let group = ty.block_elems();
        let bytes = vec![0u8; ty.block_bytes() * 2];
        let mut out = vec![0.0; group * 3];
        assert!(
            matches!(dequantize(ty, &bytes, &mut out), Err(GgufError::BadLength { .. })),
            "{}",
            ty.name()
        );
        let mut out = vec![0.0; group * 2];
        assert!(
            matches!(dequantize(ty, &bytes[1..], &mut out), Err(GgufError::BadLength { .. })),
            "{}",
            ty.name()
        );
        if group > 1 {
            assert!(
                matches!(quantize(ty, &vec![1.0; group + 1]), Err(GgufError::BadLength { .. })),
                "{}",
                ty.name()
            );
            let mut src = vec![1.0; group];
            src[group - 1] = f32::NAN;
            let err = quantize(ty, &src).expect_err("NaN rejected");
            assert!(
                matches!(err, GgufError::NonFiniteInput { index, .. } if index == group - 1),
                "{err}"
            );
            let huge = vec![1e30f32; group];
            assert!(
                matches!(quantize(ty, &huge), Err(GgufError::BadLength { .. })),
                "{} scale overflow",
                ty.name()
            );
        }
    }
}

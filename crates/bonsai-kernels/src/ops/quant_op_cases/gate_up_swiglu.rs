//! cpu == reference for `gate_up_swiglu_q1/q2` within the bound derived in the ops' doc.

use crate::cpu::available_levels;
use crate::ops::test_util::{assert_within, gamma, widen, TestMatrix, TestRng, F32_UNIT_ROUNDOFF};
use crate::ops::quant_ops::gate_up_swiglu::{cpu, cpu_at, reference};
use crate::ops::quant_ops::QuantMatrix;
use crate::weights::GROUP;
use half::f16;

/// Expands, inside an op's `tests.rs`, to one `#[test]` per shared case, each run on the weight
/// format `$matrix`.
macro_rules! gate_up_swiglu_tests {
    ($matrix:ty) => {
        $crate::ops::quant_op_cases::shared_tests!(gate_up_swiglu on $matrix =>
            cpu_matches_reference_on_random_shapes,
            zero_gate_or_up_rows_give_zero,
            odd_n_and_bad_lengths_are_errors,
        );
    };
}
pub(crate) use gate_up_swiglu_tests;

/// (F, K, M): K = 128, odd F, M = 1, M off the token tile, a decode-width K, F a multiple of 8
/// (the up rows start on a group of the interleaved layout); M >= 16 runs the panel GEMM (odd F
/// off its 32-row micro-panel, K off its 256-wide chunk, M off its 12-token tile).
const SHAPES: &[(usize, usize, usize)] = &[
    (1, 128, 1),
    (7, 128, 3),
    (33, 256, 1),
    (65, 512, 5),
    (20, 2048, 6),
    (40, 640, 1),
    (33, 384, 19),
    (5, 128, 16),
];

/// Largest |silu'(g)| over all g (≈ 1.0998, at g ≈ 2.4).
const SILU_SLOPE_MAX: f64 = 1.1;

fn bound<W: TestMatrix>(w: &W, x: &[f32], m: usize, want: &[f32]) -> Vec<f64> {
    let u = F32_UNIT_ROUNDOFF;
    let k_len = w.k();
    let g_k = gamma(k_len + GROUP);
    let f_len = w.n() / 2;
    let dot = |row: usize, i: usize| -> (f64, f64) {
        (0..k_len).fold((0.0, 0.0), |(s, a), k| {
            let p = w.weight_at(row, k) as f64 * x[i * k_len + k] as f64;
            (s + p, a + p.abs())
        })
    };
    let mut out = Vec::with_capacity(m * f_len);
    for i in 0..m {
        for f in 0..f_len {
            let (g, a_g) = dot(f, i);
            let (up, a_u) = dot(f_len + f, i);
            let dg = 2.0 * g_k * a_g + u * g.abs();
            let du = 2.0 * g_k * a_u + u * up.abs();
            let silu = g / (1.0 + (-g).exp());
            out.push(
                SILU_SLOPE_MAX * dg * (up.abs() + du)
                    + (silu.abs() + SILU_SLOPE_MAX * dg) * du
                    + 8.0 * u * (want[i * f_len + f] as f64).abs(),
            );
        }
    }
    out
}

fn check<W: TestMatrix + QuantMatrix>(w: &W, m: usize, rng: &mut TestRng, what: &str) {
    // x spread so that g covers both silu tails and the bend near 0.
    let x = rng.vec(m * w.k(), -3.0, 3.0);
    let mut want = vec![0.0; m * w.n() / 2];
    reference(w, &x, m, &mut want).expect("reference shapes");
    let bound = bound(w, &x, m, &want);
    for level in available_levels() {
        let mut got = vec![f32::NAN; want.len()];
        cpu_at(level, w, &x, m, &mut got).expect("cpu shapes");
        let label = format!("{} {what} F={} K={} M={m} {level:?}", W::GATE_UP_SWIGLU_OP, w.n() / 2, w.k());
        assert_within(&label, &got, &widen(&want), &bound);
    }
}

pub(crate) fn cpu_matches_reference_on_random_shapes<W: TestMatrix + QuantMatrix>() {
    let mut rng = TestRng::new(&format!("{}_random", W::GATE_UP_SWIGLU_OP));
    for &(f, k, m) in SHAPES {
        let w = W::random(&mut rng, 2 * f, k);
        check(&w, m, &mut rng, "random");
    }
}

pub(crate) fn zero_gate_or_up_rows_give_zero<W: TestMatrix + QuantMatrix>() {
    let mut rng = TestRng::new(&format!("{}_zero", W::GATE_UP_SWIGLU_OP));
    let (f, k, m) = (5, 256, 3);
    let mut w = W::random(&mut rng, 2 * f, k);
    // Gate row 1 and up row 3 (matrix row F + 3) all-zero.
    w.map_scales(&|row, _kb, scale| if row == 1 || row == f + 3 { f16::ZERO } else { scale });
    check(&w, m, &mut rng, "zero rows");
    let x = rng.vec(m * k, -1.0, 1.0);
    for level in available_levels() {
        let mut out = vec![f32::NAN; m * f];
        cpu_at(level, &w, &x, m, &mut out).expect("shapes");
        for i in 0..m {
            assert_eq!(out[i * f + 1], 0.0, "{level:?}");
            assert_eq!(out[i * f + 3], 0.0, "{level:?}");
        }
    }
}

pub(crate) fn odd_n_and_bad_lengths_are_errors<W: TestMatrix + QuantMatrix>() {
    let mut rng = TestRng::new(&format!("{}_shapes", W::GATE_UP_SWIGLU_OP));
    let w = W::random(&mut rng, 3, 128);
    let x = vec![0.25; 128];
    let mut out = vec![0.0; 1];
    assert!(cpu(&w, &x, 1, &mut out).is_err());
    let w = W::random(&mut rng, 4, 128);
    let mut out = vec![0.0; 3];
    assert!(reference(&w, &x, 1, &mut out).is_err());
}

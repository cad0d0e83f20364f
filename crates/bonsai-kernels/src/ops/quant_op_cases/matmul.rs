//! cpu == reference for `matmul_q1/q2` within the bound derived in the ops' doc, at every SIMD
//! level.

use crate::cpu::available_levels;
use crate::ops::test_util::{assert_within, matmul_bound, widen, TestMatrix, TestRng};
use crate::ops::quant_ops::matmul::{cpu, cpu_at, reference};
use crate::ops::quant_ops::QuantMatrix;
use crate::ops::{OpError, Store};
use crate::weights::GROUP;
use half::f16;

/// Expands, inside an op's `tests.rs`, to one `#[test]` per shared case, each run on the weight
/// format `$matrix`.
macro_rules! matmul_tests {
    ($matrix:ty) => {
        $crate::ops::quant_op_cases::shared_tests!(matmul on $matrix =>
            cpu_matches_reference_on_random_shapes,
            all_zero_rows_and_groups_give_zero,
            integer_inputs_are_exact,
            mismatched_shapes_are_errors,
        );
    };
}
pub(crate) use matmul_tests;

/// (N, K, M): K = 128, odd N, M = 1, M not a multiple of the 4-token tile, N not a multiple of
/// the 2/4-row tiles or the 64-column task, a real decode width; and M >= 16 (the panel GEMM):
/// M off its 12-token tile, N off its 32-row micro-panel, K = 128 and K off the 256-wide chunk.
const SHAPES: &[(usize, usize, usize)] = &[
    (1, 128, 1),
    (37, 128, 3),
    (64, 256, 1),
    (67, 384, 5),
    (129, 512, 7),
    (33, 1024, 13),
    (130, 2048, 1),
    (6, 6144, 2),
    (3, 128, 16),
    (70, 384, 17),
    (130, 640, 24),
];

fn check<W: TestMatrix + QuantMatrix>(w: &W, m: usize, rng: &mut TestRng, what: &str) {
    let (n, k) = (w.n(), w.k());
    let x = rng.vec(m * k, -2.0, 2.0);
    for store in [Store::Overwrite, Store::Add] {
        let y0 = rng.vec(m * n, -1.0, 1.0);
        let mut want = y0.clone();
        reference(w, &x, m, &mut want, store).expect("reference shapes");
        let bound = matmul_bound(|r, c| w.weight_at(r, c), n, k, &x, m, &want);
        for level in available_levels() {
            let mut got = y0.clone();
            cpu_at(level, w, &x, m, &mut got, store).expect("cpu shapes");
            let label = format!("{} {what} N={n} K={k} M={m} {store:?} {level:?}", W::MATMUL_OP);
            assert_within(&label, &got, &widen(&want), &bound);
        }
    }
}

pub(crate) fn cpu_matches_reference_on_random_shapes<W: TestMatrix + QuantMatrix>() {
    let mut rng = TestRng::new(&format!("{}_random", W::MATMUL_OP));
    for &(n, k, m) in SHAPES {
        let w = W::random(&mut rng, n, k);
        check(&w, m, &mut rng, "random");
    }
}

pub(crate) fn all_zero_rows_and_groups_give_zero<W: TestMatrix + QuantMatrix>() {
    let mut rng = TestRng::new(&format!("{}_zero_groups", W::MATMUL_OP));
    let (n, k, m) = (9, 384, 5);
    let mut w = W::random(&mut rng, n, k);
    // Row 4 entirely zero-scaled, plus every third block elsewhere.
    let nb = k / GROUP;
    w.map_scales(&|row, kb, scale| if row == 4 || (row * nb + kb).is_multiple_of(3) { f16::ZERO } else { scale });
    check(&w, m, &mut rng, "zero groups");
    let x = rng.vec(m * k, -1.0, 1.0);
    for level in available_levels() {
        let mut y = vec![f32::NAN; m * n];
        cpu_at(level, &w, &x, m, &mut y, Store::Overwrite).expect("shapes");
        for i in 0..m {
            assert_eq!(y[i * n + 4], 0.0, "zero row must give exactly 0 ({level:?})");
        }
    }
}

/// Unit scales and small-integer x: every partial sum is an integer below 2^24, so every path
/// must be exact.
pub(crate) fn integer_inputs_are_exact<W: TestMatrix + QuantMatrix>() {
    let mut rng = TestRng::new(&format!("{}_exact", W::MATMUL_OP));
    exact_case::<W>(&mut rng, 23, 640, 6);
    // The panel GEMM path (M >= 16).
    exact_case::<W>(&mut rng, 37, 384, 19);
}

fn exact_case<W: TestMatrix + QuantMatrix>(rng: &mut TestRng, n: usize, k: usize, m: usize) {
    let mut w = W::random(rng, n, k);
    w.map_scales(&|_, _, _| f16::ONE);
    let x: Vec<f32> = (0..m * k).map(|_| rng.below(15) as f32 - 7.0).collect();
    let mut want = vec![0.0; m * n];
    reference(&w, &x, m, &mut want, Store::Overwrite).expect("shapes");
    for level in available_levels() {
        let mut got = vec![f32::NAN; m * n];
        cpu_at(level, &w, &x, m, &mut got, Store::Overwrite).expect("shapes");
        assert_eq!(got, want, "{level:?}");
    }
}

pub(crate) fn mismatched_shapes_are_errors<W: TestMatrix + QuantMatrix>() {
    let mut rng = TestRng::new(&format!("{}_shapes", W::MATMUL_OP));
    let w = W::random(&mut rng, 4, 128);
    let x = vec![0.5; 2 * 128];
    let mut y = vec![0.0; 7];
    let err = cpu(&w, &x, 2, &mut y, Store::Overwrite).unwrap_err();
    assert_eq!(err, OpError::Length { op: W::MATMUL_OP, what: "y", expected: 8, got: 7 });
    let mut y = vec![0.0; 8];
    assert!(reference(&w, &x, 3, &mut y, Store::Add).is_err());
}

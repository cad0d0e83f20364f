//! CPU-side tests of verify's own logic (the GPU comparisons run on the H200).

use super::matmul::{abs_matrix, par_reference};
use super::rng::SplitMix64;
use super::{Comparison, VerifyOptions};
use crate::ops::{self, Store};
use crate::weights::QMatrix;

#[test]
fn comparison_respects_each_bound_and_fails_nan() {
    let want = [1.0f32, 2.0, 3.0];
    let ok = Comparison::of(&[1.0, 2.5, 3.0], &want, |i| if i == 1 { 0.5 } else { 0.0 });
    assert!(ok.pass(), "{ok:?}");
    assert_eq!(ok.max_err, 0.5);
    let over = Comparison::of(&[1.0, 2.5001, 3.0], &want, |i| if i == 1 { 0.5 } else { 0.0 });
    assert!(!over.pass());
    assert_eq!(over.first_bad, 1);
    let nan = Comparison::of(&[1.0, f32::NAN, 3.0], &want, |_| 1e9);
    assert!(!nan.pass(), "an unwritten (NaN-poisoned) element must fail");
    let short = Comparison::of(&[1.0], &want, |_| 1e9);
    assert!(!short.pass());
}

#[test]
fn abs_matrix_holds_magnitudes_and_row_blocks_match_the_reference() {
    let seed = 0xC0FFEE;
    let mut rng = SplitMix64::new(seed);
    for ternary in [false, true] {
        let (n, k, m) = (1100, 256, 3);
        let w = if ternary { QMatrix::Q2(rng.q2_matrix(n, k)) } else { QMatrix::Q1(rng.q1_matrix(n, k)) };
        let a = abs_matrix(&w);
        for (r, c) in [(0, 0), (7, 129), (n - 1, k - 1), (513, 64)] {
            let (wv, av) = match (&w, &a) {
                (QMatrix::Q1(w), QMatrix::Q1(a)) => (w.weight(r, c), a.weight(r, c)),
                (QMatrix::Q2(w), QMatrix::Q2(a)) => (w.weight(r, c), a.weight(r, c)),
                _ => unreachable!("abs_matrix keeps the format"),
            };
            assert_eq!(av, wv.abs(), "seed {seed} ternary {ternary} ({r},{c})");
        }
        let x = rng.activations(m * k, 1.0);
        let y0 = rng.activations(m * n, 1.0);
        let got = par_reference(&w, &x, m, &y0, Store::Add).expect("parallel reference");
        let mut want = y0.clone();
        match &w {
            QMatrix::Q1(q) => ops::matmul_q1::reference(q, &x, m, &mut want, Store::Add),
            QMatrix::Q2(q) => ops::matmul_q2::reference(q, &x, m, &mut want, Store::Add),
        }
        .expect("reference");
        assert_eq!(got, want, "seed {seed} ternary {ternary}: row blocks must reassemble exactly");
    }
}

#[test]
fn seeded_inputs_repeat() {
    let (mut a, mut b) = (SplitMix64::new(42), SplitMix64::new(42));
    assert_eq!(a.activations(100, 1.0), b.activations(100, 1.0));
    assert_ne!(SplitMix64::new(1).next_u64(), SplitMix64::new(2).next_u64());
}

#[test]
fn run_without_a_driver_is_an_error_not_a_panic() {
    // SAFETY: only probes whether libcuda can be opened.
    if unsafe { cudarc::driver::sys::is_culib_present() } {
        return; // a GPU machine: `bonsai kernels verify` covers it
    }
    let err = super::run(&VerifyOptions::default()).expect_err("no driver here");
    assert!(err.to_string().contains("no CUDA driver"), "{err}");
}

//! cpu == reference for `gemm_f32` within γ_{K+LANES+2}·(Σ|a·w| + |bias|) + u·|out| (derivation
//! in the op's doc).

use super::{cpu, cpu_at, reference, Inputs, GemmDims};
use crate::cpu::{available_levels, LANES};
use crate::ops::test_util::{assert_within, gamma, widen, TestRng, F32_UNIT_ROUNDOFF};

/// Edge and real-looking shapes: single elements, K below and above the lane count, M and N
/// not multiples of the row/column blocks.
const SHAPES: [(usize, usize, usize); 6] =
    [(1, 1, 1), (1, 3, 7), (9, 33, 17), (17, 5, 256), (3, 70, 1029), (20, 40, 64)];

fn bound(dims: GemmDims, a: &[f32], w: &[f32], bias: Option<&[f32]>, want: &[f32]) -> Vec<f64> {
    let GemmDims { m, n, k } = dims;
    let g = gamma(k + LANES + 2);
    let mut out = Vec::with_capacity(m * n);
    for i in 0..m {
        for j in 0..n {
            let abs: f64 = (0..k).map(|c| (a[i * k + c] as f64 * w[j * k + c] as f64).abs()).sum();
            let b = bias.map_or(0.0, |b| (b[j] as f64).abs());
            out.push(g * (abs + b) + F32_UNIT_ROUNDOFF * (want[i * n + j] as f64).abs());
        }
    }
    out
}

#[test]
fn cpu_matches_reference() {
    let mut rng = TestRng::new("gemm_f32");
    for (m, n, k) in SHAPES {
        let dims = GemmDims { m, n, k };
        let a = rng.vec(m * k, -2.0, 2.0);
        let w = rng.vec(n * k, -1.0, 1.0);
        let bias_values = rng.vec(n, -3.0, 3.0);
        for bias in [None, Some(bias_values.as_slice())] {
            let mut want = vec![0.0; m * n];
            reference(Inputs { dims, a: &a, w: &w, bias }, &mut want).expect("shape");
            let tol = bound(dims, &a, &w, bias, &want);
            for level in available_levels() {
                let mut got = vec![f32::NAN; m * n];
                cpu_at(level, Inputs { dims, a: &a, w: &w, bias }, &mut got).expect("shape");
                let what = format!("gemm_f32 {dims:?} bias={} {level:?}", bias.is_some());
                assert_within(&what, &got, &widen(&want), &tol);
            }
        }
    }
}

#[test]
fn bias_only_changes_by_bias() {
    // With W = 0 every output is exactly the bias (0 + b is exact).
    let dims = GemmDims { m: 3, n: 4, k: 5 };
    let bias = [1.5, -2.0, 0.25, 7.0];
    let mut got = vec![f32::NAN; 12];
    cpu(Inputs { dims, a: &[1.0; 15], w: &[0.0; 20], bias: Some(&bias) }, &mut got).expect("shape");
    for row in got.chunks(4) {
        assert_eq!(row, bias);
    }
}

#[test]
fn bad_shapes_are_errors() {
    let dims = GemmDims { m: 2, n: 3, k: 4 };
    let mut out = vec![0.0; 6];
    assert!(cpu(Inputs { dims, a: &[0.0; 7], w: &[0.0; 12], bias: None }, &mut out).is_err());
    assert!(cpu(Inputs { dims, a: &[0.0; 8], w: &[0.0; 11], bias: None }, &mut out).is_err());
    assert!(cpu(Inputs { dims, a: &[0.0; 8], w: &[0.0; 12], bias: Some(&[0.0; 2]) }, &mut out).is_err());
    assert!(reference(Inputs { dims, a: &[0.0; 8], w: &[0.0; 12], bias: None }, &mut out[..5]).is_err());
    let empty = GemmDims { m: 0, n: 3, k: 4 };
    assert!(reference(Inputs { dims: empty, a: &[], w: &[0.0; 12], bias: None }, &mut []).is_err());
}

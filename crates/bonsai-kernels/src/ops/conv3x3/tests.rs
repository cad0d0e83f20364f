//! cpu == reference for `conv3x3` within γ_{9·Cin+LANES+2}·(Σ|x·w| + |bias|) + u·|y| (derivation
//! in the op's doc).

use super::{cpu, cpu_at, reference, Inputs, ConvDims, TAPS};
use crate::cpu::{available_levels, LANES};
use crate::ops::test_util::{assert_within, gamma, widen, TestRng, F32_UNIT_ROUNDOFF};

/// 1x1 images (all taps but the centre are padding), thin rows and columns, a width that spans
/// two pixel tiles with a ragged tail, and a channel count like the VAE's.
const SHAPES: [ConvDims; 5] = [
    ConvDims { c_in: 1, c_out: 1, h: 1, w: 1 },
    ConvDims { c_in: 3, c_out: 2, h: 1, w: 9 },
    ConvDims { c_in: 2, c_out: 5, h: 7, w: 1 },
    ConvDims { c_in: 4, c_out: 3, h: 5, w: 70 },
    ConvDims { c_in: 128, c_out: 6, h: 4, w: 6 },
];

/// Σ|x·w| + |bias| per output, in f64, from the formula.
fn magnitude(dims: ConvDims, x: &[f32], weight: &[f32], bias: &[f32]) -> Vec<f64> {
    let ConvDims { c_in, c_out, h, w } = dims;
    let mut out = Vec::with_capacity(c_out * h * w);
    for co in 0..c_out {
        for oh in 0..h as isize {
            for ow in 0..w as isize {
                let mut acc = (bias[co] as f64).abs();
                for ci in 0..c_in {
                    for t in 0..TAPS {
                        let (ih, iw) = (oh + (t / 3) as isize - 1, ow + (t % 3) as isize - 1);
                        if ih < 0 || iw < 0 || ih >= h as isize || iw >= w as isize {
                            continue;
                        }
                        let xv = x[(ci * h + ih as usize) * w + iw as usize] as f64;
                        acc += (xv * weight[(co * c_in + ci) * TAPS + t] as f64).abs();
                    }
                }
                out.push(acc);
            }
        }
    }
    out
}

#[test]
fn cpu_matches_reference() {
    let mut rng = TestRng::new("conv3x3");
    for dims in SHAPES {
        let ConvDims { c_in, c_out, h, w } = dims;
        let x = rng.vec(c_in * h * w, -2.0, 2.0);
        let weight = rng.vec(c_out * c_in * TAPS, -0.5, 0.5);
        let bias = rng.vec(c_out, -1.0, 1.0);
        let mut want = vec![0.0; c_out * h * w];
        reference(Inputs { dims, x: &x, weight: &weight, bias: &bias }, &mut want).expect("shape");
        let g = gamma(TAPS * c_in + LANES + 2);
        let tol: Vec<f64> = magnitude(dims, &x, &weight, &bias)
            .iter()
            .zip(&want)
            .map(|(&a, &y)| g * a + F32_UNIT_ROUNDOFF * (y as f64).abs())
            .collect();
        for level in available_levels() {
            let mut got = vec![f32::NAN; c_out * h * w];
            cpu_at(level, Inputs { dims, x: &x, weight: &weight, bias: &bias }, &mut got).expect("shape");
            assert_within(&format!("conv3x3 {dims:?} {level:?}"), &got, &widen(&want), &tol);
        }
    }
}

#[test]
fn centre_tap_is_identity() {
    // A filter with only the centre tap set to 1 copies x (plus bias 0.5, exact for these values).
    let mut rng = TestRng::new("conv3x3 identity");
    let dims = ConvDims { c_in: 1, c_out: 1, h: 3, w: 4 };
    let x: Vec<f32> = (0..12).map(|_| rng.below(64) as f32 / 4.0 - 8.0).collect();
    let mut weight = [0.0f32; TAPS];
    weight[4] = 1.0;
    let mut y = vec![f32::NAN; 12];
    cpu(Inputs { dims, x: &x, weight: &weight, bias: &[0.5] }, &mut y).expect("shape");
    let want: Vec<f32> = x.iter().map(|v| v + 0.5).collect();
    assert_eq!(y, want);
}

#[test]
fn bad_shapes_are_errors() {
    let dims = ConvDims { c_in: 2, c_out: 3, h: 2, w: 2 };
    let mut y = vec![0.0; 12];
    assert!(cpu(Inputs { dims, x: &[0.0; 7], weight: &[0.0; 54], bias: &[0.0; 3] }, &mut y).is_err());
    assert!(cpu(Inputs { dims, x: &[0.0; 8], weight: &[0.0; 53], bias: &[0.0; 3] }, &mut y).is_err());
    assert!(cpu(Inputs { dims, x: &[0.0; 8], weight: &[0.0; 54], bias: &[0.0; 2] }, &mut y).is_err());
    assert!(reference(Inputs { dims, x: &[0.0; 8], weight: &[0.0; 54], bias: &[0.0; 3] }, &mut y[..11]).is_err());
    let empty = ConvDims { c_in: 2, c_out: 3, h: 0, w: 2 };
    assert!(reference(Inputs { dims: empty, x: &[], weight: &[0.0; 54], bias: &[0.0; 3] }, &mut []).is_err());
}

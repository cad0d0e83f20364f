//! The CUDA kernel's arithmetic replayed on the CPU (bf16 q, k, v; f32 scores; key tiles with an
//! online exp2 softmax; p rounded to bf16 for P·V, the f32 p summed for the denominator) must meet
//! the bound of `bf16_check` on every element, and a model with a masking bug must not: the
//! CI-side evidence that the verify bound is both sound and sharp enough to catch such bugs.
//! (The model adds in round-to-nearest where the tensor cores truncate; the bound covers both.)

use half::bf16;

use super::bf16_check::{bf16_check, round_to_bf16};
use super::AttnDims;
use crate::ops::test_util::TestRng;

/// Keys per online-softmax step of the Q-in-registers kernel at hd 64 (JA_QREG_BLOCK_K: one
/// step per tile) and at hd 128 (JA_QREG_SOFTMAX_K), of the wgmma kernel (JW_BLOCK_K) and of
/// the hd 384/512 one (JA_LARGE_HD_BLOCK_K).
const QREG_HD64_STEP_K: usize = 64;
const QREG_SOFTMAX_K: usize = 32;
const WGMMA_BLOCK_K: usize = 128;
const LARGE_HD_BLOCK_K: usize = 32;

/// What the model gets wrong on purpose.
#[derive(Clone, Copy, PartialEq)]
enum Bug {
    None,
    /// The last key is treated as masked (an off-by-one in the tail mask).
    DropsLastKey,
}

fn kernel_model(
    dims: AttnDims,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    block_k: usize,
    bug: Bug,
) -> Vec<f32> {
    let AttnDims { heads, seq, head_dim: hd } = dims;
    let (qb, kb, vb) = (round_to_bf16(q), round_to_bf16(k), round_to_bf16(v));
    let c = (std::f64::consts::LOG2_E / (hd as f64).sqrt()) as f32;
    let keys = if bug == Bug::DropsLastKey { seq - 1 } else { seq };
    let mut out = vec![f32::NAN; q.len()];
    for h in 0..heads {
        let row = |t: &[f32], j: usize| t[(h * seq + j) * hd..(h * seq + j + 1) * hd].to_vec();
        for i in 0..seq {
            let qi = row(&qb, i);
            let (mut max, mut sum) = (f32::NEG_INFINITY, 0.0f32);
            let mut acc = vec![0.0f32; hd];
            for k0 in (0..keys).step_by(block_k) {
                let k1 = (k0 + block_k).min(keys);
                let scores: Vec<f32> = (k0..k1)
                    .map(|j| qi.iter().zip(row(&kb, j)).fold(0.0f32, |s, (a, b)| s + a * b))
                    .collect();
                let new_max = scores.iter().cloned().fold(max, f32::max);
                let correction = ((max - new_max) * c).exp2();
                max = new_max;
                let max_scaled = new_max * c;
                sum *= correction;
                acc.iter_mut().for_each(|a| *a *= correction);
                for (j, s) in (k0..k1).zip(scores) {
                    let p = s.mul_add(c, -max_scaled).exp2();
                    sum += p;
                    let p16 = bf16::from_f32(p).to_f32();
                    for (a, x) in acc.iter_mut().zip(row(&vb, j)) {
                        *a += p16 * x;
                    }
                }
            }
            for d in 0..hd {
                out[i * heads * hd + h * hd + d] = acc[d] / sum;
            }
        }
    }
    out
}

/// Elements of `got` outside the bound (0 when the model meets the contract).
fn violations(dims: AttnDims, q: &[f32], k: &[f32], v: &[f32], block_k: usize, bug: Bug) -> usize {
    let check = bf16_check(dims, q, k, v, block_k).expect("shape");
    let got = kernel_model(dims, q, k, v, block_k, bug);
    got.iter()
        .zip(&check.want)
        .zip(&check.bound)
        .filter(|((g, w), b)| {
            let err = ((**g as f64) - (**w as f64)).abs();
            err.is_nan() || err > **b
        })
        .count()
}

#[test]
fn kernel_arithmetic_meets_the_bound() {
    let mut rng = TestRng::new("joint_attention tensor-core model");
    for (heads, seq, hd, block_k) in [
        (2, 1, 64, QREG_HD64_STEP_K),
        (3, 65, 64, QREG_HD64_STEP_K),
        (1, 130, 128, WGMMA_BLOCK_K),
        (1, 520, 128, WGMMA_BLOCK_K),
        // Twice the rescales: a 64-key tile's two 32-key steps (ragged tails in either step).
        (3, 65, 64, QREG_SOFTMAX_K),
        (1, 130, 128, QREG_SOFTMAX_K),
        (2, 200, 128, QREG_SOFTMAX_K),
        (1, 70, 384, LARGE_HD_BLOCK_K),
        (1, 33, 512, LARGE_HD_BLOCK_K),
    ] {
        let dims = AttnDims { heads, seq, head_dim: hd };
        let n = heads * seq * hd;
        // RMS-normed-like q, k (|s| up to ~10) and values with outliers.
        let (q, k) = (rng.vec(n, -2.0, 2.0), rng.vec(n, -2.0, 2.0));
        let v = rng.vec(n, -3.0, 3.0);
        let bad = violations(dims, &q, &k, &v, block_k, Bug::None);
        assert_eq!(bad, 0, "{dims:?}: {bad} elements outside the bound (seed printed above)");
    }
}

#[test]
fn a_tail_mask_bug_breaks_the_bound() {
    // Keys pointing away from every query (negative scores) except the last one: dropping that
    // key moves every output by far more than the bound.
    let mut rng = TestRng::new("joint_attention mask bug");
    let dims = AttnDims { heads: 1, seq: 65, head_dim: 64 };
    let n = dims.seq * dims.head_dim;
    let q = rng.vec(n, 0.5, 1.0);
    let mut k = rng.vec(n, -1.0, -0.5);
    k[n - dims.head_dim..].iter_mut().for_each(|x| *x = -*x);
    let v = rng.vec(n, -2.0, 2.0);
    assert_eq!(violations(dims, &q, &k, &v, QREG_HD64_STEP_K, Bug::None), 0);
    assert!(violations(dims, &q, &k, &v, QREG_HD64_STEP_K, Bug::DropsLastKey) > n / 2);
}

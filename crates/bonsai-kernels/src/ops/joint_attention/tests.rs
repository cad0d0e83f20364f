//! cpu == reference for `joint_attention` within (e^{2ε} − 1 + 2γ_{seq+R+1}·e^{2ε})·A_d + 2u·|out|
//! per output (derivation and symbols in the op's doc).

use super::cpu::KEY_BLOCK;
use super::{cpu, cpu_at, reference, Inputs, AttnDims};
use crate::cpu::{available_levels, LANES};
use crate::ops::test_util::{assert_within, gamma, widen, TestRng, F32_UNIT_ROUNDOFF};

/// Every head_dim the image model uses; seq 1 (softmax of one key), seq inside one key block,
/// and seqs spanning several key and query blocks with ragged tails.
const SHAPES: [AttnDims; 6] = [
    AttnDims { heads: 1, seq: 1, head_dim: 64 },
    AttnDims { heads: 3, seq: 37, head_dim: 64 },
    AttnDims { heads: 2, seq: 150, head_dim: 128 },
    AttnDims { heads: 1, seq: 70, head_dim: 384 },
    AttnDims { heads: 1, seq: 65, head_dim: 512 },
    AttnDims { heads: 2, seq: 17, head_dim: 8 },
];

/// The derived bound for every output element.
fn bound(dims: AttnDims, q: &[f32], k: &[f32], v: &[f32], want: &[f32]) -> Vec<f64> {
    let AttnDims { heads, seq, head_dim: hd } = dims;
    let u = F32_UNIT_ROUNDOFF;
    let scale = dims.scale();
    let rescales = seq.div_ceil(KEY_BLOCK) as f64;
    let g_sum = gamma(seq + seq.div_ceil(KEY_BLOCK) + 1);
    let g_dot = gamma(hd + LANES + 2);
    let row = |t: &[f32], h: usize, i: usize| -> Vec<f64> {
        t[(h * seq + i) * hd..(h * seq + i + 1) * hd].iter().map(|&x| x as f64).collect()
    };
    let mut out = vec![0.0; want.len()];
    for h in 0..heads {
        for i in 0..seq {
            let qi = row(q, h, i);
            let keys: Vec<Vec<f64>> = (0..seq).map(|j| row(k, h, j)).collect();
            let scores: Vec<f64> = keys
                .iter()
                .map(|kj| scale * qi.iter().zip(kj).map(|(a, b)| a * b).sum::<f64>())
                .collect();
            let big_s = scores.iter().fold(0.0f64, |m, s| m.max(s.abs()));
            let eps_s = keys
                .iter()
                .zip(&scores)
                .map(|(kj, s)| {
                    let abs: f64 = qi.iter().zip(kj).map(|(a, b)| (a * b).abs()).sum();
                    scale * g_dot * abs * (1.0 + 2.0 * u) + 2.0 * u * s.abs()
                })
                .fold(0.0f64, f64::max);
            let eps = eps_s + 2.0 * u * big_s + rescales * (2.0 * u * big_s + 2.0 * u) + 2.0 * u;
            let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
            let total: f64 = weights.iter().sum();
            let growth = (2.0 * eps).exp();
            for d in 0..hd {
                let a_d: f64 = (0..seq)
                    .map(|j| weights[j] / total * (v[(h * seq + j) * hd + d] as f64).abs())
                    .sum();
                let at = i * heads * hd + h * hd + d;
                out[at] =
                    (growth - 1.0 + 2.0 * g_sum * growth) * a_d + 2.0 * u * (want[at] as f64).abs();
            }
        }
    }
    out
}

fn check(dims: AttnDims, q: &[f32], k: &[f32], v: &[f32], what: &str) {
    let mut want = vec![0.0; q.len()];
    reference(Inputs { dims, q, k, v }, &mut want).expect("shape");
    let tol = bound(dims, q, k, v, &want);
    for level in available_levels() {
        let mut got = vec![f32::NAN; q.len()];
        cpu_at(level, Inputs { dims, q, k, v }, &mut got).expect("shape");
        assert_within(
            &format!("joint_attention {what} {dims:?} {level:?}"),
            &got,
            &widen(&want),
            &tol,
        );
    }
}

#[test]
fn cpu_matches_reference() {
    let mut rng = TestRng::new("joint_attention");
    for dims in SHAPES {
        let n = dims.heads * dims.seq * dims.head_dim;
        let (q, k, v) = (rng.vec(n, -1.0, 1.0), rng.vec(n, -1.0, 1.0), rng.vec(n, -2.0, 2.0));
        check(dims, &q, &k, &v, "uniform");
    }
}

#[test]
fn peaked_scores_with_rising_maxima() {
    // Large logits (|s| up to ~50) whose maximum rises block after block, so the online softmax
    // rescales its running state on every key block.
    let mut rng = TestRng::new("joint_attention peaked");
    let dims = AttnDims { heads: 2, seq: 200, head_dim: 64 };
    let n = dims.heads * dims.seq * dims.head_dim;
    let q = rng.vec(n, 0.5, 1.0);
    let mut k = rng.vec(n, -1.0, 1.0);
    for (j, kj) in k.chunks_mut(dims.head_dim).enumerate() {
        let ramp = 0.8 * ((j % dims.seq) as f32 / dims.seq as f32);
        kj.iter_mut().for_each(|x| *x = *x * 0.2 + ramp);
    }
    let v = rng.vec(n, -2.0, 2.0);
    check(dims, &q, &k, &v, "peaked");
}

#[test]
fn equal_keys_average_the_values() {
    // All keys equal: every weight is 1/seq, so each output is the mean of the values. With
    // seq = 4 and values that are multiples of 1/4 the f32 result is exact.
    let dims = AttnDims { heads: 1, seq: 4, head_dim: 64 };
    let q: Vec<f32> = (0..256).map(|i| (i % 7) as f32 * 0.25 - 0.75).collect();
    let k = vec![0.5f32; 256];
    let v: Vec<f32> = (0..256).map(|i| (i % 11) as f32 * 0.25).collect();
    let mut got = vec![f32::NAN; 256];
    cpu(Inputs { dims, q: &q, k: &k, v: &v }, &mut got).expect("shape");
    for i in 0..4 {
        for d in 0..64 {
            let mean = (0..4).map(|j| v[j * 64 + d]).sum::<f32>() / 4.0;
            assert_eq!(got[i * 64 + d], mean, "query {i} dim {d}");
        }
    }
}

#[test]
fn bad_shapes_are_errors() {
    let dims = AttnDims { heads: 2, seq: 3, head_dim: 4 };
    let ok = vec![0.0f32; 24];
    let mut out = vec![0.0; 24];
    assert!(cpu(Inputs { dims, q: &ok[..23], k: &ok, v: &ok }, &mut out).is_err());
    assert!(cpu(Inputs { dims, q: &ok, k: &ok[..20], v: &ok }, &mut out).is_err());
    assert!(cpu(Inputs { dims, q: &ok, k: &ok, v: &[0.0; 25] }, &mut out).is_err());
    assert!(reference(Inputs { dims, q: &ok, k: &ok, v: &ok }, &mut out[..23]).is_err());
    let empty = AttnDims { heads: 2, seq: 0, head_dim: 4 };
    assert!(reference(Inputs { dims: empty, q: &[], k: &[], v: &[] }, &mut []).is_err());
}

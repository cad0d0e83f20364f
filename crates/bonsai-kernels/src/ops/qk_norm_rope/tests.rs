//! cpu == reference for `qk_norm_rope` within the bound derived in the op's doc; v untouched.

use super::{cpu_at, reference, Params};
use crate::cpu::available_levels;
use crate::ops::test_util::{assert_within, gamma, widen, TestRng, F32_UNIT_ROUNDOFF};
use crate::ops::{HeadShape, OpError};
use crate::rope::{RopeTable, YarnParams};

const EPS: f32 = 1e-6;
const THETA: f64 = 1e6;

/// Per-element bound: (|n_d·cos| + |n_{d+h}·sin|)·(γ_{hd+1} + 10u) + u·|out| for x_d (and the
/// mirrored products for x_{d+h}, h = rot_dims/2), with n the exact normalised head; |n_d|·(γ_{hd+1}
/// + 10u) + u·|out| for the dims past rot_dims.
fn bound(p: Params<'_>, qkv: &[f32], m: usize, pos0: usize, want: &[f32]) -> Vec<f64> {
    let Params { shape, rot_dims, q_norm, k_norm, rope, .. } = p;
    let u = F32_UNIT_ROUNDOFF;
    let hd = shape.head_dim;
    let half = rot_dims / 2;
    let rel = gamma(hd + 1) + 10.0 * u;
    let mut b = vec![0.0; qkv.len()];
    for i in 0..m {
        let (cos, sin) = rope.row(pos0 + i);
        let base = i * shape.qkv_row_len();
        for h in 0..shape.n_q + shape.n_kv {
            let w = if h < shape.n_q { q_norm } else { k_norm };
            let x = &qkv[base + h * hd..base + (h + 1) * hd];
            let mean_sq = x.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / hd as f64;
            let r = 1.0 / (mean_sq + EPS as f64).sqrt();
            let n = |d: usize| (x[d] as f64 * r * w[d] as f64).abs();
            for d in 0..half {
                let (c, s) = ((cos[d] as f64).abs(), (sin[d] as f64).abs());
                // x_d mixes n_d·cos and n_{d+h}·sin; x_{d+h} mixes n_{d+h}·cos and n_d·sin.
                let lo = base + h * hd + d;
                let hi = lo + half;
                b[lo] = (n(d) * c + n(d + half) * s) * rel + u * (want[lo] as f64).abs();
                b[hi] = (n(d + half) * c + n(d) * s) * rel + u * (want[hi] as f64).abs();
            }
            for d in rot_dims..hd {
                let at = base + h * hd + d;
                b[at] = n(d) * rel + u * (want[at] as f64).abs();
            }
        }
    }
    b
}

#[test]
fn cpu_matches_reference() {
    let mut rng = TestRng::new("qk_norm_rope");
    let yarn =
        YarnParams { factor: 4.0, original_context_len: 64, beta_fast: 32.0, beta_slow: 1.0 };
    for (shape, rot_dims, m, pos0, scaling) in [
        (HeadShape { n_q: 2, n_kv: 1, head_dim: 2 }, 2, 1usize, 0usize, None),
        (HeadShape { n_q: 32, n_kv: 8, head_dim: 128 }, 128, 1, 250, Some(&yarn)),
        (HeadShape { n_q: 6, n_kv: 2, head_dim: 64 }, 64, 7, 3, None),
        // head_dim 256 at GQA group 3 (the GPU runs these too).
        (HeadShape { n_q: 3, n_kv: 1, head_dim: 256 }, 256, 2, 40, None),
        // Partial RoPE: Bonsai 2's 64 of 256, and odd proportions.
        (HeadShape { n_q: 6, n_kv: 1, head_dim: 256 }, 64, 3, 17, None),
        (HeadShape { n_q: 2, n_kv: 1, head_dim: 64 }, 2, 2, 5, None),
        (HeadShape { n_q: 2, n_kv: 2, head_dim: 10 }, 6, 4, 9, None),
    ] {
        let rope = RopeTable::new(rot_dims, 300, THETA, scaling);
        let qkv = rng.vec(m * shape.qkv_row_len(), -3.0, 3.0);
        let q_norm = rng.vec(shape.head_dim, 0.5, 2.0);
        let k_norm = rng.vec(shape.head_dim, 0.5, 2.0);
        let p = Params { shape, rot_dims, q_norm: &q_norm[..], k_norm: &k_norm[..], eps: EPS, rope: &rope };
        let mut want = qkv.clone();
        reference(p, &mut want, m, pos0).expect("shapes");
        let b = bound(p, &qkv, m, pos0, &want);
        for level in available_levels() {
            let mut got = qkv.clone();
            cpu_at(level, p, &mut got, m, pos0).expect("shapes");
            assert_within(
                &format!("qk_norm_rope {shape:?} rot_dims={rot_dims} m={m} {level:?}"),
                &got,
                &widen(&want),
                &b,
            );
            // v heads bit-identical to the input.
            let v0 = shape.q_len() + shape.kv_len();
            for i in 0..m {
                let r = i * shape.qkv_row_len();
                assert_eq!(
                    got[r + v0..r + shape.qkv_row_len()],
                    qkv[r + v0..r + shape.qkv_row_len()]
                );
            }
        }
    }
}

/// At position 0 the rotation is the identity, so the result is exactly the normalised head;
/// a hand-made head [3, 4] (hd = 2, w = 1) normalises to x / sqrt(12.5).
#[test]
fn position_zero_is_plain_norm() {
    let shape = HeadShape { n_q: 1, n_kv: 1, head_dim: 2 };
    let rope = RopeTable::new(2, 1, THETA, None);
    let p = Params { shape, rot_dims: 2, q_norm: &[1.0, 1.0][..], k_norm: &[1.0, 1.0][..], eps: 0.0, rope: &rope };
    for level in available_levels() {
        let mut qkv = [3.0f32, 4.0, 3.0, 4.0, 9.0, 9.0];
        cpu_at(level, p, &mut qkv, 1, 0).expect("shapes");
        let r = 1.0 / 12.5f64.sqrt();
        for (got, want) in qkv.iter().zip([3.0 * r, 4.0 * r, 3.0 * r, 4.0 * r, 9.0, 9.0]) {
            assert!(
                (*got as f64 - want).abs() <= 4.0 * F32_UNIT_ROUNDOFF * want.abs(),
                "{level:?} {qkv:?}"
            );
        }
    }
}

#[test]
fn positions_past_the_table_are_errors() {
    let shape = HeadShape { n_q: 1, n_kv: 1, head_dim: 4 };
    let rope = RopeTable::new(4, 3, THETA, None);
    let mut qkv = vec![1.0; 2 * shape.qkv_row_len()];
    let p = Params { shape, rot_dims: 4, q_norm: &[1.0; 4][..], k_norm: &[1.0; 4][..], eps: EPS, rope: &rope };
    let err = super::cpu(p, &mut qkv, 2, 2).unwrap_err();
    assert!(matches!(err, OpError::Position { end: 4, limit: 3, .. }), "{err}");
    let bad_rope = RopeTable::new(8, 3, THETA, None);
    assert!(reference(Params { rope: &bad_rope, ..p }, &mut qkv, 2, 0).is_err());
    // The table must be rot_dims wide; rot_dims even, positive, at most head_dim.
    assert!(reference(Params { rot_dims: 2, ..p }, &mut qkv, 2, 0).is_err(), "4-wide table for 2 dims");
    let narrow = RopeTable::new(2, 3, THETA, None);
    assert!(reference(Params { rot_dims: 2, rope: &narrow, ..p }, &mut qkv, 2, 0).is_ok());
    for rot_dims in [0, 3, 6] {
        assert!(super::cpu(Params { rot_dims, ..p }, &mut qkv, 2, 0).is_err(), "rot_dims {rot_dims}");
    }
}

/// Partial RoPE by hand: hd = 4, rot_dims = 2, head (1, 1, 1, 1) with unit weights and eps 0
/// normalises to itself; at position 1 the table's one angle is 1·base^0 = 1 radian, so the
/// head becomes (cos 1 − sin 1, cos 1 + sin 1, 1, 1). The f32 path: the norm (a 4-term sum, a
/// sqrt and a reciprocal: exact here, 4 is a perfect square) and two products and a sum: 4u.
#[test]
fn partial_rotation_by_hand() {
    let shape = HeadShape { n_q: 1, n_kv: 1, head_dim: 4 };
    let rope = RopeTable::new(2, 2, THETA, None);
    let p = Params { shape, rot_dims: 2, q_norm: &[1.0; 4][..], k_norm: &[1.0; 4][..], eps: 0.0, rope: &rope };
    let (c, s) = (1.0f64.cos(), 1.0f64.sin());
    let want = [c - s, c + s, 1.0, 1.0];
    for level in available_levels() {
        let mut qkv = [1.0f32; 12];
        cpu_at(level, p, &mut qkv, 1, 1).expect("shapes");
        let mut by_ref = [1.0f32; 12];
        reference(p, &mut by_ref, 1, 1).expect("shapes");
        for head in [&qkv[0..4], &qkv[4..8], &by_ref[0..4], &by_ref[4..8]] {
            for (got, w) in head.iter().zip(want) {
                assert!((*got as f64 - w).abs() <= 4.0 * F32_UNIT_ROUNDOFF, "{level:?} {head:?}");
            }
        }
        assert_eq!(qkv[8..], [1.0; 4], "v untouched");
    }
}

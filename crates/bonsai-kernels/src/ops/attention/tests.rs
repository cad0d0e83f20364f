//! cpu == reference for `attention` within the bound derived in the op's doc; positions after
//! the causal limit hold NaN so reading them fails the test. Every cache is paged over a
//! shuffled pool with spare blocks (also NaN), so reading a wrong block fails too.

use super::{cpu_at, reference};
use crate::cpu::available_levels;
use crate::ops::test_util::{assert_within, gamma, widen, TestRng, F32_UNIT_ROUNDOFF};
use crate::ops::{kv_block_len, kv_row_offset, scattered_kv_table, HeadShape, KvCache, OpError, QkvRows, KV_BLOCK};
use half::f16;

struct Case {
    shape: HeadShape,
    m: usize,
    pos0: usize,
    max_seq: usize,
}

impl Case {
    fn rows<'a>(&self, qkv: &'a [f32]) -> QkvRows<'a> {
        QkvRows { qkv, m: self.m, shape: self.shape, pos0: self.pos0 }
    }
}

/// A scattered block table and random f16 pools for positions < pos0 + m, NaN elsewhere (must
/// never be read).
fn caches(rng: &mut TestRng, c: &Case) -> (Vec<u32>, Vec<f16>, Vec<f16>) {
    let hd = c.shape.head_dim;
    let (table, blocks) = scattered_kv_table(c.max_seq, 2, |n| rng.below(n));
    let mut fill = || -> Vec<f16> {
        let mut v = vec![f16::NAN; blocks * kv_block_len(c.shape)];
        for g in 0..c.shape.n_kv {
            for j in 0..c.pos0 + c.m {
                let at = kv_row_offset(c.shape, table[j / KV_BLOCK], g, j);
                for x in &mut v[at..at + hd] {
                    *x = f16::from_f32(rng.uniform(-2.0, 2.0));
                }
            }
        }
        v
    };
    let (k, v) = (fill(), fill());
    (table, k, v)
}

/// The per-output bound of the op's doc, from exact (f64) scores.
fn bound(qkv: &[f32], c: &Case, table: &[u32], k: &[f16], v: &[f16], want: &[f32]) -> Vec<f64> {
    let u = F32_UNIT_ROUNDOFF;
    let (shape, hd) = (c.shape, c.shape.head_dim);
    let scale = 1.0 / (hd as f64).sqrt();
    let mut b = vec![0.0; want.len()];
    for i in 0..c.m {
        let n = c.pos0 + i + 1;
        for h in 0..shape.n_q {
            let g = h / shape.group_size();
            let q = &qkv[i * shape.qkv_row_len() + h * hd..][..hd];
            let at = |j: usize, d: usize| kv_row_offset(shape, table[j / KV_BLOCK], g, j) + d;
            let mut s = vec![0.0; n];
            let mut mag = vec![0.0; n];
            for j in 0..n {
                for d in 0..hd {
                    let p = q[d] as f64 * k[at(j, d)].to_f64();
                    s[j] += p * scale;
                    mag[j] += p.abs() * scale;
                }
            }
            let max = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let eta = (0..n)
                .map(|j| {
                    gamma(hd + 9) * mag[j] + 2.0 * u * s[j].abs() + u * (s[j] - max).abs() + 2.0 * u
                })
                .fold(0.0, f64::max);
            for d in 0..hd {
                let big_v = (0..n).map(|j| v[at(j, d)].to_f64().abs()).fold(0.0, f64::max);
                let o = i * shape.q_len() + h * hd + d;
                b[o] = 2.0
                    * (2.0 * eta / (1.0 - eta) * big_v
                        + (gamma(n + 1) + gamma(n + 8)) * big_v
                        + 3.0 * u * (want[o] as f64).abs());
            }
        }
    }
    b
}

#[test]
fn cpu_matches_reference_decode_and_prefill() {
    let mut rng = TestRng::new("attention");
    let cases = [
        // First token: one position, the output is v itself.
        Case { shape: HeadShape { n_q: 2, n_kv: 1, head_dim: 8 }, m: 1, pos0: 0, max_seq: 3 },
        // Bonsai decode shape deep into a context.
        Case {
            shape: HeadShape { n_q: 32, n_kv: 8, head_dim: 128 },
            m: 1,
            pos0: 300,
            max_seq: 320,
        },
        // Causal prefill from scratch and continued prefill; no GQA (group 1); odd M.
        Case { shape: HeadShape { n_q: 4, n_kv: 2, head_dim: 64 }, m: 9, pos0: 0, max_seq: 12 },
        Case { shape: HeadShape { n_q: 3, n_kv: 3, head_dim: 16 }, m: 5, pos0: 6, max_seq: 16 },
        // Shapes the GPU now runs too: GQA group 3 at head_dim 256, group 17 (over the split-key
        // kernel's 16 rows), a head_dim of 2 mod 4.
        Case { shape: HeadShape { n_q: 6, n_kv: 2, head_dim: 256 }, m: 3, pos0: 40, max_seq: 45 },
        Case { shape: HeadShape { n_q: 17, n_kv: 1, head_dim: 64 }, m: 2, pos0: 9, max_seq: 12 },
        Case { shape: HeadShape { n_q: 5, n_kv: 1, head_dim: 130 }, m: 1, pos0: 20, max_seq: 21 },
        // Prefill across block boundaries, and decode at the first position of a block.
        Case { shape: HeadShape { n_q: 4, n_kv: 2, head_dim: 16 }, m: 80, pos0: 50, max_seq: 200 },
        Case { shape: HeadShape { n_q: 8, n_kv: 2, head_dim: 32 }, m: 1, pos0: 128, max_seq: 130 },
    ];
    for c in &cases {
        let (table, k, v) = caches(&mut rng, c);
        // |q| up to 4 against |k| up to 2 makes peaked softmaxes at hd = 128.
        let qkv = rng.vec(c.m * c.shape.qkv_row_len(), -4.0, 4.0);
        let mut want = vec![0.0; c.m * c.shape.q_len()];
        let cache = KvCache { k: &k[..], v: &v[..], table: &table[..], max_seq: c.max_seq };
        reference(c.rows(&qkv), cache, &mut want).expect("shapes");
        let b = bound(&qkv, c, &table, &k, &v, &want);
        for level in available_levels() {
            let mut got = vec![f32::NAN; want.len()];
            cpu_at(level, c.rows(&qkv), cache, &mut got).expect("shapes");
            let label = format!("attention {:?} m={} pos0={} {level:?}", c.shape, c.m, c.pos0);
            assert_within(&label, &got, &widen(&want), &b);
        }
    }
}

#[test]
fn bad_shapes_are_errors() {
    let shape = HeadShape { n_q: 4, n_kv: 2, head_dim: 4 };
    let qkv = vec![0.5; shape.qkv_row_len()];
    let cache = vec![f16::ONE; kv_block_len(shape)];
    let mut out = vec![0.0; shape.q_len()];
    let cache = KvCache { k: &cache[..], v: &cache[..], table: &[0u32][..], max_seq: 4 };
    let rows = |shape, pos0| QkvRows { qkv: &qkv[..], m: 1, shape, pos0 };
    let err = super::cpu(rows(shape, 4), cache, &mut out).unwrap_err();
    assert!(matches!(err, OpError::Position { .. }), "{err}");
    let gqa_bad = HeadShape { n_q: 3, n_kv: 2, head_dim: 4 };
    assert!(reference(rows(gqa_bad, 0), cache, &mut out).is_err());
    assert!(reference(rows(shape, 0), cache, &mut out[..15]).is_err());
}

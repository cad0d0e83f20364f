//! Exact op: cpu == reference bitwise, untouched positions stay untouched, range is checked.

use super::{cpu, reference};
use crate::ops::test_util::TestRng;
use crate::ops::{HeadShape, KvCache, OpError, QkvRows};
use half::f16;

/// A value no conversion of the test inputs produces, to detect stray writes.
const POISON: f16 = f16::from_bits(0x7bff); // f16::MAX

#[test]
fn cpu_equals_reference_and_touches_only_its_rows() {
    let mut rng = TestRng::new("kv_write");
    for (shape, m, pos0, max_seq) in [
        (HeadShape { n_q: 4, n_kv: 2, head_dim: 8 }, 1usize, 0usize, 4usize),
        (HeadShape { n_q: 32, n_kv: 8, head_dim: 128 }, 1, 37, 64),
        (HeadShape { n_q: 6, n_kv: 3, head_dim: 16 }, 5, 2, 7),
        (HeadShape { n_q: 6, n_kv: 2, head_dim: 256 }, 3, 4, 9),
    ] {
        // Below f16::MAX so nothing converts to the poison; then one overflow to inf and one
        // f16 subnormal planted in the first k and v head.
        let mut qkv = rng.vec(m * shape.qkv_row_len(), -60000.0, 60000.0);
        qkv[shape.q_len() + 2] = 70000.0;
        qkv[shape.q_len() + shape.kv_len() + 3] = 3e-6;
        let cache_len = shape.n_kv * max_seq * shape.head_dim;
        let (mut k_want, mut v_want) = (vec![POISON; cache_len], vec![POISON; cache_len]);
        let (mut k_got, mut v_got) = (k_want.clone(), v_want.clone());
        let rows = QkvRows { qkv: &qkv[..], m, shape, pos0 };
        reference(rows, KvCache { k: &mut k_want, v: &mut v_want, max_seq }).expect("shapes");
        cpu(rows, KvCache { k: &mut k_got, v: &mut v_got, max_seq }).expect("shapes");
        assert_eq!(k_got, k_want, "{shape:?} m {m}");
        assert_eq!(v_got, v_want, "{shape:?} m {m}");
        let hd = shape.head_dim;
        for h in 0..shape.n_kv {
            for p in 0..max_seq {
                let written = (pos0..pos0 + m).contains(&p);
                let at = (h * max_seq + p) * hd;
                assert_eq!(k_got[at] == POISON, !written, "head {h} pos {p}");
            }
        }
        // Spot-check the mapping itself: head 0, first token, dim 1 of k.
        let want = f16::from_f32(qkv[shape.q_len() + 1]);
        assert_eq!(k_got[pos0 * hd + 1], want);
    }
}

#[test]
fn overflowing_positions_are_errors() {
    let shape = HeadShape { n_q: 2, n_kv: 1, head_dim: 4 };
    let qkv = vec![1.0; 2 * shape.qkv_row_len()];
    let (mut k, mut v) = (vec![f16::ZERO; 8], vec![f16::ZERO; 8]);
    let err = cpu(QkvRows { qkv: &qkv, m: 2, shape, pos0: 1 }, KvCache { k: &mut k, v: &mut v, max_seq: 2 })
        .unwrap_err();
    assert!(matches!(err, OpError::Position { end: 3, limit: 2, .. }), "{err}");
    let short = QkvRows { qkv: &qkv[..], m: 1, shape, pos0: 0 };
    assert!(reference(short, KvCache { k: &mut k, v: &mut v, max_seq: 2 }).is_err(), "qkv length");
}

#[test]
fn zero_tokens_into_an_empty_cache_is_a_no_op() {
    let shape = HeadShape { n_q: 2, n_kv: 1, head_dim: 4 };
    let rows = QkvRows { qkv: &[][..], m: 0, shape, pos0: 0 };
    assert_eq!(cpu(rows, KvCache { k: &mut [], v: &mut [], max_seq: 0 }), Ok(()));
    assert_eq!(reference(rows, KvCache { k: &mut [], v: &mut [], max_seq: 0 }), Ok(()));
}

//! Exact op: cpu == reference bitwise, untouched positions stay untouched, range and table are
//! checked. Every cache here is paged over a shuffled pool with spare blocks.

use super::{cpu, reference};
use crate::ops::test_util::TestRng;
use crate::ops::{kv_block_len, kv_row_offset, scattered_kv_table, HeadShape, KvCache, OpError, QkvRows, KV_BLOCK};
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
        // Rows across a block boundary, in a table of three blocks.
        (HeadShape { n_q: 4, n_kv: 2, head_dim: 8 }, 70, 60, 150),
    ] {
        // Below f16::MAX so nothing converts to the poison; then one overflow to inf and one
        // f16 subnormal planted in the first k and v head.
        let mut qkv = rng.vec(m * shape.qkv_row_len(), -60000.0, 60000.0);
        qkv[shape.q_len() + 2] = 70000.0;
        qkv[shape.q_len() + shape.kv_len() + 3] = 3e-6;
        let (table, blocks) = scattered_kv_table(max_seq, 2, |n| rng.below(n));
        let pool_len = blocks * kv_block_len(shape);
        let (mut k_want, mut v_want) = (vec![POISON; pool_len], vec![POISON; pool_len]);
        let (mut k_got, mut v_got) = (k_want.clone(), v_want.clone());
        let rows = QkvRows { qkv: &qkv[..], m, shape, pos0 };
        reference(rows, KvCache { k: &mut k_want, v: &mut v_want, table: &table, max_seq }).expect("shapes");
        cpu(rows, KvCache { k: &mut k_got, v: &mut v_got, table: &table, max_seq }).expect("shapes");
        assert_eq!(k_got, k_want, "{shape:?} m {m}");
        assert_eq!(v_got, v_want, "{shape:?} m {m}");
        let hd = shape.head_dim;
        let written = (pos0..pos0 + m).count() * shape.n_kv * hd;
        assert_eq!(k_got.iter().filter(|&&x| x != POISON).count(), written, "only its rows");
        for h in 0..shape.n_kv {
            for p in 0..max_seq {
                let at = kv_row_offset(shape, table[p / KV_BLOCK], h, p);
                assert_eq!(k_got[at] == POISON, !(pos0..pos0 + m).contains(&p), "head {h} pos {p}");
            }
        }
        // Spot-check the mapping itself: head 0, first token, dim 1 of k.
        let want = f16::from_f32(qkv[shape.q_len() + 1]);
        assert_eq!(k_got[kv_row_offset(shape, table[pos0 / KV_BLOCK], 0, pos0) + 1], want);
    }
}

#[test]
fn overflowing_positions_and_bad_tables_are_errors() {
    let shape = HeadShape { n_q: 2, n_kv: 1, head_dim: 4 };
    let qkv = vec![1.0; 2 * shape.qkv_row_len()];
    let len = kv_block_len(shape);
    let (mut k, mut v) = (vec![f16::ZERO; len], vec![f16::ZERO; len]);
    let err = cpu(QkvRows { qkv: &qkv, m: 2, shape, pos0: 1 }, KvCache { k: &mut k, v: &mut v, table: &[0], max_seq: 2 })
        .unwrap_err();
    assert!(matches!(err, OpError::Position { end: 3, limit: 2, .. }), "{err}");
    let short = QkvRows { qkv: &qkv[..], m: 1, shape, pos0: 0 };
    assert!(reference(short, KvCache { k: &mut k, v: &mut v, table: &[0], max_seq: 2 }).is_err(), "qkv length");
    let rows = QkvRows { qkv: &qkv[..], m: 2, shape, pos0: 0 };
    let err = cpu(rows, KvCache { k: &mut k, v: &mut v, table: &[1], max_seq: 2 }).unwrap_err();
    assert!(err.to_string().contains("names block 1 of a pool of 1"), "{err}");
    let err = cpu(rows, KvCache { k: &mut k, v: &mut v, table: &[], max_seq: 2 }).unwrap_err();
    assert!(err.to_string().contains("block table of 0 entries"), "{err}");
    let err = cpu(rows, KvCache { k: &mut k[..len - 1], v: &mut v, table: &[0], max_seq: 2 }).unwrap_err();
    assert!(err.to_string().contains("whole blocks"), "{err}");
}

#[test]
fn zero_tokens_into_an_empty_cache_is_a_no_op() {
    let shape = HeadShape { n_q: 2, n_kv: 1, head_dim: 4 };
    let rows = QkvRows { qkv: &[][..], m: 0, shape, pos0: 0 };
    assert_eq!(cpu(rows, KvCache { k: &mut [], v: &mut [], table: &[], max_seq: 0 }), Ok(()));
    assert_eq!(reference(rows, KvCache { k: &mut [], v: &mut [], table: &[], max_seq: 0 }), Ok(()));
}

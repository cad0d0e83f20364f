//! Exact op: cpu == reference bitwise, and out-of-vocabulary ids are named errors.

use super::{cpu, cpu_of, reference};
use crate::ops::test_util::TestRng;
use crate::ops::OpError;
use crate::weights::{Q1Interleaved, QMatrix};

#[test]
fn cpu_equals_reference_q1_and_q2() {
    let mut rng = TestRng::new("embed_rows");
    let (vocab, hidden) = (77, 384);
    let tables =
        [QMatrix::Q1(rng.q1_matrix(vocab, hidden)), QMatrix::Q2(rng.q2_matrix(vocab, hidden))];
    for table in &tables {
        for len in [1usize, 5, 64] {
            let mut ids: Vec<u32> = (0..len).map(|_| rng.below(vocab) as u32).collect();
            ids[0] = (vocab - 1) as u32; // the last row
            let mut want = vec![f32::NAN; len * hidden];
            let mut got = vec![f32::NAN; len * hidden];
            reference(table, &ids, &mut want).expect("shapes");
            cpu(table, &ids, &mut got).expect("shapes");
            assert_eq!(got, want, "len {len}");
            assert!(got.iter().all(|v| v.is_finite()));
        }
    }
}

/// The CPU backend's interleaved Q1 tables (vocab 77: a padded last group) give the same rows.
#[test]
fn interleaved_table_equals_reference() {
    let mut rng = TestRng::new("embed_rows_interleaved");
    let (vocab, hidden) = (77, 384);
    let q1 = rng.q1_matrix(vocab, hidden);
    let interleaved = Q1Interleaved::from(&q1);
    let ids: Vec<u32> = vec![76, 0, 7, 8, 41];
    let mut want = vec![f32::NAN; ids.len() * hidden];
    let mut got = vec![f32::NAN; ids.len() * hidden];
    reference(&QMatrix::Q1(q1), &ids, &mut want).expect("shapes");
    cpu_of(&interleaved, &ids, &mut got).expect("shapes");
    assert_eq!(got, want);
    let err = cpu_of(&interleaved, &[77], &mut got[..hidden]).unwrap_err();
    assert_eq!(err, OpError::TokenOutOfRange { op: super::OP, id: 77, index: 0, vocab: 77 });
}

#[test]
fn out_of_vocab_id_is_named() {
    let mut rng = TestRng::new("embed_rows_oov");
    let table = QMatrix::Q1(rng.q1_matrix(10, 128));
    let mut out = vec![0.0; 3 * 128];
    let err = cpu(&table, &[1, 10, 2], &mut out).unwrap_err();
    assert_eq!(err, OpError::TokenOutOfRange { op: super::OP, id: 10, index: 1, vocab: 10 });
    assert!(err.to_string().contains("token id 10"));
    assert!(reference(&table, &[1, 2], &mut out).is_err(), "out length mismatch");
}

//! sample_rows is exact: cpu == reference, each row's pick == the one-row op's pick for the same
//! generator state, and the rules for greedy rows, empty rows and bad tables.

use super::{cpu, reference, SeqPick, NO_PICK};
use crate::ops::sample_top_k::{SampleParams, Xoshiro256};
use crate::ops::test_util::TestRng;
use crate::ops::{argmax, sample_top_k, OpError};

fn sampled(t: f32, top_k: usize, top_p: f32, min_p: f32) -> SeqPick {
    SeqPick::Sample(SampleParams { inv_temperature: 1.0 / t, top_k, top_p, min_p })
}

/// Six sequences' settings (greedy among them, top_k 0 on the CPU) and their generators.
fn settings(rng: &mut TestRng) -> (Vec<SeqPick>, Vec<Xoshiro256>) {
    let picks = vec![
        sampled(0.8, 40, 0.95, 0.05),
        SeqPick::Greedy,
        sampled(1.5, 0, 1.0, 0.0),
        sampled(0.3, 7, 0.5, 0.0),
        SeqPick::Greedy,
        sampled(1.0, 64, 1.0, 0.2),
    ];
    let rngs = (0..picks.len()).map(|_| Xoshiro256::new(rng.next_u64())).collect();
    (picks, rngs)
}

#[test]
fn cpu_equals_reference_and_each_row_equals_the_one_row_op() {
    let mut rng = TestRng::new("sample_rows");
    let mut scratch = Vec::new();
    for vocab in [1usize, 3, 1000, 151_669] {
        let (picks, mut want_rngs) = settings(&mut rng);
        let mut got_rngs = want_rngs.clone();
        // Rows in a different order than the sequences, one sequence left out.
        let row_seqs = [4u32, 0, 5, 2, 1];
        for step in 0..6 {
            let mut logits = rng.vec(row_seqs.len() * vocab, -8.0, 8.0);
            for _ in 0..logits.len() / 40 {
                let i = rng.below(logits.len());
                logits[i] = f32::NEG_INFINITY;
            }
            // The one-row ops, each sequence on its own copy of the generator state.
            let mut one_row_rngs = want_rngs.clone();
            let one_row: Vec<u32> = row_seqs
                .iter()
                .enumerate()
                .map(|(row, &s)| {
                    let x = &logits[row * vocab..(row + 1) * vocab];
                    match picks[s as usize] {
                        SeqPick::Greedy => argmax::reference(x).map(|i| i as u32).unwrap(),
                        SeqPick::Sample(p) => {
                            let u = one_row_rngs[s as usize].next_f64();
                            sample_top_k::reference(x, &p, u).unwrap_or(NO_PICK)
                        }
                    }
                })
                .collect();
            let want = reference(&logits, vocab, &row_seqs, &picks, &mut want_rngs).unwrap();
            assert_eq!(want, one_row, "vocab {vocab} step {step}");
            let mut got = vec![0u32; row_seqs.len()];
            cpu(&logits, vocab, &row_seqs, &picks, &mut got_rngs, &mut scratch, &mut got).unwrap();
            assert_eq!(got, want, "vocab {vocab} step {step}");
            assert_eq!(got_rngs, want_rngs, "vocab {vocab} step {step}: generators");
            assert_eq!(want_rngs, one_row_rngs, "vocab {vocab} step {step}: one draw per sampled row");
        }
    }
}

#[test]
fn greedy_rows_leave_their_generator_and_sampled_rows_advance_it_once() {
    let logits = [0.0f32, 2.0, 1.0, 5.0, -1.0, 5.0];
    let picks = [SeqPick::Greedy, sampled(1.0, 0, 1.0, 0.0)];
    let mut rngs = vec![Xoshiro256::new(1), Xoshiro256::new(2)];
    let before = rngs.clone();
    let ids = reference(&logits, 3, &[0, 1], &picks, &mut rngs).unwrap();
    assert_eq!(ids[0], 1, "greedy row 0: the largest");
    assert_eq!(rngs[0], before[0], "a greedy row draws nothing");
    let mut advanced = before[1].clone();
    advanced.next_u64();
    assert_eq!(rngs[1], advanced);
    // Row 1 ties 5.0 at ids 0 and 2 (of that row); a draw picks one of them only.
    assert!(ids[1] == 0 || ids[1] == 2, "{ids:?}");
}

#[test]
fn rows_without_a_candidate_pick_nothing() {
    let nan = f32::NAN;
    let logits = [nan, nan, f32::NEG_INFINITY, f32::NEG_INFINITY, f32::NEG_INFINITY, f32::NEG_INFINITY];
    let picks = [SeqPick::Greedy, sampled(1.0, 5, 1.0, 0.0), SeqPick::Greedy];
    let mut rngs = vec![Xoshiro256::new(3), Xoshiro256::new(4), Xoshiro256::new(5)];
    // All-NaN greedy: nothing; all -inf sampled: nothing; all -inf greedy: the lowest id (argmax).
    let ids = reference(&logits, 2, &[0, 1, 2], &picks, &mut rngs).unwrap();
    assert_eq!(ids, [NO_PICK, NO_PICK, 0]);
    let mut out = [7u32; 3];
    cpu(&logits, 2, &[0, 1, 2], &picks, &mut rngs, &mut Vec::new(), &mut out).unwrap();
    assert_eq!(out, [NO_PICK, NO_PICK, 0]);
}

#[test]
fn bad_tables_are_errors() {
    let logits = [1.0f32; 6];
    let picks = [SeqPick::Greedy, SeqPick::Greedy];
    let mut rngs = vec![Xoshiro256::new(0), Xoshiro256::new(1)];
    let shape = |r: Result<Vec<u32>, OpError>| matches!(r, Err(OpError::Shape { .. }) | Err(OpError::Length { .. }));
    assert!(shape(reference(&logits, 3, &[1, 1], &picks, &mut rngs)), "a sequence twice");
    assert!(shape(reference(&logits, 3, &[0, 2], &picks, &mut rngs)), "a sequence without settings");
    assert!(shape(reference(&logits, 4, &[0, 1], &picks, &mut rngs)), "too few logits");
    assert!(shape(reference(&logits, 3, &[0], &picks, &mut rngs[..1])), "settings and generators differ");
    let bad = [sampled(1.0, 5, 0.0, 0.0), SeqPick::Greedy];
    assert!(shape(reference(&logits, 3, &[0, 1], &bad, &mut rngs)), "top_p 0");
    assert!(sampled(1.0, 0, 1.0, 0.0).device_words().is_err(), "top_k 0 does not fit the device");
    assert!(sampled(1.0, 65, 1.0, 0.0).device_words().is_err(), "top_k 65 does not fit the device");
    assert_eq!(SeqPick::Greedy.device_words().unwrap()[1], 0, "greedy is top_k 0 on the device");
}

//! cpu == reference for `matmul_q2`: the cases shared with the other weight format
//! ([`crate::ops::quant_op_cases::matmul`]) run on Q2Matrix weights, and on ternary weights in
//! the CPU lookup's two-mask interleaved layout.

use crate::ops::quant_op_cases::matmul::matmul_tests;
use crate::weights::Q2Matrix;

matmul_tests!(Q2Matrix);

mod ternary_interleaved {
    use crate::ops::quant_op_cases::matmul::matmul_tests;
    use crate::weights::TernaryInterleaved;

    matmul_tests!(TernaryInterleaved);
}

/// `is_ternary` looks at every 2-bit code: one code 3 anywhere (even in the last word, high
/// lane) makes a matrix non-ternary; codes 0, 1, 2 in any mix keep it ternary.
#[test]
fn is_ternary_finds_any_code_three() {
    use crate::weights::{GROUP, Q2_WORDS};
    let (n, k) = (2, 2 * GROUP);
    let words = n * k / GROUP * Q2_WORDS;
    let scales = vec![half::f16::ONE; n * k / GROUP];
    // Codes 0, 1, 2, 0, 1, 2, ... along each word, shifted by one code from word to word.
    let codes = (0..words).map(|w| (0..16u32).fold(0, |acc, i| acc | ((i + w as u32) % 3) << (2 * i))).collect();
    let ternary = Q2Matrix::new(n, k, scales.clone(), codes).unwrap();
    assert!(ternary.is_ternary());
    for (word, lane) in [(0, 0), (words - 1, 15), (words / 2, 7)] {
        let mut codes = ternary.codes.clone();
        codes[word] |= 3 << (2 * lane);
        assert!(!Q2Matrix::new(n, k, scales.clone(), codes).unwrap().is_ternary(), "word {word} lane {lane}");
    }
}

//! Quantized weight matrices in the layout every kernel (CPU and CUDA) reads.
//!
//! A matrix `W[N, K]` (N output rows, K contiguous inputs, `K % 128 == 0`) is stored as a
//! structure of arrays, so that the bytes uploaded to the GPU are exactly these vectors:
//!
//! ```text
//! block b = row * (K / 128) + kb          (row-major over blocks)
//! scales[b]            : f16, the block's scale d
//! Q1: bits[4b .. 4b+4] : 128 sign bits, weight j of the block is bit (j % 32) of word j / 32,
//!                        1 -> +d, 0 -> -d
//! Q2: codes[8b .. 8b+8]: 128 two-bit codes, weight j is bits 2(j % 16).. of word j / 16,
//!                        code c -> (c - 1) * d, i.e. 0 -> -d, 1 -> 0, 2 -> +d, 3 -> +2d
//! ```
//!
//! Every 2-bit file layout (TQ2_0_g128, PrismML Q2_0 g128) is normalised to the Q2 code set at
//! load, so one kernel family serves all of them. Separate arrays keep the 16-byte (Q1) and
//! 32-byte (Q2) payloads naturally aligned for vector loads and the scales coalesced.

use half::f16;

/// Weights per quantization group, shared by every format the kernels read.
pub const GROUP: usize = 128;
/// u32 words of sign bits per Q1 group.
pub const Q1_WORDS: usize = GROUP / 32;
/// u32 words of 2-bit codes per Q2 group.
pub const Q2_WORDS: usize = GROUP / 16;

/// Why a weight matrix cannot be built.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WeightError {
    #[error("K = {k} is not a multiple of the {GROUP}-weight group")]
    KNotGroupMultiple { k: usize },
    #[error("expected {expected} {what}, got {got}")]
    Length { what: &'static str, expected: usize, got: usize },
}

/// A 1-bit (Q1_0) matrix in kernel layout.
#[derive(Clone, Debug, PartialEq)]
pub struct Q1Matrix {
    pub n: usize,
    pub k: usize,
    pub scales: Vec<f16>,
    pub bits: Vec<u32>,
}

/// Weight j of a Q1 block of scale `d`: +d where its sign bit is 1, −d where 0.
fn q1_weight(d: f16, words: &[u32; Q1_WORDS], j: usize) -> f32 {
    let d = d.to_f32();
    if (words[j / 32] >> (j % 32)) & 1 == 1 {
        d
    } else {
        -d
    }
}

/// Rows per group of an [`Interleaved`] matrix.
pub const INTERLEAVE_ROWS: usize = 8;

/// A matrix of sign masks with its rows interleaved in groups of [`INTERLEAVE_ROWS`]: the layout
/// of the CPU's table-lookup kernel (`cpu/q1_lut.rs`), which then reads one 32-byte vector per
/// word of 8 rows instead of transposing 8 rows' blocks, and streams one contiguous run of memory
/// per group. `MASKS` sign masks per block: [`Q1Interleaved`] (1: bit 1 -> +d, 0 -> −d) and
/// [`TernaryInterleaved`] (2: mask 0 marks the +d weights, mask 1 the −d ones, neither 0). The CPU
/// backend stores its Q1 matrices (and, at the AVX2 level, its ternary ones) this way (a
/// conversion, not a second copy); every other consumer reads [`Q1Matrix`] / [`Q2Matrix`].
///
/// ```text
/// group g = rows 8g .. 8g + 8 (the last one padded with zero rows), block kb of row 8g + r:
/// scales[(g * nb + kb) * 8 + r]                         nb = K / 128
/// words[((g * nb + kb) * MASKS * 4 + m * 4 + c) * 8 + r] word c of mask m: bit i is weight 32c + i
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Interleaved<const MASKS: usize> {
    pub n: usize,
    pub k: usize,
    pub scales: Vec<f16>,
    pub words: Vec<u32>,
}

/// A 1-bit matrix, interleaved ([`Interleaved`]).
pub type Q1Interleaved = Interleaved<1>;
/// A ternary 2-bit matrix (codes 0, 1, 2: no +2d weight) as a +d mask and a −d mask, interleaved
/// ([`Interleaved`]).
pub type TernaryInterleaved = Interleaved<2>;

impl<const MASKS: usize> Interleaved<MASKS> {
    pub fn blocks_per_row(&self) -> usize {
        self.k / GROUP
    }

    /// Index of row `row`'s block `kb` among the group-blocks' lanes: its scale's index, and
    /// with `* MASKS * 4 + m * 4 + c` then `* 8 + r`, its words'.
    fn lane(&self, row: usize, kb: usize) -> (usize, usize) {
        (row / INTERLEAVE_ROWS * self.blocks_per_row() + kb, row % INTERLEAVE_ROWS)
    }

    /// The scale and the sign masks (4 words each) of row `row`'s block `kb`.
    pub fn masks(&self, row: usize, kb: usize) -> (f16, [[u32; Q1_WORDS]; MASKS]) {
        let (gb, r) = self.lane(row, kb);
        let word = |m: usize, c: usize| self.words[((gb * MASKS + m) * Q1_WORDS + c) * INTERLEAVE_ROWS + r];
        (self.scales[gb * INTERLEAVE_ROWS + r], std::array::from_fn(|m| std::array::from_fn(|c| word(m, c))))
    }

    /// Bytes a kernel must read to use the whole matrix once.
    pub fn len_bytes(&self) -> usize {
        self.scales.len() * 2 + self.words.len() * 4
    }

    /// Group g when `rows` are exactly rows 8g .. 8g + 8 (a group's mask word is then one 32-byte
    /// vector); None for any other rows.
    pub fn whole_group(rows: &[usize]) -> Option<usize> {
        let first = *rows.first()?;
        let whole = rows.len() == INTERLEAVE_ROWS
            && first.is_multiple_of(INTERLEAVE_ROWS)
            && rows.iter().enumerate().all(|(r, &row)| row == first + r);
        whole.then_some(first / INTERLEAVE_ROWS)
    }

    /// The N x K matrix whose row `row`, block `kb` is `block(row, kb)` (scale and masks), the
    /// padding rows zero. Groups are filled in parallel: a 27B model's conversion at load is
    /// billions of weights.
    fn from_blocks(n: usize, k: usize, block: impl Fn(usize, usize) -> (f16, [[u32; Q1_WORDS]; MASKS]) + Sync) -> Self {
        use rayon::prelude::*;
        let nb = k / GROUP;
        let blocks = n.div_ceil(INTERLEAVE_ROWS) * nb * INTERLEAVE_ROWS;
        let mut out = Self { n, k, scales: vec![f16::ZERO; blocks], words: vec![0; blocks * MASKS * Q1_WORDS] };
        let group_scales = nb * INTERLEAVE_ROWS;
        out.scales.par_chunks_mut(group_scales).zip(out.words.par_chunks_mut(group_scales * MASKS * Q1_WORDS)).enumerate().for_each(
            |(g, (scales, words))| {
                for r in 0..INTERLEAVE_ROWS.min(n - g * INTERLEAVE_ROWS) {
                    for kb in 0..nb {
                        let (d, masks) = block(g * INTERLEAVE_ROWS + r, kb);
                        scales[kb * INTERLEAVE_ROWS + r] = d;
                        for (m, mask) in masks.iter().enumerate() {
                            for (c, &word) in mask.iter().enumerate() {
                                words[((kb * MASKS + m) * Q1_WORDS + c) * INTERLEAVE_ROWS + r] = word;
                            }
                        }
                    }
                }
            },
        );
        out
    }
}

impl Q1Interleaved {
    /// The scale and the 4 sign words of row `row`'s block `kb`.
    pub fn block(&self, row: usize, kb: usize) -> (f16, [u32; Q1_WORDS]) {
        let (d, [words]) = self.masks(row, kb);
        (d, words)
    }

    /// Weight (row, col) as f32: [`Q1Matrix::weight`] of the same matrix.
    pub fn weight(&self, row: usize, col: usize) -> f32 {
        let (d, words) = self.block(row, col / GROUP);
        q1_weight(d, &words, col % GROUP)
    }
}

impl From<&Q1Matrix> for Q1Interleaved {
    fn from(m: &Q1Matrix) -> Self {
        Self::from_blocks(m.n, m.k, |row, kb| {
            let (d, words) = m.block(row, kb);
            (d, [words])
        })
    }
}

impl TernaryInterleaved {
    /// Weight (row, col) as f32: [`Q2Matrix::weight`] of the same matrix, bit for bit.
    pub fn weight(&self, row: usize, col: usize) -> f32 {
        let (d, [plus, minus]) = self.masks(row, col / GROUP);
        let j = col % GROUP;
        let bit = |words: &[u32; Q1_WORDS]| (words[j / 32] >> (j % 32)) & 1;
        let code = 1 + bit(&plus) - bit(&minus);
        (code as f32 - 1.0) * d.to_f32()
    }

    /// The same weights as `m`, or None where `m` holds a code 3 (+2d: two masks cannot say it).
    pub fn from_q2(m: &Q2Matrix) -> Option<Self> {
        if !m.is_ternary() {
            return None;
        }
        let nb = m.blocks_per_row();
        Some(Self::from_blocks(m.n, m.k, |row, kb| {
            let b = row * nb + kb;
            (m.scales[b], ternary_masks(&m.codes[b * Q2_WORDS..(b + 1) * Q2_WORDS]))
        }))
    }
}

/// The +d mask (code 2) and the −d mask (code 0) of a block's 8 code words: word c of a mask
/// holds weights 32c .. 32c + 32, from code words 2c (low half) and 2c + 1 (high half).
fn ternary_masks(codes: &[u32]) -> [[u32; Q1_WORDS]; 2] {
    const LOW_LANE_BITS: u32 = 0x5555_5555;
    // The 16 even bits of `lanes` packed into the low 16 bits.
    let compact = |lanes: u32| {
        let mut v = lanes & LOW_LANE_BITS;
        v = (v | (v >> 1)) & 0x3333_3333;
        v = (v | (v >> 2)) & 0x0F0F_0F0F;
        v = (v | (v >> 4)) & 0x00FF_00FF;
        (v | (v >> 8)) & 0x0000_FFFF
    };
    let plus = |w: u32| compact((w >> 1) & !w);
    let minus = |w: u32| compact(!(w >> 1) & !w);
    let mask = |f: &dyn Fn(u32) -> u32| std::array::from_fn(|c| f(codes[2 * c]) | (f(codes[2 * c + 1]) << 16));
    [mask(&plus), mask(&minus)]
}

/// A 2-bit matrix (ternary or {-1,0,1,2}) in kernel layout.
#[derive(Clone, Debug, PartialEq)]
pub struct Q2Matrix {
    pub n: usize,
    pub k: usize,
    pub scales: Vec<f16>,
    pub codes: Vec<u32>,
}

fn check_k(k: usize) -> Result<usize, WeightError> {
    if k % GROUP != 0 || k == 0 {
        return Err(WeightError::KNotGroupMultiple { k });
    }
    Ok(k / GROUP)
}

fn check_len(what: &'static str, expected: usize, got: usize) -> Result<(), WeightError> {
    if expected != got {
        return Err(WeightError::Length { what, expected, got });
    }
    Ok(())
}

/// Checks K and that the scales and payload words (`lens`, named `what`) hold the blocks of an
/// `n x k` matrix at `words_per_block` words each.
fn check_layout(
    n: usize,
    k: usize,
    (scales, words): (usize, usize),
    words_per_block: usize,
    what: [&'static str; 2],
) -> Result<(), WeightError> {
    let blocks = n * check_k(k)?;
    check_len(what[0], blocks, scales)?;
    check_len(what[1], blocks * words_per_block, words)
}

/// Weight (row, col) of a matrix of K = `k`: its block and its index in the block.
fn locate(k: usize, row: usize, col: usize) -> (usize, usize) {
    (row * (k / GROUP) + col / GROUP, col % GROUP)
}

impl Q1Matrix {
    pub fn new(n: usize, k: usize, scales: Vec<f16>, bits: Vec<u32>) -> Result<Self, WeightError> {
        check_layout(n, k, (scales.len(), bits.len()), Q1_WORDS, ["Q1 scales", "Q1 bit words"])?;
        Ok(Self { n, k, scales, bits })
    }

    pub fn blocks_per_row(&self) -> usize {
        self.k / GROUP
    }

    /// Weight (row, col) as f32: the definition every kernel must agree with.
    pub fn weight(&self, row: usize, col: usize) -> f32 {
        let (d, words) = self.block(row, col / GROUP);
        q1_weight(d, &words, col % GROUP)
    }

    /// The scale and the 4 sign words of row `row`'s block `kb`.
    pub fn block(&self, row: usize, kb: usize) -> (f16, [u32; Q1_WORDS]) {
        let b = row * self.blocks_per_row() + kb;
        (self.scales[b], std::array::from_fn(|c| self.bits[b * Q1_WORDS + c]))
    }

    /// Bytes a kernel must read to use the whole matrix once.
    pub fn len_bytes(&self) -> usize {
        self.scales.len() * 2 + self.bits.len() * 4
    }
}

impl Q2Matrix {
    pub fn new(n: usize, k: usize, scales: Vec<f16>, codes: Vec<u32>) -> Result<Self, WeightError> {
        check_layout(n, k, (scales.len(), codes.len()), Q2_WORDS, ["Q2 scales", "Q2 code words"])?;
        Ok(Self { n, k, scales, codes })
    }

    pub fn blocks_per_row(&self) -> usize {
        self.k / GROUP
    }

    /// Weight (row, col) as f32: the definition every kernel must agree with.
    pub fn weight(&self, row: usize, col: usize) -> f32 {
        let (b, j) = locate(self.k, row, col);
        let code = (self.codes[b * Q2_WORDS + j / 16] >> (2 * (j % 16))) & 3;
        (code as f32 - 1.0) * self.scales[b].to_f32()
    }

    /// Bytes a kernel must read to use the whole matrix once.
    pub fn len_bytes(&self) -> usize {
        self.scales.len() * 2 + self.codes.len() * 4
    }

    /// Whether every code is 0, 1 or 2 (weights -d, 0, +d): no code 3 (+2d, which Q2_0 allows and
    /// the ternary converters never emit). The binary GEMV's Q2 kernels take only such matrices.
    pub fn is_ternary(&self) -> bool {
        self.codes.iter().all(|&w| code_three_lanes(w) == 0)
    }
}

/// The 16 two-bit codes of a Q2 code word that are 3, as the low bit of each such lane.
pub fn code_three_lanes(word: u32) -> u32 {
    const LOW_LANE_BITS: u32 = 0x5555_5555;
    word & (word >> 1) & LOW_LANE_BITS
}

/// A quantized matrix read one weight at a time: what the f64 reference definitions
/// ([`crate::ops::quant_reference`]) need, so one definition serves every format.
pub trait WeightAt: Sync {
    /// Output rows N.
    fn n(&self) -> usize;
    /// Inputs per row K.
    fn k(&self) -> usize;
    /// Weight (row, col) as f32.
    fn weight_at(&self, row: usize, col: usize) -> f32;
}

/// Every format reads one weight through its `weight` (the definition).
macro_rules! weight_at_by_definition {
    ($($matrix:ty),+) => {$(
        impl WeightAt for $matrix {
            fn n(&self) -> usize {
                self.n
            }
            fn k(&self) -> usize {
                self.k
            }
            fn weight_at(&self, row: usize, col: usize) -> f32 {
                self.weight(row, col)
            }
        }
    )+};
}
weight_at_by_definition!(Q1Matrix, Q1Interleaved, Q2Matrix, TernaryInterleaved);

/// Either quantized matrix; the model holds its linear weights as this.
#[derive(Clone, Debug, PartialEq)]
pub enum QMatrix {
    Q1(Q1Matrix),
    Q2(Q2Matrix),
}

impl QMatrix {
    pub fn n(&self) -> usize {
        match self {
            QMatrix::Q1(m) => m.n,
            QMatrix::Q2(m) => m.n,
        }
    }
    pub fn k(&self) -> usize {
        match self {
            QMatrix::Q1(m) => m.k,
            QMatrix::Q2(m) => m.k,
        }
    }
    pub fn len_bytes(&self) -> usize {
        match self {
            QMatrix::Q1(m) => m.len_bytes(),
            QMatrix::Q2(m) => m.len_bytes(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::test_util::TestRng;

    /// Every weight of the interleaved copy is the original's (N = 1, 8, and 21: a padded group),
    /// and the padding is zero.
    #[test]
    fn interleaving_keeps_every_weight() {
        let mut rng = TestRng::new("q1_interleaved");
        for n in [1, 8, 21] {
            let m = rng.q1_matrix(n, 384);
            let il = Q1Interleaved::from(&m);
            for row in 0..n {
                for col in 0..384 {
                    assert_eq!(il.weight(row, col).to_bits(), m.weight(row, col).to_bits(), "n {n} ({row}, {col})");
                }
            }
            assert_eq!(il.words.len(), n.div_ceil(8) * 8 * 3 * Q1_WORDS);
            assert_eq!(il.len_bytes(), n.div_ceil(8) * 8 * 3 * (2 + 16));
            for pad in n..n.div_ceil(8) * 8 {
                assert!((0..3).all(|kb| il.block(pad, kb) == (f16::ZERO, [0; Q1_WORDS])), "n {n} padding row {pad}");
            }
        }
    }

    /// Every weight of a ternary matrix survives the two masks bit for bit (codes 0, 1, 2 in
    /// every word position, a padded group), and a code 3 anywhere refuses the conversion.
    #[test]
    fn ternary_masks_keep_every_weight() {
        let mut rng = TestRng::new("ternary_interleaved");
        for n in [1, 8, 21] {
            let k = 384;
            let mut m = rng.q2_matrix(n, k);
            // Codes 3 -> 0..2, so the matrix is ternary with all three codes throughout.
            for (i, w) in m.codes.iter_mut().enumerate() {
                *w = (0..16).fold(0, |acc, l| {
                    let c = (*w >> (2 * l)) & 3;
                    acc | (if c == 3 { (i as u32 + l) % 3 } else { c }) << (2 * l)
                });
            }
            let t = TernaryInterleaved::from_q2(&m).expect("ternary");
            for row in 0..n {
                for col in 0..k {
                    assert_eq!(t.weight(row, col).to_bits(), m.weight(row, col).to_bits(), "n {n} ({row}, {col})");
                }
            }
            assert_eq!(t.len_bytes(), n.div_ceil(8) * 8 * 3 * (2 + 32));
            if let Some(last) = m.codes.last_mut() {
                *last |= 3 << 30;
            }
            assert!(TernaryInterleaved::from_q2(&m).is_none(), "a code 3 has no mask form");
        }
    }
}

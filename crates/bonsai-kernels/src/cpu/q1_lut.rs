//! `matmul_q1` / `gate_up_swiglu_q1` by table lookup: at the AVX2 level at every M (decode and
//! prefill: it beats the AVX2 panel GEMM at every M measured, 64 to 512), at the AVX-512 level
//! below the format's `AVX512_PANEL_MIN_M` (its panel GEMM takes the larger M). Ternary
//! `matmul_q2` / `gate_up_swiglu_q2` too, as a +d mask and a −d mask ([`LutRows::MASKS`] = 2)
//! looked up in subset-sum tables ([`build_subset_tables`]), below the format's
//! `AVX2_LUT_PANEL_MIN_M`.
//!
//! Every 3 consecutive weights of a row share one x triplet, and their sign bits are a 3-bit
//! index into the 8 values `±x0 ± x1 ± x2`. Per token, [`build_tables`] writes those 8 sums for
//! every triplet of x once (a few microseconds for K = 6144); a row then costs one table lookup
//! per 3 weights, and `vpermps` looks up 8 rows at once: its 8 index lanes are 8 rows' bit words
//! shifted right by 3j (it reads only the low 3 bits of each lane), its table the triplet's 8
//! sums. Per 8 rows and 3 weights: a shift, a permute and an add, against a shift, a blend and
//! an add per 8 weights of ONE row in the shift-and-blend GEMV this replaced: ~3.5x fewer
//! instructions. One call takes up to [`MAX_TOKENS`] tokens and transposes each block once for
//! them all; each shifted index serves 4 tokens' lookups (prefill: a permute and an add per 8 rows
//! and 3 weights of a token, the shift shared).
//!
//! A 32-bit word of a block holds 10 triplets (bits 0..30) and a pair (bits 30, 31): the pair's
//! table is built with a third weight of x = 0, so its index's bit 2 (always 0 after the shift)
//! picks `−0`. 11 tables of 8 floats per 32 weights: 88 floats, 2.75x the bytes of x.
//!
//! The kernel needs each word of a block as one ymm over 8 rows (lane r = row r). It reads two
//! layouts ([`LutRows`]): the CPU backend's at both SIMD levels, [`Q1Interleaved`], where 8 consecutive
//! rows' word is one 32-byte load and a group's blocks are one stream (tiles are two groups:
//! 16 rows, or a gate|up tile's 8 gate and 8 up rows); and the shared [`Q1Matrix`] layout, whose
//! 8 rows' 16-byte blocks are transposed in registers (4 loads, 4 inserts, 8 unpacks per 8 rows
//! and block). The interleaved layout decodes faster (docs/kernel-notes.md, "Q1 at the AVX2 level").
//!
//! Arithmetic: each table entry is `((±x0) ± x1) ± x2` (2 roundings), a block lane sums its 44
//! entries in 2 chains of f32 adds (one or two tokens) or in one (from three tokens on, whose
//! chains then hide the adds' latency), then one FMA by the block's d into the row total over the
//! K/128 blocks: a summation tree of height <= 2 + 44 + 1 + K/128 over exact terms `±x`, inside
//! the ops' γ_{K+128}·A bound (matmul_q1's doc).
//!
//! Speed of light: the weights at the memory bandwidth (0.1406 bytes per weight); on a 2-core
//! AVX2 machine the lookups, not the memory, set the pace (docs/kernel-notes.md, "CPU decode and
//! prefill").

use std::arch::x86_64::*;

use super::qgemm::QuantRows;
use crate::weights::{Interleaved, Q1Matrix, GROUP, INTERLEAVE_ROWS, Q1_WORDS};

/// Tables per 32-bit word of sign bits: 10 triplets and a pair.
const TABLES_PER_WORD: usize = 11;
/// Floats per table (one ymm).
const TABLE: usize = 8;
/// Rows per ymm of indices.
const ROWS: usize = 8;
/// Rows one [`dot_rows`] call computes: two ymm of indices share each table load.
pub(super) const TILE_ROWS: usize = 2 * ROWS;
/// Most sign masks per block of any layout ([`LutRows::MASKS`]).
const MAX_MASKS: usize = 2;

/// Floats of the tables of one token of K inputs.
pub(super) fn tables_len(k: usize) -> usize {
    k / 32 * TABLES_PER_WORD * TABLE
}

/// `tables[(w·11 + j)·8 + idx] = Σ_i (bit i of idx ? x_i : −x_i)` over the triplet
/// `x[32w + 3j ..]` (the pair's third x is 0 for j = 10): the sign tables of Q1 weights.
///
/// # Safety
/// The CPU must support AVX2 and FMA; `x.len()` a multiple of 32; `tables` holds
/// [`tables_len`]`(x.len())` floats.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn build_tables(x: &[f32], tables: &mut [f32]) {
    // SAFETY: the same contract.
    unsafe { build::<false>(x, tables) }
}

/// `tables[(w·11 + j)·8 + idx] = Σ_i (bit i of idx ? x_i : 0)`: the subset sums a ternary mask
/// looks up (a weight outside the mask adds nothing, not ±x: a zero weight stays exactly 0).
///
/// # Safety
/// As [`build_tables`].
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn build_subset_tables(x: &[f32], tables: &mut [f32]) {
    // SAFETY: the same contract.
    unsafe { build::<true>(x, tables) }
}

/// The tables with lane factors +1 for a set bit and −1 (`SUBSET`: 0) for a clear one.
#[target_feature(enable = "avx2,fma")]
unsafe fn build<const SUBSET: bool>(x: &[f32], tables: &mut [f32]) {
    assert!(x.len().is_multiple_of(32) && tables.len() >= tables_len(x.len()), "q1_lut tables: shapes");
    let clear = if SUBSET { 0.0 } else { -1.0 };
    // Lane idx of lanes(i) is +1 where bit i of idx is set, `clear` where it is clear.
    let lanes = |i: u32| -> [f32; 8] { std::array::from_fn(|idx| if (idx >> i) & 1 == 1 { 1.0 } else { clear }) };
    let (s0, s1, s2) = (lanes(0), lanes(1), lanes(2));
    // SAFETY: each array is 8 floats.
    let (s0, s1, s2) = unsafe { (_mm256_loadu_ps(s0.as_ptr()), _mm256_loadu_ps(s1.as_ptr()), _mm256_loadu_ps(s2.as_ptr())) };
    let mut dst = tables.as_mut_ptr();
    for xw in x.chunks_exact(32) {
        for j in 0..TABLES_PER_WORD {
            let x2 = if j < 10 { xw[3 * j + 2] } else { 0.0 };
            let t = _mm256_mul_ps(s0, _mm256_set1_ps(xw[3 * j]));
            let t = _mm256_fmadd_ps(s1, _mm256_set1_ps(xw[3 * j + 1]), t);
            let t = _mm256_fmadd_ps(s2, _mm256_set1_ps(x2), t);
            // SAFETY: table number w·11 + j < tables_len(x.len()) (asserted), 8 floats each.
            unsafe {
                _mm256_storeu_ps(dst, t);
                dst = dst.add(TABLE);
            }
        }
    }
}

/// The 4 words of block `kb` of 8 rows, transposed: `words[c]` lane r = word c of row `rows[r]`.
///
/// # Safety
/// AVX2; every `rows[r] < w.n`, `kb < w.blocks_per_row()`.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn transposed_words(w: &Q1Matrix, rows: &[usize], kb: usize) -> [__m256i; Q1_WORDS] {
    let nb = w.blocks_per_row();
    // SAFETY: row·nb + kb is a block of the matrix (the caller's contract): 4 words.
    let block = |r: usize| unsafe { _mm_loadu_si128(w.bits.as_ptr().add((rows[r] * nb + kb) * Q1_WORDS).cast()) };
    // a[i]: rows i and i + 4 in the low and high 128-bit lanes.
    let a: [__m256i; 4] = std::array::from_fn(|i| _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(block(i)), block(i + 4)));
    let t0 = _mm256_unpacklo_epi32(a[0], a[1]);
    let t1 = _mm256_unpacklo_epi32(a[2], a[3]);
    let t2 = _mm256_unpackhi_epi32(a[0], a[1]);
    let t3 = _mm256_unpackhi_epi32(a[2], a[3]);
    [
        _mm256_unpacklo_epi64(t0, t1),
        _mm256_unpackhi_epi64(t0, t1),
        _mm256_unpacklo_epi64(t2, t3),
        _mm256_unpackhi_epi64(t2, t3),
    ]
}

/// How often [`dot_rows`] prefetches (a 64-byte line holds 4 blocks of a row's words, or of 8
/// interleaved rows' scales), and how far ahead, per layout: 8 blocks (2 lines) of every row of
/// the shared layout; 16 blocks of an interleaved group, whose blocks are one stream (8 and 32
/// measured slower: docs/kernel-notes.md).
const PREFETCH_EVERY: usize = 4;
const PREFETCH_BLOCKS: usize = 8;
const PREFETCH_BLOCKS_INTERLEAVED: usize = 16;

/// Asks for the cache lines of block `kb` of 8 rows (none past a row's end are needed, and a
/// prefetch of any address is harmless: it cannot fault).
#[inline]
#[target_feature(enable = "avx2")]
fn prefetch_rows(w: &Q1Matrix, rows: &[usize; ROWS], kb: usize) {
    let nb = w.blocks_per_row();
    if kb >= nb {
        return;
    }
    for &row in rows {
        let line = w.bits.as_ptr().wrapping_add((row * nb + kb) * Q1_WORDS);
        // A hint: it reads nothing the program sees and cannot fault.
        _mm_prefetch::<_MM_HINT_T0>(line.cast());
    }
}

/// How [`dot_rows`] finds 8 rows' blocks in a layout: the words of a block as one ymm per word
/// (lane r = row r), the scales of up to [`SCALE_CHUNK`] blocks, and the lines to prefetch.
/// Safety of the unsafe methods: AVX2 (+ F16C for the scales), a row set of rows < N, blocks < K/128.
pub(crate) trait LutRows: QuantRows {
    /// What the 8 rows of one call need to find their blocks (made once per call).
    type RowSet: Copy;
    /// Sign masks per block: 1 (Q1: bit 1 -> +d, 0 -> −d, in the sign tables) or 2 (ternary: the
    /// +d mask, then the −d mask, both in the subset tables; a weight in neither is 0).
    const MASKS: usize;
    fn row_set(&self, rows: &[usize; ROWS]) -> Self::RowSet;
    /// `[m][c]`: word c of mask m (masks past [`LutRows::MASKS`] are not read).
    unsafe fn words(&self, set: &Self::RowSet, kb: usize) -> [[__m256i; Q1_WORDS]; MAX_MASKS];
    unsafe fn scales(&self, set: &Self::RowSet, kb0: usize, blocks: usize) -> [__m256; SCALE_CHUNK];
    /// Prefetches the blocks some distance past `kb`, the block being read (called every
    /// [`PREFETCH_EVERY`] blocks; the distance may reach past the row's end).
    unsafe fn prefetch(&self, set: &Self::RowSet, kb: usize);
}

/// The shared layout: any 8 rows, their blocks transposed in registers.
impl LutRows for Q1Matrix {
    type RowSet = [usize; ROWS];
    const MASKS: usize = 1;
    fn row_set(&self, rows: &[usize; ROWS]) -> [usize; ROWS] {
        *rows
    }
    #[inline(always)]
    unsafe fn words(&self, rows: &[usize; ROWS], kb: usize) -> [[__m256i; Q1_WORDS]; MAX_MASKS] {
        // SAFETY: the trait's contract (AVX2).
        unsafe { [transposed_words(self, rows, kb), [_mm256_setzero_si256(); Q1_WORDS]] }
    }
    #[inline(always)]
    unsafe fn scales(&self, rows: &[usize; ROWS], kb0: usize, blocks: usize) -> [__m256; SCALE_CHUNK] {
        // SAFETY: the trait's contract.
        unsafe { block_scales(self, rows, kb0, blocks) }
    }
    #[inline(always)]
    unsafe fn prefetch(&self, rows: &[usize; ROWS], kb: usize) {
        // SAFETY: the trait's contract (AVX2).
        unsafe { prefetch_rows(self, rows, kb + PREFETCH_BLOCKS) }
    }
}

/// 8 rows of an [`Interleaved`] matrix: one whole group (the engine's tiles, but the last), or
/// any rows (read one word at a time).
#[derive(Clone, Copy)]
pub(crate) enum InterleavedRows {
    Group(usize),
    Rows([usize; ROWS]),
}

/// The interleaved layouts (Q1 and ternary): a group's word c of mask m of block kb is one
/// 32-byte load, its scales one 16-byte load per block.
impl<const M: usize> LutRows for Interleaved<M>
where
    Interleaved<M>: QuantRows,
{
    type RowSet = InterleavedRows;
    const MASKS: usize = M;
    fn row_set(&self, rows: &[usize; ROWS]) -> InterleavedRows {
        match Interleaved::<M>::whole_group(rows) {
            Some(g) => InterleavedRows::Group(g),
            None => InterleavedRows::Rows(*rows),
        }
    }
    #[inline(always)]
    unsafe fn words(&self, set: &InterleavedRows, kb: usize) -> [[__m256i; Q1_WORDS]; MAX_MASKS] {
        match *set {
            InterleavedRows::Group(g) => {
                let base = (g * self.blocks_per_row() + kb) * M * Q1_WORDS * INTERLEAVE_ROWS;
                std::array::from_fn(|m| {
                    std::array::from_fn(|c| {
                        if m >= M {
                            // SAFETY: AVX2 (the trait's contract).
                            return unsafe { _mm256_setzero_si256() };
                        }
                        // SAFETY: group g's block kb is inside `words` (rows < N: g < groups; kb <
                        // nb), M x 4 x 8 words from `base`.
                        unsafe { _mm256_loadu_si256(self.words.as_ptr().add(base + (m * Q1_WORDS + c) * INTERLEAVE_ROWS).cast()) }
                    })
                })
            }
            InterleavedRows::Rows(rows) => {
                let blocks: [[[u32; Q1_WORDS]; M]; ROWS] = std::array::from_fn(|r| self.masks(rows[r], kb).1);
                std::array::from_fn(|m| {
                    std::array::from_fn(|c| {
                        if m >= M {
                            // SAFETY: AVX2 (the trait's contract).
                            return unsafe { _mm256_setzero_si256() };
                        }
                        // SAFETY: 8 u32 = 32 bytes.
                        unsafe { _mm256_loadu_si256(std::array::from_fn::<u32, ROWS, _>(|r| blocks[r][m][c]).as_ptr().cast()) }
                    })
                })
            }
        }
    }
    #[inline(always)]
    unsafe fn scales(&self, set: &InterleavedRows, kb0: usize, blocks: usize) -> [__m256; SCALE_CHUNK] {
        let bits: [__m128i; SCALE_CHUNK] = match *set {
            InterleavedRows::Group(g) => {
                let base = (g * self.blocks_per_row() + kb0) * INTERLEAVE_ROWS;
                std::array::from_fn(|i| {
                    // SAFETY: blocks kb0 .. kb0 + blocks of group g are inside `scales` (the
                    // contract); past `blocks`, block kb0 + blocks - 1 is read again.
                    unsafe { _mm_loadu_si128(self.scales.as_ptr().add(base + i.min(blocks - 1) * INTERLEAVE_ROWS).cast()) }
                })
            }
            InterleavedRows::Rows(rows) => std::array::from_fn(|i| {
                let d: [u16; ROWS] = std::array::from_fn(|r| self.masks(rows[r], kb0 + i.min(blocks - 1)).0.to_bits());
                // SAFETY: 8 u16 = 16 bytes.
                unsafe { _mm_loadu_si128(d.as_ptr().cast()) }
            }),
        };
        // SAFETY: F16C (the contract).
        bits.map(|v| unsafe { f16_to_f32(v) })
    }
    #[inline(always)]
    unsafe fn prefetch(&self, set: &InterleavedRows, kb: usize) {
        let nb = self.blocks_per_row();
        let kb = kb + PREFETCH_BLOCKS_INTERLEAVED;
        if let (InterleavedRows::Group(g), true) = (*set, kb < nb) {
            // The group's next PREFETCH_EVERY blocks: one line of scales, 128 bytes of words
            // (two lines) per block and mask.
            // SAFETY: AVX2 (the contract); a prefetch reads nothing the program sees and cannot
            // fault.
            unsafe { prefetch_line(self.scales.as_ptr().wrapping_add((g * nb + kb) * INTERLEAVE_ROWS).cast()) };
            for b in kb..(kb + PREFETCH_EVERY).min(nb) {
                let block = self.words.as_ptr().wrapping_add((g * nb + b) * M * Q1_WORDS * INTERLEAVE_ROWS);
                for line in 0..2 * M {
                    // SAFETY: as above.
                    unsafe { prefetch_line(block.wrapping_add(16 * line).cast()) };
                }
            }
        }
    }
}

#[inline]
#[target_feature(enable = "avx2")]
fn prefetch_line(p: *const i8) {
    _mm_prefetch::<_MM_HINT_T0>(p);
}

#[inline]
#[target_feature(enable = "avx2,f16c")]
fn f16_to_f32(v: __m128i) -> __m256 {
    _mm256_cvtph_ps(v)
}

/// Blocks whose scales [`block_scales`] converts at once.
const SCALE_CHUNK: usize = 8;

/// `d[i]` lane r = the scale of block `kb0 + i` of row `rows[r]`, for `i < blocks` (<= 8): per row
/// one 16-byte load of 8 consecutive scales and an 8 x 8 transpose of u16 in registers (a tail
/// of fewer blocks is read one scale at a time).
///
/// # Safety
/// AVX2 + F16C; every `rows[r] < w.n`; `kb0 + blocks <= w.blocks_per_row()`.
#[inline]
#[target_feature(enable = "avx2,f16c")]
unsafe fn block_scales(w: &Q1Matrix, rows: &[usize], kb0: usize, blocks: usize) -> [__m256; SCALE_CHUNK] {
    let nb = w.blocks_per_row();
    let scales = w.scales.as_ptr().cast::<u16>();
    let c: [__m128i; SCALE_CHUNK] = if blocks == SCALE_CHUNK {
        // SAFETY: row·nb + kb0 + 8 <= (row + 1)·nb: 8 scales of the row (the caller's contract).
        let r: [__m128i; ROWS] = std::array::from_fn(|i| unsafe { _mm_loadu_si128(scales.add(rows[i] * nb + kb0).cast()) });
        let a: [__m128i; 8] = std::array::from_fn(|i| {
            let (p, q) = (r[2 * (i / 2)], r[2 * (i / 2) + 1]);
            if i % 2 == 0 { _mm_unpacklo_epi16(p, q) } else { _mm_unpackhi_epi16(p, q) }
        });
        // b[0..4]: rows 0-3 at blocks (0,1), (2,3), (4,5), (6,7); b[4..8] rows 4-7.
        let b = [
            _mm_unpacklo_epi32(a[0], a[2]),
            _mm_unpackhi_epi32(a[0], a[2]),
            _mm_unpacklo_epi32(a[1], a[3]),
            _mm_unpackhi_epi32(a[1], a[3]),
            _mm_unpacklo_epi32(a[4], a[6]),
            _mm_unpackhi_epi32(a[4], a[6]),
            _mm_unpacklo_epi32(a[5], a[7]),
            _mm_unpackhi_epi32(a[5], a[7]),
        ];
        std::array::from_fn(|i| if i % 2 == 0 { _mm_unpacklo_epi64(b[i / 2], b[i / 2 + 4]) } else { _mm_unpackhi_epi64(b[i / 2], b[i / 2 + 4]) })
    } else {
        std::array::from_fn(|i| {
            let kb = kb0 + i.min(blocks - 1);
            // SAFETY: kb < nb, rows < n.
            let d: [u16; ROWS] = std::array::from_fn(|r| unsafe { scales.add(rows[r] * nb + kb).read() });
            // SAFETY: 8 u16 = 16 bytes.
            unsafe { _mm_loadu_si128(d.as_ptr().cast()) }
        })
    };
    c.map(|v| _mm256_cvtph_ps(v))
}

/// Most tokens one [`dot_rows`] call takes.
pub(super) const MAX_TOKENS: usize = 16;
/// Tokens that share each shifted index word: [`lookup_group`] keeps 2 x `G` accumulators.
const GROUP_TOKENS: usize = 4;

/// `out[t][r] = Σ_k W[rows[r], k] · x_t[k]` for the 16 rows and each token t < `out.len()`, from
/// the tokens' [`build_tables`] (token t's at `tables[t·len ..]`, `len` = [`tables_len`]`(K)`).
/// Each block's words are transposed once for all the tokens, and each shifted index serves a
/// group of up to [`GROUP_TOKENS`] tokens.
///
/// # Safety
/// AVX2 + FMA + F16C; every `rows[r] < w.n`; `out.len() <= MAX_TOKENS`; `tables` holds
/// `out.len()·len` floats.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dot_rows<W: LutRows>(w: &W, rows: &[usize; TILE_ROWS], tables: &[f32], out: &mut [[f32; TILE_ROWS]]) {
    let nb = w.cols() / GROUP;
    let len = tables_len(w.cols());
    let tokens = out.len();
    assert!(
        tokens <= MAX_TOKENS && tables.len() >= tokens * len && rows.iter().all(|&r| r < w.rows()),
        "q1_lut dot_rows: shapes"
    );
    let halves: [[usize; ROWS]; 2] = std::array::from_fn(|h| std::array::from_fn(|r| rows[h * ROWS + r]));
    let sets = halves.map(|h| w.row_set(&h));
    let mut total = [[_mm256_setzero_ps(); 2]; MAX_TOKENS];
    for kb0 in (0..nb).step_by(SCALE_CHUNK) {
        let blocks = SCALE_CHUNK.min(nb - kb0);
        // SAFETY: rows < n (asserted), blocks kb0 .. kb0 + blocks < nb; this function's features.
        let d = unsafe { [w.scales(&sets[0], kb0, blocks), w.scales(&sets[1], kb0, blocks)] };
        for (i, kb) in (kb0..kb0 + blocks).enumerate() {
            if kb % PREFETCH_EVERY == 0 {
                // SAFETY: AVX2; any block index is fine for a prefetch.
                unsafe {
                    w.prefetch(&sets[0], kb);
                    w.prefetch(&sets[1], kb);
                }
            }
            // SAFETY: rows < n (asserted), kb < nb.
            let words = unsafe { [w.words(&sets[0], kb), w.words(&sets[1], kb)] };
            let d = [d[0][i], d[1][i]];
            for t0 in (0..tokens).step_by(GROUP_TOKENS) {
                // SAFETY: the tables of tokens t0 .. t0 + g at block kb are inside `tables`
                // (asserted), `len` floats apart.
                let (table, total) = unsafe { (tables.as_ptr().add(t0 * len + kb * Q1_WORDS * TABLES_PER_WORD * TABLE), &mut total[t0..]) };
                // SAFETY: as above; this function's features.
                unsafe {
                    match tokens - t0 {
                        1 => lookup_group::<W, 1>(&words, table, len, d, total),
                        2 => lookup_group::<W, 2>(&words, table, len, d, total),
                        3 => lookup_group::<W, 3>(&words, table, len, d, total),
                        _ => lookup_group::<W, GROUP_TOKENS>(&words, table, len, d, total),
                    }
                }
            }
        }
    }
    for (o, t) in out.iter_mut().zip(&total) {
        // SAFETY: 16 floats.
        unsafe {
            _mm256_storeu_ps(o.as_mut_ptr(), t[0]);
            _mm256_storeu_ps(o.as_mut_ptr().add(ROWS), t[1]);
        }
    }
}

/// One block of the 16 rows (`words`, their scales `d`) against `G` tokens: each index shift
/// serves the G tokens' lookups, and `total[t][h] += d[h] · (the block's sums)`. Ternary rows
/// (`W::MASKS == 2`) add their +d mask's lookups and subtract their −d mask's in the same chains
/// (each x_k enters at most one of them, so the sums stay over exact terms ±x_k).
///
/// # Safety
/// AVX2 + FMA; `table` is token 0's tables of the block, tokens `len` floats apart, `G` of them;
/// `total.len() >= G`.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn lookup_group<W: LutRows, const G: usize>(
    words: &[[[__m256i; Q1_WORDS]; MAX_MASKS]; 2],
    mut table: *const f32,
    len: usize,
    d: [__m256; 2],
    total: &mut [[__m256; 2]],
) {
    // With one or two tokens, two chains per row set (even / odd triplets) keep the adds' latency
    // hidden; from three tokens on, their 2G chains do.
    let chain_mask = if G >= 3 { 0 } else { 1 };
    let mut acc = [[[_mm256_setzero_ps(); 2]; 2]; G];
    for c in 0..Q1_WORDS {
        // [mask][half]
        let w = [[words[0][0][c], words[1][0][c]], [words[0][1][c], words[1][1][c]]];
        macro_rules! lookup {
            ($j:literal) => {{
                let idx: [[__m256i; 2]; MAX_MASKS] =
                    std::array::from_fn(|m| std::array::from_fn(|h| _mm256_srli_epi32::<{ 3 * $j }>(w[m][h])));
                for (t, acc_t) in acc.iter_mut().enumerate() {
                    // SAFETY: table (kb·4 + c)·11 + j of token t, inside (the caller's contract).
                    let tab = unsafe { _mm256_loadu_ps(table.add(t * len + $j * TABLE)) };
                    for h in 0..2 {
                        let a = &mut acc_t[h][$j & chain_mask];
                        *a = _mm256_add_ps(*a, _mm256_permutevar8x32_ps(tab, idx[0][h]));
                        if W::MASKS == 2 {
                            *a = _mm256_sub_ps(*a, _mm256_permutevar8x32_ps(tab, idx[1][h]));
                        }
                    }
                }
            }};
        }
        lookup!(0);
        lookup!(1);
        lookup!(2);
        lookup!(3);
        lookup!(4);
        lookup!(5);
        lookup!(6);
        lookup!(7);
        lookup!(8);
        lookup!(9);
        lookup!(10);
        // SAFETY: stays inside (or one past) the tokens' tables of the block.
        table = unsafe { table.add(TABLES_PER_WORD * TABLE) };
    }
    for (acc_t, total_t) in acc.iter().zip(total.iter_mut()) {
        for h in 0..2 {
            total_t[h] = _mm256_fmadd_ps(_mm256_add_ps(acc_t[h][0], acc_t[h][1]), d[h], total_t[h]);
        }
    }
}

/// Weights per block, checked against the layout the transposition assumes.
const _: () = assert!(GROUP == Q1_WORDS * 32 && Q1_WORDS == 4);

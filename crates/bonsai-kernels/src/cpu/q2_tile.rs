//! Q2 micro kernels: `R` weight rows x `T` tokens of `Σ_k W[row, k] · x[k]`.
//!
//! Weight j of a block is `(c_j - 1)·d` for its 2-bit code c_j. The AVX2 path shifts a broadcast
//! 16-code word right by 2i per lane, masks to 2 bits, converts to f32 and forms `c·d − d` with one
//! FMA (exact: `(c − 1)·d` with c − 1 ∈ {−1, 0, 1, 2} and d an f16 value is representable in f32),
//! then one FMA per token accumulates it against x.

use super::qgemm::QuantRows;
use super::LANES;
use crate::weights::{Q2Matrix, TernaryInterleaved, GROUP, INTERLEAVE_ROWS, Q1_WORDS, Q2_WORDS};

/// Codes per u32 word.
const CODES_PER_WORD: usize = 16;

impl QuantRows for Q2Matrix {
    /// Per core the mask GEMV makes 43-45 GFLOP/s at any M (two masks per 16 weights); the panel
    /// GEMM 41-54 at M = 2, 60-76 at M = 3.
    const AVX512_PANEL_MIN_M: usize = 3;
    fn rows(&self) -> usize {
        self.n
    }
    fn cols(&self) -> usize {
        self.k
    }
    fn dequant_into(&self, row: usize, k0: usize, out: &mut [f32]) {
        let first = row * self.blocks_per_row() + k0 / GROUP;
        for (i, block_out) in out.chunks_exact_mut(GROUP).enumerate() {
            let b = first + i;
            let d = self.scales[b].to_f32();
            let words = &self.codes[b * Q2_WORDS..(b + 1) * Q2_WORDS];
            let bytes = words.iter().flat_map(|word| word.to_le_bytes());
            for (byte, out4) in bytes.zip(block_out.chunks_exact_mut(CODES_PER_BYTE)) {
                let values = &CODE_VALUE[byte as usize];
                for l in 0..CODES_PER_BYTE {
                    out4[l] = values[l] * d;
                }
            }
        }
    }
    #[cfg(target_arch = "x86_64")]
    unsafe fn avx512_pack_panel(&self, rows: &[usize; 16], k0: usize, kc: usize, stride: usize, out: &mut [f32]) {
        // SAFETY: the trait's contract (the `Avx512` level's features).
        unsafe { super::avx512::q2_pack_panel(self, rows, k0, kc, stride, out) }
    }
    #[cfg(target_arch = "x86_64")]
    unsafe fn avx512_dot_rows<const R: usize>(&self, rows: &[usize; R], x: &[f32]) -> [f32; R] {
        // SAFETY: the trait's contract (the `Avx512` level's features, x of length K).
        unsafe { super::avx512::q2_dot_rows(self, rows, x) }
    }
    #[cfg(target_arch = "x86_64")]
    unsafe fn avx2_dot_rows<const R: usize>(&self, rows: &[usize; R], x: &[f32]) -> [f32; R] {
        // SAFETY: the trait's contract (AVX2 + FMA, x of length K).
        unsafe { avx2::dot_rows_decode(self, rows, x) }
    }
    #[cfg(target_arch = "x86_64")]
    unsafe fn avx2_dot_tile<const R: usize, const T: usize>(&self, rows: &[usize; R], xs: &[&[f32]; T]) -> [[f32; T]; R] {
        // SAFETY: the trait's contract (AVX2 + FMA, x rows of length K).
        unsafe { avx2::dot_tile(self, rows, xs) }
    }
    fn scalar_dot_tile<const R: usize, const T: usize>(&self, rows: &[usize; R], xs: &[&[f32]; T]) -> [[f32; T]; R] {
        dot_tile_scalar(self, rows, xs)
    }
}

/// Ternary matrices in the interleaved two-mask layout: the CPU backend's form of a ternary Q2
/// matrix at the AVX2 level, where the table lookup of [`super::q1_lut`] runs at every M (each
/// mask a lookup in the subset tables: ~2x a Q1 matrix's lookups for 2 bits per weight); the
/// panel GEMM and the portable path read its blocks through the masks.
impl QuantRows for TernaryInterleaved {
    /// The panel GEMM from 8 tokens at the AVX-512 level, the lookup below (as Q1).
    const AVX512_PANEL_MIN_M: usize = 8;
    #[cfg(target_arch = "x86_64")]
    const AVX2_LUT: Option<super::qgemm::LutKernel<Self>> = Some(super::qgemm::LutKernel {
        tables_len: super::q1_lut::tables_len,
        build_tables: super::q1_lut::build_subset_tables,
        dot_rows: super::q1_lut::dot_rows::<TernaryInterleaved>,
    });
    /// The lookup's speed is flat in M, the panel GEMM's grows with it and passes it at about
    /// 20 tokens (docs/kernel-notes.md, "Ternary by lookup").
    const AVX2_LUT_PANEL_MIN_M: usize = 20;
    #[cfg(target_arch = "x86_64")]
    const AVX512_FEW_TOKENS_LUT: Option<super::qgemm::LutKernel<Self>> = Self::AVX2_LUT;
    fn rows(&self) -> usize {
        self.n
    }
    fn cols(&self) -> usize {
        self.k
    }
    fn dequant_into(&self, row: usize, k0: usize, out: &mut [f32]) {
        for (i, block_out) in out.chunks_exact_mut(GROUP).enumerate() {
            let (d, masks) = self.masks(row, k0 / GROUP + i);
            let d = d.to_f32();
            // Q2Matrix::weight's arithmetic: (c − 1)·d.
            for (v, c) in block_out.iter_mut().zip(ternary_code_values(&masks)) {
                *v = c * d;
            }
        }
    }
    #[cfg(target_arch = "x86_64")]
    unsafe fn avx512_pack_panel(&self, rows: &[usize; 16], k0: usize, kc: usize, stride: usize, out: &mut [f32]) {
        super::qgemm::pack_by_rows(self, rows, k0, kc, stride, out)
    }
    #[cfg(target_arch = "x86_64")]
    unsafe fn avx2_pack_panel(&self, rows: &[usize; 16], k0: usize, kc: usize, stride: usize, out: &mut [f32]) {
        match (TernaryInterleaved::whole_group(&rows[..INTERLEAVE_ROWS]), TernaryInterleaved::whole_group(&rows[INTERLEAVE_ROWS..])) {
            // SAFETY: the trait's contract (AVX2 + FMA + F16C; the shapes checked by pack_panel).
            (Some(g0), Some(g1)) => unsafe { avx2::ternary_pack_groups(self, [g0, g1], k0, kc, stride, out) },
            _ => super::qgemm::pack_by_rows(self, rows, k0, kc, stride, out),
        }
    }
    fn scalar_dot_tile<const R: usize, const T: usize>(&self, rows: &[usize; R], xs: &[&[f32]; T]) -> [[f32; T]; R] {
        let mut out = [[0.0f32; T]; R];
        for (r, &row) in rows.iter().enumerate() {
            for kb in 0..self.blocks_per_row() {
                let (d, masks) = self.masks(row, kb);
                let (d, codes) = (d.to_f32(), ternary_code_values(&masks));
                for t in 0..T {
                    // Σ (c − 1)·x_j over the block (exact terms: c − 1 ∈ {−1, 0, 1}), then d times it.
                    let xb = &xs[t][kb * GROUP..(kb + 1) * GROUP];
                    let mut lanes = [0.0f32; LANES];
                    for (j, (&x, &c)) in xb.iter().zip(&codes).enumerate() {
                        lanes[j % LANES] += c * x;
                    }
                    out[r][t] += d * lanes.iter().sum::<f32>();
                }
            }
        }
        out
    }
}

/// `BIT_VALUE[byte][l]` = bit l of `byte` as 0.0 / 1.0: a lookup per 8 mask bits keeps the
/// ternary decoding (the panel GEMM's row-by-row packing, the portable path) free of per-weight
/// bit extraction.
static BIT_VALUE: [[f32; LANES]; 256] = {
    let mut table = [[0.0f32; LANES]; 256];
    let mut byte = 0;
    while byte < 256 {
        let mut l = 0;
        while l < LANES {
            table[byte][l] = ((byte >> l) & 1) as f32;
            l += 1;
        }
        byte += 1;
    }
    table
};

/// The code values c − 1 = plus − minus ∈ {−1, 0, 1} (exact) of a block's 128 weights, from its
/// +d and −d masks, 8 at a time through [`BIT_VALUE`].
fn ternary_code_values([plus, minus]: &[[u32; Q1_WORDS]; 2]) -> [f32; GROUP] {
    let mut out = [0.0f32; GROUP];
    for (j, out8) in out.chunks_exact_mut(LANES).enumerate() {
        let byte = |words: &[u32; Q1_WORDS]| ((words[j / 4] >> (8 * (j % 4))) & 0xFF) as usize;
        let (p, m) = (&BIT_VALUE[byte(plus)], &BIT_VALUE[byte(minus)]);
        for l in 0..LANES {
            out8[l] = p[l] - m[l];
        }
    }
    out
}

/// Codes per byte.
const CODES_PER_BYTE: usize = 4;

/// `CODE_VALUE[byte][i]` = c_i − 1 for the i-th 2-bit code of `byte`: a lookup per 4 weights
/// keeps the portable path vectorisable with the baseline ISA.
static CODE_VALUE: [[f32; CODES_PER_BYTE]; 256] = {
    let mut table = [[0.0f32; CODES_PER_BYTE]; 256];
    let mut byte = 0;
    while byte < 256 {
        let mut i = 0;
        while i < CODES_PER_BYTE {
            table[byte][i] = ((byte >> (2 * i)) & 3) as f32 - 1.0;
            i += 1;
        }
        byte += 1;
    }
    table
};

/// Portable version: per block, `s = Σ (c_j − 1)·x_j` in f32 over [`LANES`] lane accumulators
/// (code values from [`CODE_VALUE`]), then `acc += d · s`.
fn dot_tile_scalar<const R: usize, const T: usize>(
    w: &Q2Matrix,
    rows: &[usize; R],
    xs: &[&[f32]; T],
) -> [[f32; T]; R] {
    let nb = w.blocks_per_row();
    let mut out = [[0.0f32; T]; R];
    for (r, &row) in rows.iter().enumerate() {
        for kb in 0..nb {
            let b = row * nb + kb;
            let d = w.scales[b].to_f32();
            let words = &w.codes[b * Q2_WORDS..(b + 1) * Q2_WORDS];
            for t in 0..T {
                let xb = &xs[t][kb * GROUP..(kb + 1) * GROUP];
                let mut lanes = [0.0f32; LANES];
                for (&word, xw) in words.iter().zip(xb.chunks_exact(CODES_PER_WORD)) {
                    let bytes = word.to_le_bytes();
                    for (pair, x8) in bytes.chunks_exact(2).zip(xw.chunks_exact(LANES)) {
                        let lo = &CODE_VALUE[pair[0] as usize];
                        let hi = &CODE_VALUE[pair[1] as usize];
                        for l in 0..CODES_PER_BYTE {
                            lanes[l] += lo[l] * x8[l];
                            lanes[l + CODES_PER_BYTE] += hi[l] * x8[l + CODES_PER_BYTE];
                        }
                    }
                }
                out[r][t] += d * lanes.iter().sum::<f32>();
            }
        }
    }
    out
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::*;
    use crate::cpu::q1_tile::hsum_avx2;
    use std::arch::x86_64::*;

    /// [`QuantRows::pack_panel`] of two whole groups of a ternary matrix: per weight k one vector
    /// of 8 rows per group, `(plus bit − minus bit)·d` (the integer difference converted exactly,
    /// so each value is [`QuantRows::dequant_into`]'s bit for bit), stored at
    /// `out[kk·stride + 8h ..]`.
    ///
    /// # Safety
    /// AVX2 + FMA + F16C; groups of rows < N; `k0`, `kc` whole blocks inside K; `out` holds
    /// `(kc − 1)·stride + 16` floats.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn ternary_pack_groups(w: &TernaryInterleaved, groups: [usize; 2], k0: usize, kc: usize, stride: usize, out: &mut [f32]) {
        let nb = w.blocks_per_row();
        assert!(k0 + kc <= w.k && out.len() >= (kc.max(1) - 1) * stride + 16, "ternary_pack_groups: shapes");
        let one = _mm256_set1_epi32(1);
        for (h, &g) in groups.iter().enumerate() {
            for kb in k0 / GROUP..(k0 + kc) / GROUP {
                let gb = g * nb + kb;
                assert!((gb + 1) * INTERLEAVE_ROWS <= w.scales.len(), "ternary_pack_groups: group past the matrix");
                // SAFETY: 8 scales and 2 x 4 x 8 words of group-block gb are inside (asserted: the
                // words are MASKS x 4 per scale).
                let (d, words) = unsafe {
                    let d = _mm256_cvtph_ps(_mm_loadu_si128(w.scales.as_ptr().add(gb * INTERLEAVE_ROWS).cast()));
                    (d, w.words.as_ptr().add(gb * 2 * Q1_WORDS * INTERLEAVE_ROWS))
                };
                for c in 0..Q1_WORDS {
                    // SAFETY: as above, word c of each mask.
                    let (plus, minus) = unsafe {
                        (
                            _mm256_loadu_si256(words.add(c * INTERLEAVE_ROWS).cast()),
                            _mm256_loadu_si256(words.add((Q1_WORDS + c) * INTERLEAVE_ROWS).cast()),
                        )
                    };
                    for i in 0..32 {
                        let shift = _mm256_set1_epi32(i as i32);
                        let p = _mm256_and_si256(_mm256_srlv_epi32(plus, shift), one);
                        let m = _mm256_and_si256(_mm256_srlv_epi32(minus, shift), one);
                        let v = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(p, m)), d);
                        let kk = kb * GROUP + 32 * c + i - k0;
                        // SAFETY: kk < kc, so 8 floats at kk·stride + 8h are inside (asserted).
                        unsafe { _mm256_storeu_ps(out.as_mut_ptr().add(kk * stride + INTERLEAVE_ROWS * h), v) };
                    }
                }
            }
        }
    }

    /// Lane i of `SHIFTS[h]` moves code `8h + i` of a word to bits 0..2.
    const fn shifts(h: i32) -> [i32; 8] {
        let mut s = [0i32; 8];
        let mut i = 0;
        while i < 8 {
            s[i] = 2 * (8 * h + i as i32);
            i += 1;
        }
        s
    }
    const SHIFTS: [[i32; 8]; 2] = [shifts(0), shifts(1)];

    /// Decode kernel: `out[r] = Σ_k W[rows[r], k] · x[k]`. Each pair of code bytes becomes 8
    /// values c − 1 by two 4-float loads from [`CODE_VALUE`] (cheaper than shift, mask, convert);
    /// they are FMA'd against x into a per-block accumulator (exact products), which one FMA by d
    /// adds to the row total. Error: per block lane γ_16, then the d FMA and the block sum, within
    /// the ops' γ_{K+128}·A bound.
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA; `x.len() == w.k`.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn dot_rows_decode<const R: usize>(
        w: &Q2Matrix,
        rows: &[usize; R],
        x: &[f32],
    ) -> [f32; R] {
        let nb = w.blocks_per_row();
        let mut total = [_mm256_setzero_ps(); R];
        let mut blocks = [0usize; R];
        for kb in 0..nb {
            for r in 0..R {
                blocks[r] = rows[r] * nb + kb;
            }
            let mut block_acc = [_mm256_setzero_ps(); R];
            for wi in 0..Q2_WORDS {
                let mut bytes = [[0u8; 4]; R];
                for r in 0..R {
                    bytes[r] = w.codes[blocks[r] * Q2_WORDS + wi].to_le_bytes();
                }
                for h in 0..2 {
                    let x_off = kb * GROUP + wi * CODES_PER_WORD + h * 8;
                    // SAFETY: x offset + 8 <= k = x length (offset < k, k a multiple of 128).
                    let xv = unsafe { _mm256_loadu_ps(x.as_ptr().add(x_off)) };
                    for r in 0..R {
                        let lo = &CODE_VALUE[bytes[r][2 * h] as usize];
                        let hi = &CODE_VALUE[bytes[r][2 * h + 1] as usize];
                        // SAFETY: each CODE_VALUE entry is 4 f32 = 16 bytes.
                        let values = unsafe {
                            _mm256_set_m128(_mm_loadu_ps(hi.as_ptr()), _mm_loadu_ps(lo.as_ptr()))
                        };
                        block_acc[r] = _mm256_fmadd_ps(values, xv, block_acc[r]);
                    }
                }
            }
            for r in 0..R {
                let d = _mm256_set1_ps(w.scales[blocks[r]].to_f32());
                total[r] = _mm256_fmadd_ps(block_acc[r], d, total[r]);
            }
        }
        let mut out = [0.0f32; R];
        for r in 0..R {
            // SAFETY: AVX2 is enabled in this function.
            out[r] = unsafe { hsum_avx2(total[r]) };
        }
        out
    }

    /// # Safety
    /// The CPU must support AVX2 and FMA; `xs[t].len() == w.k`.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn dot_tile<const R: usize, const T: usize>(
        w: &Q2Matrix,
        rows: &[usize; R],
        xs: &[&[f32]; T],
    ) -> [[f32; T]; R] {
        let nb = w.blocks_per_row();
        let code_mask = _mm256_set1_epi32(3);
        // (Plain loops instead of closures keep every intrinsic inside this AVX2 function.)
        let mut shift = [_mm256_setzero_si256(); 2];
        for h in 0..2 {
            // SAFETY: each SHIFTS entry is 8 i32 = 32 bytes; loadu needs no alignment.
            shift[h] = unsafe { _mm256_loadu_si256(SHIFTS[h].as_ptr().cast()) };
        }
        let mut acc = [[_mm256_setzero_ps(); T]; R];
        let mut blocks = [0usize; R];
        let mut d = [_mm256_setzero_ps(); R];
        let mut word = [_mm256_setzero_si256(); R];
        let mut xv = [_mm256_setzero_ps(); T];
        for kb in 0..nb {
            for r in 0..R {
                blocks[r] = rows[r] * nb + kb;
                d[r] = _mm256_set1_ps(w.scales[blocks[r]].to_f32());
            }
            for wi in 0..Q2_WORDS {
                for r in 0..R {
                    let codes = w.codes[blocks[r] * Q2_WORDS + wi];
                    word[r] = _mm256_set1_epi32(codes as i32);
                }
                for (h, shift_h) in shift.iter().enumerate() {
                    let x_off = kb * GROUP + wi * CODES_PER_WORD + h * 8;
                    for t in 0..T {
                        // SAFETY: x offset + 8 <= k = x length (offset < k, k a multiple of 128).
                        xv[t] = unsafe { _mm256_loadu_ps(xs[t].as_ptr().add(x_off)) };
                    }
                    for r in 0..R {
                        let code =
                            _mm256_and_si256(_mm256_srlv_epi32(word[r], *shift_h), code_mask);
                        let weight = _mm256_fmsub_ps(_mm256_cvtepi32_ps(code), d[r], d[r]);
                        for t in 0..T {
                            acc[r][t] = _mm256_fmadd_ps(weight, xv[t], acc[r][t]);
                        }
                    }
                }
            }
        }
        let mut out = [[0.0f32; T]; R];
        for r in 0..R {
            for t in 0..T {
                // SAFETY: AVX2 is enabled in this function.
                out[r][t] = unsafe { hsum_avx2(acc[r][t]) };
            }
        }
        out
    }
}

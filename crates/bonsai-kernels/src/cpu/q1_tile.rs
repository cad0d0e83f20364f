//! Q1 micro kernels: `R` weight rows x `T` tokens of `Σ_k W[row, k] · x[k]`.
//!
//! Weight j of a block is `+d` when its bit is 1, `-d` when 0. The AVX2 path turns 8 bits into
//! 8 signed copies of `d` without a table: broadcast the 32-bit word, shift lane i left so that
//! bit i lands in the sign position, keep only the (inverted) sign bit and xor it into `d`. One
//! FMA per token then accumulates `±d · x` (exact product, one rounding per lane add).
//!
//! Decode (one token) uses `Σ ±x_j = 2·Σ_{bit=1} x_j − Σ_j x_j` instead: the shifted word is
//! itself a `blendv` mask (it selects on the sign bit), so each 8 weights cost a shift, a blend
//! and an add; the block's x sum is shared by the rows of the tile. Error per block lane:
//! <= (3γ_16 + u)·Σ|x|, then one FMA by d per block: inside the γ_{K+128}·A bound of the ops.

use super::qgemm::QuantRows;
use super::LANES;
use crate::weights::{Q1Matrix, GROUP, Q1_WORDS};

impl QuantRows for Q1Matrix {
    /// Per core the mask GEMV makes 110-135 GFLOP/s at any M; the panel GEMM 80-100 at M = 4,
    /// 113-118 at M = 6, 130-137 at M = 8.
    const AVX512_PANEL_MIN_M: usize = 8;
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
            let words = &self.bits[b * Q1_WORDS..(b + 1) * Q1_WORDS];
            let bytes = words.iter().flat_map(|word| word.to_le_bytes());
            for (byte, out8) in bytes.zip(block_out.chunks_exact_mut(LANES)) {
                let flip = &SIGN_FLIP[byte as usize];
                for l in 0..LANES {
                    out8[l] = f32::from_bits(d.to_bits() ^ flip[l]);
                }
            }
        }
    }
    #[cfg(target_arch = "x86_64")]
    unsafe fn avx512_pack_panel(&self, rows: &[usize; 16], k0: usize, kc: usize, stride: usize, out: &mut [f32]) {
        // SAFETY: the trait's contract (the `Avx512` level's features).
        unsafe { super::avx512::q1_pack_panel(self, rows, k0, kc, stride, out) }
    }
    #[cfg(target_arch = "x86_64")]
    unsafe fn avx512_dot_rows<const R: usize>(&self, rows: &[usize; R], x: &[f32]) -> [f32; R] {
        // SAFETY: the trait's contract (the `Avx512` level's features, x of length K).
        unsafe { super::avx512::q1_dot_rows(self, rows, x) }
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

/// `SIGN_FLIP[byte][i]` is x's sign-bit mask for weight bit i of `byte`: set when the bit is 0
/// (weight −d). A table lookup per 8 weights keeps the portable path free of per-lane variable
/// shifts, so LLVM vectorises it with the baseline ISA (SSE2 / NEON).
static SIGN_FLIP: [[u32; 8]; 256] = {
    let mut table = [[0u32; 8]; 256];
    let mut byte = 0;
    while byte < 256 {
        let mut i = 0;
        while i < 8 {
            if (byte >> i) & 1 == 0 {
                table[byte][i] = 1 << 31;
            }
            i += 1;
        }
        byte += 1;
    }
    table
};

/// Portable version: per block, `s = Σ ±x_j` in f32 over [`LANES`] lane accumulators (the sign
/// applied by xor-ing x's sign bit from [`SIGN_FLIP`]), then `acc += d · s`.
fn dot_tile_scalar<const R: usize, const T: usize>(
    w: &Q1Matrix,
    rows: &[usize; R],
    xs: &[&[f32]; T],
) -> [[f32; T]; R] {
    let nb = w.blocks_per_row();
    let mut out = [[0.0f32; T]; R];
    for (r, &row) in rows.iter().enumerate() {
        for kb in 0..nb {
            let b = row * nb + kb;
            let d = w.scales[b].to_f32();
            let words = &w.bits[b * Q1_WORDS..(b + 1) * Q1_WORDS];
            for t in 0..T {
                let xb = &xs[t][kb * GROUP..(kb + 1) * GROUP];
                let mut lanes = [0.0f32; LANES];
                for (&word, xw) in words.iter().zip(xb.chunks_exact(32)) {
                    for (byte, x8) in word.to_le_bytes().iter().zip(xw.chunks_exact(LANES)) {
                        let flip = &SIGN_FLIP[*byte as usize];
                        for l in 0..LANES {
                            lanes[l] += f32::from_bits(x8[l].to_bits() ^ flip[l]);
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
    use std::arch::x86_64::*;

    /// Lane i of `SHIFTS[g]` moves bit `8g + i` of a word to bit 31.
    const fn shifts(g: i32) -> [i32; 8] {
        let mut s = [0i32; 8];
        let mut i = 0;
        while i < 8 {
            s[i] = 31 - (8 * g + i as i32);
            i += 1;
        }
        s
    }
    const SHIFTS: [[i32; 8]; 4] = [shifts(0), shifts(1), shifts(2), shifts(3)];

    /// # Safety
    /// The CPU must support AVX2 and FMA; `xs[t].len() == w.k`.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn dot_tile<const R: usize, const T: usize>(
        w: &Q1Matrix,
        rows: &[usize; R],
        xs: &[&[f32]; T],
    ) -> [[f32; T]; R] {
        let nb = w.blocks_per_row();
        let sign_bit = _mm256_set1_epi32(i32::MIN);
        // (Plain loops instead of closures keep every intrinsic inside this AVX2 function.)
        let mut shift = [_mm256_setzero_si256(); 4];
        for g in 0..4 {
            // SAFETY: each SHIFTS entry is 8 i32 = 32 bytes; loadu needs no alignment.
            shift[g] = unsafe { _mm256_loadu_si256(SHIFTS[g].as_ptr().cast()) };
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
            for wi in 0..Q1_WORDS {
                for r in 0..R {
                    let bits = w.bits[blocks[r] * Q1_WORDS + wi];
                    word[r] = _mm256_set1_epi32(bits as i32);
                }
                for (g, shift_g) in shift.iter().enumerate() {
                    let x_off = kb * GROUP + wi * 32 + g * 8;
                    for t in 0..T {
                        // SAFETY: x offset + 8 <= k = x length (offset < k, k a multiple of 128).
                        xv[t] = unsafe { _mm256_loadu_ps(xs[t].as_ptr().add(x_off)) };
                    }
                    for r in 0..R {
                        let moved = _mm256_sllv_epi32(word[r], *shift_g);
                        // Sign bit set where the weight bit is 0, i.e. where the weight is -d.
                        let negate = _mm256_andnot_si256(moved, sign_bit);
                        let signed_d = _mm256_xor_ps(d[r], _mm256_castsi256_ps(negate));
                        for t in 0..T {
                            acc[r][t] = _mm256_fmadd_ps(signed_d, xv[t], acc[r][t]);
                        }
                    }
                }
            }
        }
        let mut out = [[0.0f32; T]; R];
        for r in 0..R {
            for t in 0..T {
                // SAFETY: AVX2 is enabled in this function.
                out[r][t] = unsafe { hsum(acc[r][t]) };
            }
        }
        out
    }

    /// Decode kernel: `out[r] = Σ_k W[rows[r], k] · x[k]` via masked sums (see the module doc).
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA; `x.len() == w.k`.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn dot_rows_decode<const R: usize>(
        w: &Q1Matrix,
        rows: &[usize; R],
        x: &[f32],
    ) -> [f32; R] {
        let nb = w.blocks_per_row();
        let two = _mm256_set1_ps(2.0);
        let mut shift = [_mm256_setzero_si256(); 4];
        for g in 0..4 {
            // SAFETY: each SHIFTS entry is 8 i32 = 32 bytes; loadu needs no alignment.
            shift[g] = unsafe { _mm256_loadu_si256(SHIFTS[g].as_ptr().cast()) };
        }
        let mut total = [_mm256_setzero_ps(); R];
        let mut blocks = [0usize; R];
        let mut word = [_mm256_setzero_si256(); R];
        for kb in 0..nb {
            for r in 0..R {
                blocks[r] = rows[r] * nb + kb;
            }
            let mut x_sum = _mm256_setzero_ps();
            let mut selected = [_mm256_setzero_ps(); R];
            for wi in 0..Q1_WORDS {
                for r in 0..R {
                    let bits = w.bits[blocks[r] * Q1_WORDS + wi];
                    word[r] = _mm256_set1_epi32(bits as i32);
                }
                for (g, shift_g) in shift.iter().enumerate() {
                    let x_off = kb * GROUP + wi * 32 + g * 8;
                    // SAFETY: x offset + 8 <= k = x length (offset < k, k a multiple of 128).
                    let xv = unsafe { _mm256_loadu_ps(x.as_ptr().add(x_off)) };
                    x_sum = _mm256_add_ps(x_sum, xv);
                    for r in 0..R {
                        // Lane i's sign bit is weight bit i: blendv keeps x where it is 1.
                        let mask = _mm256_castsi256_ps(_mm256_sllv_epi32(word[r], *shift_g));
                        selected[r] = _mm256_add_ps(
                            selected[r],
                            _mm256_blendv_ps(_mm256_setzero_ps(), xv, mask),
                        );
                    }
                }
            }
            for r in 0..R {
                let d = _mm256_set1_ps(w.scales[blocks[r]].to_f32());
                let signed_sum = _mm256_fmsub_ps(selected[r], two, x_sum);
                total[r] = _mm256_fmadd_ps(signed_sum, d, total[r]);
            }
        }
        let mut out = [0.0f32; R];
        for r in 0..R {
            // SAFETY: AVX2 is enabled in this function.
            out[r] = unsafe { hsum(total[r]) };
        }
        out
    }

    /// Sum of the 8 lanes (pairwise: 3 levels of additions).
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2,fma")]
    pub(crate) unsafe fn hsum(v: __m256) -> f32 {
        let quad = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        let pair = _mm_add_ps(quad, _mm_movehl_ps(quad, quad));
        let one = _mm_add_ss(pair, _mm_shuffle_ps(pair, pair, 1));
        _mm_cvtss_f32(one)
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) use avx2::hsum as hsum_avx2;

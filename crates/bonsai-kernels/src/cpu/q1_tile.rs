//! Q1 micro kernels: `R` weight rows x `T` tokens of `Σ_k W[row, k] · x[k]`.
//!
//! Weight j of a block is `+d` when its bit is 1, `-d` when 0. The portable kernel applies the
//! sign by xor-ing x's sign bit from a per-byte table, per block `s = Σ ±x_j` over [`LANES`]
//! lanes, then `acc += d · s`. The AVX2 level runs the table lookup of [`super::q1_lut`] at every
//! M (three weights per lookup, eight rows per instruction; it replaced this file's AVX2
//! shift-and-blend tiles, ~2x slower per token, and beats the panel GEMM); the AVX-512 kernels are
//! in [`super::avx512`]. The portable paths read either layout ([`Q1Matrix`], [`Q1Interleaved`])
//! through one block accessor.

use half::f16;

use super::qgemm::QuantRows;
use super::LANES;
use crate::weights::{Q1Interleaved, Q1Matrix, GROUP, Q1_WORDS};

/// A block (scale and 4 sign words) of a Q1 row, in either layout: what the portable paths read.
trait Q1Blocks {
    fn blocks_per_row(&self) -> usize;
    fn block(&self, row: usize, kb: usize) -> (f16, [u32; Q1_WORDS]);
}

impl Q1Blocks for Q1Matrix {
    fn blocks_per_row(&self) -> usize {
        Q1Matrix::blocks_per_row(self)
    }
    fn block(&self, row: usize, kb: usize) -> (f16, [u32; Q1_WORDS]) {
        Q1Matrix::block(self, row, kb)
    }
}

impl Q1Blocks for Q1Interleaved {
    fn blocks_per_row(&self) -> usize {
        Q1Interleaved::blocks_per_row(self)
    }
    fn block(&self, row: usize, kb: usize) -> (f16, [u32; Q1_WORDS]) {
        Q1Interleaved::block(self, row, kb)
    }
}

/// [`QuantRows::dequant_into`] of either layout: each weight is ±d exactly (d's sign bit flipped
/// by [`SIGN_FLIP`]).
fn dequant_blocks(w: &impl Q1Blocks, row: usize, k0: usize, out: &mut [f32]) {
    for (i, block_out) in out.chunks_exact_mut(GROUP).enumerate() {
        let (d, words) = w.block(row, k0 / GROUP + i);
        let d = d.to_f32();
        let bytes = words.iter().flat_map(|word| word.to_le_bytes());
        for (byte, out8) in bytes.zip(block_out.chunks_exact_mut(LANES)) {
            let flip = &SIGN_FLIP[byte as usize];
            for l in 0..LANES {
                out8[l] = f32::from_bits(d.to_bits() ^ flip[l]);
            }
        }
    }
}

/// Both layouts run the same kernels: the table lookup (at every M at the AVX2 level, below
/// [`QuantRows::AVX512_PANEL_MIN_M`] at the AVX-512 level), the panel GEMM from there, packing the
/// layout's blocks, and the portable paths at the scalar level.
macro_rules! q1_quant_rows {
    ($($matrix:ty),+) => {$(
        impl QuantRows for $matrix {
            /// From 8 tokens the panel GEMM beats a per-token GEMV at the AVX-512 level (kernel
            /// notes, "Few tokens").
            const AVX512_PANEL_MIN_M: usize = 8;
            #[cfg(target_arch = "x86_64")]
            const AVX2_LUT: Option<super::qgemm::LutKernel<Self>> = Some(super::qgemm::LutKernel {
                tables_len: super::q1_lut::tables_len,
                build_tables: super::q1_lut::build_tables,
                dot_rows: super::q1_lut::dot_rows::<$matrix>,
            });
            #[cfg(target_arch = "x86_64")]
            const AVX512_FEW_TOKENS_LUT: Option<super::qgemm::LutKernel<Self>> = Self::AVX2_LUT;
            fn rows(&self) -> usize {
                self.n
            }
            fn cols(&self) -> usize {
                self.k
            }
            fn dequant_into(&self, row: usize, k0: usize, out: &mut [f32]) {
                dequant_blocks(self, row, k0, out)
            }
            #[cfg(target_arch = "x86_64")]
            unsafe fn avx512_pack_panel(&self, rows: &[usize; 16], k0: usize, kc: usize, stride: usize, out: &mut [f32]) {
                // SAFETY: the trait's contract (the `Avx512` level's features).
                unsafe { super::avx512::q1_pack_panel(&|row, kb| Q1Blocks::block(self, row, kb), rows, k0, kc, stride, out) }
            }
            fn scalar_dot_tile<const R: usize, const T: usize>(&self, rows: &[usize; R], xs: &[&[f32]; T]) -> [[f32; T]; R] {
                dot_tile_scalar(self, rows, xs)
            }
        }
    )+};
}
q1_quant_rows!(Q1Matrix, Q1Interleaved);

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
    w: &impl Q1Blocks,
    rows: &[usize; R],
    xs: &[&[f32]; T],
) -> [[f32; T]; R] {
    let nb = w.blocks_per_row();
    let mut out = [[0.0f32; T]; R];
    for (r, &row) in rows.iter().enumerate() {
        for kb in 0..nb {
            let (d, words) = w.block(row, kb);
            let d = d.to_f32();
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
    use std::arch::x86_64::*;

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

//! GGUF quantized blocks -> the kernels' structure-of-arrays layout (`bonsai_kernels::weights`).
//!
//! ```text
//! Q1_0        (18 B): f16 d | qs[16]   weight j = bit j%8 of qs[j/8]  -> LE u32 word j/32, bit j%32
//! TQ2_0_g128  (34 B): qs[32] | f16 d   code  j = bits 2(j%4) of qs[j/4] -> LE u32 word j/16
//!                     codes 00 -1, 01 0, 10 +1, 11 0  -> normalised 0, 1, 2, 1 (11 -> 01)
//! PrismML Q2_0(34 B): f16 d | qs[32]   code c -> (c-1)·d, the kernel code set as it is
//! Q2_0 g64    (18 B): f16 d | qs[16]   upstream llama.cpp's; read when the two blocks of every
//!                     128-group share their scale (then exactly a PrismML block)
//! PTQ1_0      (28 B): qs[24] qh[2] | d  base-3 trits in the fork's element order  } decoded to
//! TQ1_0       (54 B): qs[48] qh[4] | d  256 weights, base-3 trits                 } levels, each
//! TQ2_0       (66 B): qs[64] | d        256 weights, interleaved 2-bit codes     } 256-group split
//!                                                                                   into two 128s
//! ```
//! Reading the byte array little-endian four bytes at a time puts weight j at exactly the bit the
//! kernel layout wants, so conversion is a re-split of scales and payload plus (TQ2 only) one
//! bitwise code fix.

use bonsai_gguf::{decode_levels, TensorType};
use bonsai_kernels::weights::{code_three_lanes, Q1Matrix, Q2Matrix, WeightError, GROUP, Q1_WORDS, Q2_WORDS};
use half::f16;
use rayon::prelude::*;

/// Bytes of one Q1_0 block: f16 scale + 128 sign bits.
pub const Q1_0_BLOCK_BYTES: usize = 2 + GROUP / 8;
/// Bytes of one 2-bit g128 block (either byte order): f16 scale + 128 two-bit codes.
pub const Q2_G128_BLOCK_BYTES: usize = 2 + GROUP / 4;
const SCALE_BYTES: usize = 2;

/// Where a 2-bit block keeps its scale, and which code set it uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TwoBitBlocks {
    /// TQ2_0_g128: codes first, scale last, ternary codes {-1, 0, +1, 0}.
    TernaryScaleLast,
    /// PrismML Q2_0 g128: scale first, codes c -> c - 1.
    PrismScaleFirst,
    /// Upstream Q2_0 g64 (scale first, codes c -> c - 1) whose block pairs share a scale.
    PairedG64,
}

#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    #[error("{name}: {got} bytes of blocks, expected {expected} for [{n} x {k}]")]
    Length { name: String, n: usize, k: usize, expected: usize, got: usize },
    #[error("{name}: {source}")]
    Shape { name: String, source: WeightError },
    #[error(
        "{name}: Q2_0 with 64-weight groups whose two blocks in 128-group {group} have different scales; \
         the runtime runs 128-weight groups only (`bonsai quantize IN OUT --type pq2_0 --allow-lossy` re-quantizes it)"
    )]
    UnpairedG64 { name: String, group: usize },
    #[error("{name}: {detail}")]
    Blocks { name: String, detail: String },
}

/// Rows decoded per parallel task when transcoding through levels.
const ROWS_PER_TASK: usize = 16;

/// Blocks of a ternary type whose scales and levels the Q2 code set holds as they are (PTQ1_0,
/// TQ1_0, TQ2_0: levels -1..=2 -> codes 0..=3; a 256-weight group becomes two 128-weight groups
/// with its scale) of a row-major `[n, k]` matrix -> `Q2Matrix`, exactly.
pub fn q2_from_level_blocks(name: &str, ty: TensorType, n: usize, k: usize, bytes: &[u8]) -> Result<Q2Matrix, ConvertError> {
    let group = ty.block_elems();
    if k % group != 0 || k % GROUP != 0 || k == 0 {
        return Err(ConvertError::Blocks { name: name.into(), detail: format!("K = {k} is not a multiple of the {group}-weight {} block and of {GROUP}", ty.name()) });
    }
    let row_bytes = k / group * ty.block_bytes();
    let expected = n * row_bytes;
    if bytes.len() != expected {
        return Err(ConvertError::Length { name: name.into(), n, k, expected, got: bytes.len() });
    }
    let blocks_per_row = k / GROUP;
    let mut scales = vec![f16::ZERO; n * blocks_per_row];
    let mut codes = vec![0u32; n * blocks_per_row * Q2_WORDS];
    let task_rows = |rows: &[u8], scales: &mut [f16], codes: &mut [u32]| -> Result<(), ConvertError> {
        let blocks = |detail: String| ConvertError::Blocks { name: name.into(), detail };
        let levels = decode_levels(ty, rows).map_err(|e| blocks(e.to_string()))?;
        let levels = levels.regroup(GROUP).map_err(|e| blocks(e.to_string()))?;
        scales.copy_from_slice(&levels.scales);
        for (word, lanes) in codes.iter_mut().zip(levels.levels.chunks_exact(16)) {
            // Levels are -1..=2 in every type routed here, so level + 1 is a 2-bit code.
            *word = lanes.iter().enumerate().fold(0u32, |w, (j, &l)| w | (((l + 1) as u32) << (2 * j)));
        }
        Ok(())
    };
    bytes
        .par_chunks(row_bytes * ROWS_PER_TASK)
        .zip(scales.par_chunks_mut(blocks_per_row * ROWS_PER_TASK))
        .zip(codes.par_chunks_mut(blocks_per_row * Q2_WORDS * ROWS_PER_TASK))
        .try_for_each(|((rows, s), c)| task_rows(rows, s, c))?;
    Q2Matrix::new(n, k, scales, codes).map_err(|source| ConvertError::Shape { name: name.into(), source })
}

fn expect_len(name: &str, n: usize, k: usize, block_bytes: usize, bytes: &[u8]) -> Result<usize, ConvertError> {
    if k % GROUP != 0 || k == 0 {
        return Err(ConvertError::Shape { name: name.into(), source: WeightError::KNotGroupMultiple { k } });
    }
    let n_blocks = n * (k / GROUP);
    let expected = n_blocks * block_bytes;
    if bytes.len() != expected {
        return Err(ConvertError::Length { name: name.into(), n, k, expected, got: bytes.len() });
    }
    Ok(n_blocks)
}

fn le_words(payload: &[u8], out: &mut Vec<u32>) {
    out.extend(payload.chunks_exact(4).map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]])));
}

fn scale(bytes: &[u8]) -> f16 {
    f16::from_le_bytes([bytes[0], bytes[1]])
}

/// Q1_0 blocks of a row-major `[n, k]` matrix -> `Q1Matrix`.
pub fn q1_from_q1_0_blocks(name: &str, n: usize, k: usize, bytes: &[u8]) -> Result<Q1Matrix, ConvertError> {
    let n_blocks = expect_len(name, n, k, Q1_0_BLOCK_BYTES, bytes)?;
    let mut scales = Vec::with_capacity(n_blocks);
    let mut bits = Vec::with_capacity(n_blocks * Q1_WORDS);
    for block in bytes.chunks_exact(Q1_0_BLOCK_BYTES) {
        scales.push(scale(&block[..SCALE_BYTES]));
        le_words(&block[SCALE_BYTES..], &mut bits);
    }
    Q1Matrix::new(n, k, scales, bits).map_err(|source| ConvertError::Shape { name: name.into(), source })
}

/// Maps TQ2 code 11 (a second zero) to 01, leaving 00, 01, 10 as they are: in the kernel code
/// set 00 -> -d, 01 -> 0, 10 -> +d then agree with TQ2's meaning.
pub fn normalise_ternary_codes(word: u32) -> u32 {
    word & !(code_three_lanes(word) << 1)
}

/// 2-bit g128 blocks of a row-major `[n, k]` matrix -> `Q2Matrix` in the kernel code set.
pub fn q2_from_two_bit_blocks(
    name: &str,
    layout: TwoBitBlocks,
    n: usize,
    k: usize,
    bytes: &[u8],
) -> Result<Q2Matrix, ConvertError> {
    // A pair of g64 blocks has the g128 block's bytes plus a second copy of the scale.
    let block_bytes = if layout == TwoBitBlocks::PairedG64 { Q2_G128_BLOCK_BYTES + SCALE_BYTES } else { Q2_G128_BLOCK_BYTES };
    let n_blocks = expect_len(name, n, k, block_bytes, bytes)?;
    let mut scales = Vec::with_capacity(n_blocks);
    let mut codes = Vec::with_capacity(n_blocks * Q2_WORDS);
    for (group, block) in bytes.chunks_exact(block_bytes).enumerate() {
        match layout {
            TwoBitBlocks::TernaryScaleLast => {
                let (payload, d) = block.split_at(GROUP / 4);
                scales.push(scale(d));
                let start = codes.len();
                le_words(payload, &mut codes);
                for w in &mut codes[start..] {
                    *w = normalise_ternary_codes(*w);
                }
            }
            TwoBitBlocks::PrismScaleFirst => {
                let (d, payload) = block.split_at(SCALE_BYTES);
                scales.push(scale(d));
                le_words(payload, &mut codes);
            }
            TwoBitBlocks::PairedG64 => {
                let (first, second) = block.split_at(block_bytes / 2);
                // Equal bits, so an f16 NaN pair is not "different" and the scale is exactly one.
                if first[..SCALE_BYTES] != second[..SCALE_BYTES] {
                    return Err(ConvertError::UnpairedG64 { name: name.into(), group });
                }
                scales.push(scale(first));
                le_words(&first[SCALE_BYTES..], &mut codes);
                le_words(&second[SCALE_BYTES..], &mut codes);
            }
        }
    }
    Q2Matrix::new(n, k, scales, codes).map_err(|source| ConvertError::Shape { name: name.into(), source })
}

#[cfg(test)]
#[path = "weights_tests.rs"]
mod tests;

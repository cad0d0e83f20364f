//! Quantized weight matrices on the device. Scales are the host's f16 bits unchanged; the payload
//! is the host's bits/codes permuted once at upload into the device layout every CUDA kernel
//! reads (one device layout per quant type, no second copy). The layout is defined here and, for
//! the kernels, in `ops/matmul_q1/weight_layout.cu` (the two must agree; the tests below pin the
//! mapping to the mma.sync fragment table the tensor-core GEMV relies on):
//!
//! ```text
//! a row's group of 128 weights = 4 lane words per bit plane (Q1: sign; Q2: plane 0 = bit 0 of
//! the code c, plane 1 = bit 1), lane t = lane % 4 of an m16n8k16 A fragment:
//!   weight j = 16 s + 8 h + 2 t + e  (k16 step s, half h, lane t, e = 0/1), pair q = 2 s + h
//!   lives in lane word t at bit 15 - q (e = 0) and bit 31 - q (e = 1)
//! words of a row, blocks of nb = 4 groups when groups_per_row % 4 == 0 (else nb = 1):
//!   word(group, t, plane) = b0 * 4 * planes + (t * nb + group - b0) * planes + plane,
//!   b0 = group - group % nb, relative to the row's first word (row * groups_per_row * 4 * planes)
//! ```
//!
//! The host `Q1Matrix` / `Q2Matrix` and their `weight()` stay the definition of every value.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};
use rayon::prelude::*;

use super::error::KernelError;
use crate::weights::{Q1Matrix, Q2Matrix, QMatrix, GROUP, Q1_WORDS, Q2_WORDS};

/// Groups per layout block when a row's group count is a multiple of it (LAYOUT_BLOCK_GROUPS in
/// weight_layout.cu).
pub const LAYOUT_BLOCK_GROUPS: usize = 4;
/// Lane words per group and plane: the 4 lanes of an mma fragment quad (LAYOUT_LANES).
pub const LAYOUT_LANES: usize = 4;
/// Weights a lane word holds: 16 pairs.
const WEIGHTS_PER_LANE_WORD: usize = GROUP / LAYOUT_LANES;

/// Groups per block for rows of `groups_per_row` groups.
pub fn layout_block_groups(groups_per_row: usize) -> usize {
    if groups_per_row % LAYOUT_BLOCK_GROUPS == 0 {
        LAYOUT_BLOCK_GROUPS
    } else {
        1
    }
}

/// Word offset within its row of `plane` of lane word `t` of `group` (`planes` = bits per weight).
pub fn layout_word(
    planes: usize,
    groups_per_row: usize,
    group: usize,
    t: usize,
    plane: usize,
) -> usize {
    let nb = layout_block_groups(groups_per_row);
    let b0 = group - group % nb;
    b0 * LAYOUT_LANES * planes + (t * nb + (group - b0)) * planes + plane
}

/// (lane word, bit) of weight `j` (0..128) of a group.
pub fn layout_lane_bit(j: usize) -> (usize, u32) {
    let q = 2 * (j / 16) + (j / 8) % 2;
    ((j / 2) % LAYOUT_LANES, (15 - q + 16 * (j % 2)) as u32)
}

/// Weight index within the group held by `bit` of lane word `t` (inverse of [`layout_lane_bit`]).
pub fn layout_weight(t: usize, bit: u32) -> usize {
    let q = 15 - (bit as usize % 16);
    16 * (q / 2) + 8 * (q % 2) + 2 * t + bit as usize / 16
}

/// The code (Q1: sign bit; Q2: c) of weight `j` of a natural-layout group starting at `words`.
fn natural_code(planes: usize, words: &[u32], j: usize) -> u32 {
    let per_word = 32 / planes;
    (words[j / per_word] >> (planes * (j % per_word))) & ((1 << planes) - 1)
}

/// Host layout (crate::weights) -> device layout, for `n` rows of `k` weights.
fn permute(planes: usize, k: usize, natural: &[u32]) -> Vec<u32> {
    let gpr = k / GROUP;
    let group_words = LAYOUT_LANES * planes;
    let mut device = vec![0u32; natural.len()];
    // Rows in parallel: a model's upload permutes ~10^10 weights.
    device.par_chunks_mut(gpr * group_words).zip(natural.par_chunks(gpr * group_words)).for_each(
        |(row_device, row_natural)| {
            for group in 0..gpr {
                let words = &row_natural[group * group_words..(group + 1) * group_words];
                for j in 0..GROUP {
                    let code = natural_code(planes, words, j);
                    let (t, bit) = layout_lane_bit(j);
                    for plane in 0..planes {
                        row_device[layout_word(planes, gpr, group, t, plane)] |=
                            ((code >> plane) & 1) << bit;
                    }
                }
            }
        },
    );
    device
}

/// Device layout -> host layout (the inverse of [`permute`]; tests and debugging).
fn unpermute(planes: usize, k: usize, device: &[u32]) -> Vec<u32> {
    let gpr = k / GROUP;
    let group_words = LAYOUT_LANES * planes;
    let per_word = 32 / planes;
    let mut natural = vec![0u32; device.len()];
    for (row_device, row_natural) in
        device.chunks(gpr * group_words).zip(natural.chunks_mut(gpr * group_words))
    {
        for group in 0..gpr {
            for t in 0..LAYOUT_LANES {
                for bit in 0..WEIGHTS_PER_LANE_WORD as u32 {
                    let j = layout_weight(t, bit);
                    let code = (0..planes)
                        .map(|p| {
                            ((row_device[layout_word(planes, gpr, group, t, p)] >> bit) & 1) << p
                        })
                        .fold(0, |a, b| a | b);
                    row_natural[group * group_words + j / per_word] |=
                        code << (planes * (j % per_word));
                }
            }
        }
    }
    natural
}

/// A Q1 matrix's sign bits in the device layout.
pub fn device_q1_bits(m: &Q1Matrix) -> Vec<u32> {
    debug_assert_eq!(LAYOUT_LANES, Q1_WORDS);
    permute(1, m.k, &m.bits)
}

/// A Q2 matrix's codes in the device layout (two bit planes).
pub fn device_q2_codes(m: &Q2Matrix) -> Vec<u32> {
    debug_assert_eq!(2 * LAYOUT_LANES, Q2_WORDS);
    permute(2, m.k, &m.codes)
}

/// Inverse of [`device_q1_bits`]: the host layout's words of `k`-wide rows.
pub fn host_q1_bits(k: usize, device: &[u32]) -> Vec<u32> {
    unpermute(1, k, device)
}

/// Inverse of [`device_q2_codes`].
pub fn host_q2_codes(k: usize, device: &[u32]) -> Vec<u32> {
    unpermute(2, k, device)
}

/// A 1-bit matrix on the device: `scales[b]` are f16 bits, `bits` its signs in the device layout.
pub struct GpuQ1Matrix {
    pub n: usize,
    pub k: usize,
    pub scales: CudaSlice<u16>,
    pub bits: CudaSlice<u32>,
}

/// A 2-bit matrix on the device: `scales[b]` are f16 bits, `codes` in the device layout.
pub struct GpuQ2Matrix {
    pub n: usize,
    pub k: usize,
    pub scales: CudaSlice<u16>,
    pub codes: CudaSlice<u32>,
    /// No code 3 ([`Q2Matrix::is_ternary`]): the binary GEMV may serve it.
    pub ternary: bool,
}

/// Either device matrix.
pub enum GpuQMatrix {
    Q1(GpuQ1Matrix),
    Q2(GpuQ2Matrix),
}

impl GpuQMatrix {
    pub fn n(&self) -> usize {
        match self {
            GpuQMatrix::Q1(m) => m.n,
            GpuQMatrix::Q2(m) => m.n,
        }
    }
    pub fn k(&self) -> usize {
        match self {
            GpuQMatrix::Q1(m) => m.k,
            GpuQMatrix::Q2(m) => m.k,
        }
    }
}

/// Copies `matrix` to the device on `stream` (asynchronously; later work on the stream sees it).
pub fn upload(matrix: &QMatrix, stream: &Arc<CudaStream>) -> Result<GpuQMatrix, KernelError> {
    Ok(match matrix {
        QMatrix::Q1(m) => GpuQMatrix::Q1(upload_q1(m, stream)?),
        QMatrix::Q2(m) => GpuQMatrix::Q2(upload_q2(m, stream)?),
    })
}

pub fn upload_q1(m: &Q1Matrix, stream: &Arc<CudaStream>) -> Result<GpuQ1Matrix, KernelError> {
    let what = ["uploading Q1 scales", "uploading Q1 sign bits"];
    let (scales, bits) = upload_parts(stream, &m.scales, &device_q1_bits(m), what)?;
    Ok(GpuQ1Matrix { n: m.n, k: m.k, scales, bits })
}

pub fn upload_q2(m: &Q2Matrix, stream: &Arc<CudaStream>) -> Result<GpuQ2Matrix, KernelError> {
    let what = ["uploading Q2 scales", "uploading Q2 codes"];
    let (scales, codes) = upload_parts(stream, &m.scales, &device_q2_codes(m), what)?;
    Ok(GpuQ2Matrix { n: m.n, k: m.k, scales, codes, ternary: m.is_ternary() })
}

/// A matrix's f16 scales (as their bits) and its payload words in device layout, copied to the
/// device (`what`: the two copies, named in errors).
fn upload_parts(
    stream: &Arc<CudaStream>,
    scales: &[half::f16],
    words: &[u32],
    what: [&'static str; 2],
) -> Result<(CudaSlice<u16>, CudaSlice<u32>), KernelError> {
    let scale_bits: &[u16] = bytemuck::cast_slice(scales);
    let scales = stream.clone_htod(scale_bits).map_err(KernelError::driver(what[0]))?;
    Ok((scales, stream.clone_htod(words).map_err(KernelError::driver(what[1]))?))
}

#[cfg(test)]
#[path = "weights_tests.rs"]
mod tests;

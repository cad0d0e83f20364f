//! The 2-bit formats behind GGUF id 42 (and 142). All pack 4 codes per byte, LSB first:
//!
//! ```text
//! weight j -> qs[j/4] bits 2·(j%4) .. 2·(j%4)+1
//! TQ2_0_g128   [ qs[0..32] ][ d f16 ]   34 B / 128   code 00 -1, 01 0, 10 +1, 11 0
//! Q2_0 g128    [ d f16 ][ qs[0..32] ]   34 B / 128   code c -> (c-1): -1, 0, +1, +2
//! Q2_0 g64     [ d f16 ][ qs[0..16] ]   18 B / 64    code c -> (c-1): -1, 0, +1, +2
//! ```
//! The codes for -1, 0, +1 are the same in every layout; only code 11 differs, so one
//! quantizer serves all three (it never emits 11).
//!
//! Quantizer (ternary, absmax; the fork's `quantize_row_pq2_0_ref` / `quantize_row_q2_0_ref` step
//! for step in f32): a = max |x|, id = 1/a, code = clamp(lroundf(x·id) + 1, 0, 3), d = a rounded
//! to f16. |x·id| <= 1 up to rounding, so this is the 0.5 threshold: |x| >= a/2 -> ±1, else 0, and
//! code 11 is never written. Per-element error <= a/2 + |a - d| (<= a·(1/2 + 2^-11) for normal
//! f16 d); exact for inputs already in {-d, 0, +d}. An all-zero group gets d = 0 (codes 01).

use super::trits::{absmax_scale, round_level};
use super::TwoBitLayout;
use half::f16;

pub(super) const G128_BLOCK_ELEMS: usize = 128;
pub(super) const G64_BLOCK_ELEMS: usize = 64;
const CODES_PER_BYTE: usize = 4;

/// Value multiplier of each code, ScaleLast (TQ2) map.
const TQ2_CODE_VALUES: [f32; 4] = [-1.0, 0.0, 1.0, 0.0];
/// Value multiplier of each code, d-first maps: c - 1.
const Q2_CODE_VALUES: [f32; 4] = [-1.0, 0.0, 1.0, 2.0];

#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockTq2G128 {
    pub qs: [u8; G128_BLOCK_ELEMS / CODES_PER_BYTE],
    pub d: f16,
}
const _: () = assert!(size_of::<BlockTq2G128>() == 34);

#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockPq2G128 {
    pub d: f16,
    pub qs: [u8; G128_BLOCK_ELEMS / CODES_PER_BYTE],
}
const _: () = assert!(size_of::<BlockPq2G128>() == 34);

#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ2G64 {
    pub d: f16,
    pub qs: [u8; G64_BLOCK_ELEMS / CODES_PER_BYTE],
}
const _: () = assert!(size_of::<BlockQ2G64>() == 18);

/// The 2-bit code of weight `j` in a packed `qs` array.
pub(crate) fn code_at(qs: &[u8], j: usize) -> u8 {
    (qs[j / CODES_PER_BYTE] >> (2 * (j % CODES_PER_BYTE))) & 0b11
}

fn decode_group(d: f16, qs: &[u8], values: &[f32; 4], group: &mut [f32]) {
    let d = d.to_f32();
    for (j, o) in group.iter_mut().enumerate() {
        *o = values[usize::from(code_at(qs, j))] * d;
    }
}

pub(super) fn dequantize(layout: TwoBitLayout, data: &[u8], out: &mut [f32]) {
    match layout {
        TwoBitLayout::Tq2G128ScaleLast => {
            let blocks = data.chunks_exact(size_of::<BlockTq2G128>());
            for (chunk, group) in blocks.zip(out.chunks_exact_mut(G128_BLOCK_ELEMS)) {
                let b: BlockTq2G128 = bytemuck::pod_read_unaligned(chunk);
                decode_group(b.d, &b.qs, &TQ2_CODE_VALUES, group);
            }
        }
        TwoBitLayout::Pq2G128ScaleFirst => {
            let blocks = data.chunks_exact(size_of::<BlockPq2G128>());
            for (chunk, group) in blocks.zip(out.chunks_exact_mut(G128_BLOCK_ELEMS)) {
                let b: BlockPq2G128 = bytemuck::pod_read_unaligned(chunk);
                decode_group(b.d, &b.qs, &Q2_CODE_VALUES, group);
            }
        }
        TwoBitLayout::Q2G64ScaleFirst => {
            let blocks = data.chunks_exact(size_of::<BlockQ2G64>());
            for (chunk, group) in blocks.zip(out.chunks_exact_mut(G64_BLOCK_ELEMS)) {
                let b: BlockQ2G64 = bytemuck::pod_read_unaligned(chunk);
                decode_group(b.d, &b.qs, &Q2_CODE_VALUES, group);
            }
        }
    }
}

/// Codes and scale of one group by the fork's rule; `qs.len() == group.len() / 4`.
fn encode_group(group: &[f32], qs: &mut [u8]) -> f16 {
    let (absmax, id) = absmax_scale(group);
    encode_with_scale(group, id, qs);
    f16::from_f32(absmax)
}

/// Codes of `group` at the inverse scale `id` (levels -1..=2), into zeroed `qs`.
fn encode_with_scale(group: &[f32], id: f32, qs: &mut [u8]) {
    for (j, &x) in group.iter().enumerate() {
        let code = (round_level(x, id, -1, 2) + 1) as u8;
        qs[j / CODES_PER_BYTE] |= code << (2 * (j % CODES_PER_BYTE));
    }
}

/// Levels (weight / d) of one block's codes under `layout`'s code map.
pub(crate) fn decode_levels(layout: TwoBitLayout, qs: &[u8], levels: &mut [i8]) {
    let map: [i8; 4] = match layout {
        TwoBitLayout::Tq2G128ScaleLast => [-1, 0, 1, 0],
        TwoBitLayout::Pq2G128ScaleFirst | TwoBitLayout::Q2G64ScaleFirst => [-1, 0, 1, 2],
    };
    for (j, l) in levels.iter_mut().enumerate() {
        *l = map[usize::from(code_at(qs, j))];
    }
}

/// Codes of levels in {-1, 0, 1, 2} (c = level + 1), LSB first.
pub(crate) fn encode_levels(levels: &[i8], qs: &mut [u8]) {
    qs.fill(0);
    for (j, &l) in levels.iter().enumerate() {
        qs[j / CODES_PER_BYTE] |= ((l + 1) as u8) << (2 * (j % CODES_PER_BYTE));
    }
}

pub(super) fn quantize(layout: TwoBitLayout, src: &[f32]) -> Vec<u8> {
    match layout {
        TwoBitLayout::Tq2G128ScaleLast => {
            let blocks: Vec<BlockTq2G128> = src
                .chunks_exact(G128_BLOCK_ELEMS)
                .map(|g| {
                    let mut qs = [0u8; G128_BLOCK_ELEMS / CODES_PER_BYTE];
                    let d = encode_group(g, &mut qs);
                    BlockTq2G128 { qs, d }
                })
                .collect();
            bytemuck::cast_slice(&blocks).to_vec()
        }
        TwoBitLayout::Pq2G128ScaleFirst => {
            let blocks: Vec<BlockPq2G128> = src
                .chunks_exact(G128_BLOCK_ELEMS)
                .map(|g| {
                    let mut qs = [0u8; G128_BLOCK_ELEMS / CODES_PER_BYTE];
                    let d = encode_group(g, &mut qs);
                    BlockPq2G128 { d, qs }
                })
                .collect();
            bytemuck::cast_slice(&blocks).to_vec()
        }
        TwoBitLayout::Q2G64ScaleFirst => {
            // Both 64-weight halves of a 128-weight group get the group's scale: the file stays
            // mainline Q2_0 (every reader takes any scale per block), the Bonsai ternary checkpoints
            // are g128 (so nothing is lost on them), and bonsai's kernels run 128-weight groups.
            let mut blocks = Vec::with_capacity(src.len() / G64_BLOCK_ELEMS);
            for group in src.chunks(G128_BLOCK_ELEMS) {
                let (absmax, id) = absmax_scale(group);
                for half in group.chunks_exact(G64_BLOCK_ELEMS) {
                    let mut qs = [0u8; G64_BLOCK_ELEMS / CODES_PER_BYTE];
                    encode_with_scale(half, id, &mut qs);
                    blocks.push(BlockQ2G64 { d: f16::from_f32(absmax), qs });
                }
            }
            bytemuck::cast_slice(&blocks).to_vec()
        }
    }
}

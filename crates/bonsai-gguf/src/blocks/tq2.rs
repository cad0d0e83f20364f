//! Upstream llama.cpp TQ2_0 (GGUF id 35): 256 weights per block, `u8 qs[64]; f16 d` (scale
//! LAST), code c -> (c - 1)·d (so 3 -> +2d, which its quantizer never writes). The element
//! order is not contiguous (reference/bonsai2.md §2.6):
//!
//! ```text
//! for half in {0, 1} (32 bytes, 128 elements each), byte m < 32 of the half, l = 0..3:
//!     element 128·half + 32·l + m  <-  bits 2l..2l+1 of qs[32·half + m]
//! ```
//! Quantizer (upstream `quantize_row_tq2_0_ref`, in f32): d = max |x| stored as f16, id = 1/d,
//! code = lroundf(x·id) + 1.

use super::trits::{absmax_scale, round_level};
use half::f16;

pub(super) const BLOCK_ELEMS: usize = 256;
const QS_BYTES: usize = 64;
const HALF_BYTES: usize = 32;
const CODES_PER_BYTE: usize = 4;

#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockTq2_0 {
    pub qs: [u8; QS_BYTES],
    pub d: f16,
}
const _: () = assert!(size_of::<BlockTq2_0>() == 66);

/// The element a code of byte `byte`, lane `l` holds.
fn element(byte: usize, l: usize) -> usize {
    let (half, m) = (byte / HALF_BYTES, byte % HALF_BYTES);
    half * HALF_BYTES * CODES_PER_BYTE + HALF_BYTES * l + m
}

/// Levels (code - 1, in {-1, 0, 1, 2}) and scale of one block.
pub(crate) fn decode_block(block: &[u8], levels: &mut [i8]) -> f16 {
    for (byte, &b) in block[..QS_BYTES].iter().enumerate() {
        for l in 0..CODES_PER_BYTE {
            levels[element(byte, l)] = ((b >> (2 * l)) & 3) as i8 - 1;
        }
    }
    f16::from_le_bytes([block[QS_BYTES], block[QS_BYTES + 1]])
}

/// Packs levels in {-1, 0, 1, 2} and a scale into one 66-byte block.
pub(crate) fn encode_block(levels: &[i8], d: f16, out: &mut [u8]) {
    for (byte, o) in out[..QS_BYTES].iter_mut().enumerate() {
        *o = (0..CODES_PER_BYTE)
            .fold(0u8, |acc, l| acc | (((levels[element(byte, l)] + 1) as u8) << (2 * l)));
    }
    out[QS_BYTES..QS_BYTES + 2].copy_from_slice(&d.to_le_bytes());
}

pub(super) fn dequantize(data: &[u8], out: &mut [f32]) {
    let mut levels = [0i8; BLOCK_ELEMS];
    for (block, group) in
        data.chunks_exact(size_of::<BlockTq2_0>()).zip(out.chunks_exact_mut(BLOCK_ELEMS))
    {
        let d = decode_block(block, &mut levels).to_f32();
        for (o, &l) in group.iter_mut().zip(&levels) {
            *o = f32::from(l) * d;
        }
    }
}

pub(super) fn quantize(src: &[f32]) -> Vec<u8> {
    let block_bytes = size_of::<BlockTq2_0>();
    let mut out = vec![0u8; src.len() / BLOCK_ELEMS * block_bytes];
    let mut levels = [0i8; BLOCK_ELEMS];
    for (group, block) in src.chunks_exact(BLOCK_ELEMS).zip(out.chunks_exact_mut(block_bytes)) {
        let (d, id) = absmax_scale(group);
        for (l, &x) in levels.iter_mut().zip(group) {
            *l = round_level(x, id, -1, 2);
        }
        encode_block(&levels, f16::from_f32(d), block);
    }
    out
}

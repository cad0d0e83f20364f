//! F32, F16 and BF16: one little-endian value per element, no scale.
//!
//! Quantizing to F16/BF16 rounds to nearest-even (the `half` crate's conversion), so the round
//! trip error is at most half an ulp: relative 2^-11 for F16 normals, 2^-8 for BF16.

use half::{bf16, f16};

pub(super) fn dequantize_f32(data: &[u8], out: &mut [f32]) {
    for (chunk, o) in data.chunks_exact(4).zip(out.iter_mut()) {
        *o = f32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
    }
}

pub(super) fn dequantize_f16(data: &[u8], out: &mut [f32]) {
    for (chunk, o) in data.chunks_exact(2).zip(out.iter_mut()) {
        *o = f16::from_le_bytes([chunk[0], chunk[1]]).to_f32();
    }
}

pub(super) fn dequantize_bf16(data: &[u8], out: &mut [f32]) {
    for (chunk, o) in data.chunks_exact(2).zip(out.iter_mut()) {
        *o = bf16::from_le_bytes([chunk[0], chunk[1]]).to_f32();
    }
}

pub(super) fn quantize_f32(src: &[f32]) -> Vec<u8> {
    src.iter().flat_map(|v| v.to_le_bytes()).collect()
}

pub(super) fn quantize_f16(src: &[f32]) -> Vec<u8> {
    src.iter().flat_map(|&v| f16::from_f32(v).to_le_bytes()).collect()
}

pub(super) fn quantize_bf16(src: &[f32]) -> Vec<u8> {
    src.iter().flat_map(|&v| bf16::from_f32(v).to_le_bytes()).collect()
}

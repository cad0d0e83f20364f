//! Q8_0: 32 weights per block, `f16 d; i8 qs[32]`, weight j = qs[j]·d.
//!
//! Quantizer: d = absmax/127 rounded to f16, q = round(x/d) clamped to ±127, computed with the
//! stored (rounded) d so the per-element error is at most d/2 (plus f32 rounding of x/d).

use half::f16;

pub(super) const BLOCK_ELEMS: usize = 32;
/// Largest magnitude an i8 code takes (symmetric, -128 unused).
const Q8_MAX: f32 = 127.0;

#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ8_0 {
    pub d: f16,
    pub qs: [i8; BLOCK_ELEMS],
}
const _: () = assert!(size_of::<BlockQ8_0>() == 34);

pub(super) fn dequantize(data: &[u8], out: &mut [f32]) {
    let blocks = data.chunks_exact(size_of::<BlockQ8_0>());
    for (chunk, group) in blocks.zip(out.chunks_exact_mut(BLOCK_ELEMS)) {
        let block: BlockQ8_0 = bytemuck::pod_read_unaligned(chunk);
        let d = block.d.to_f32();
        for (o, &q) in group.iter_mut().zip(block.qs.iter()) {
            *o = f32::from(q) * d;
        }
    }
}

pub(super) fn quantize(src: &[f32]) -> Vec<u8> {
    let mut blocks = Vec::with_capacity(src.len() / BLOCK_ELEMS);
    for group in src.chunks_exact(BLOCK_ELEMS) {
        let absmax = group.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let d = f16::from_f32(absmax / Q8_MAX);
        let d_f32 = d.to_f32();
        let inv = if d_f32 > 0.0 { 1.0 / d_f32 } else { 0.0 };
        let mut qs = [0i8; BLOCK_ELEMS];
        for (q, &x) in qs.iter_mut().zip(group) {
            // Clamped to ±127 first, so the cast cannot saturate or wrap.
            *q = (x * inv).round().clamp(-Q8_MAX, Q8_MAX) as i8;
        }
        blocks.push(BlockQ8_0 { d, qs });
    }
    bytemuck::cast_slice(&blocks).to_vec()
}

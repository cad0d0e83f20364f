//! Q1_0 (PrismML 1-bit, GGUF id 41): 128 weights per block, `f16 d; u8 qs[16]`.
//!
//! ```text
//! byte:  0   1   2 .............................. 17
//!       [ d (f16 LE) ][ qs[0] ][ qs[1] ] ... [ qs[15] ]
//! weight j -> byte 2 + j/8, bit j%8 (LSB first); bit 1 -> +d, bit 0 -> -d (no zero)
//! ```
//! Quantizer: bit = (x >= 0); d = mean |x| of the group (rounded to f16). For fixed signs the
//! squared error Σ(|x_j| - d)² is minimised by the mean of |x_j|; the nearest f16 to it is the
//! best representable scale because the error is a parabola in d. An all-zero group gets d = 0
//! and decodes to zeros.

use half::f16;

pub(super) const BLOCK_ELEMS: usize = 128;
const QS_BYTES: usize = BLOCK_ELEMS / 8;

#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ1_0 {
    pub d: f16,
    pub qs: [u8; QS_BYTES],
}
const _: () = assert!(size_of::<BlockQ1_0>() == 18);

pub(super) fn dequantize(data: &[u8], out: &mut [f32]) {
    let blocks = data.chunks_exact(size_of::<BlockQ1_0>());
    for (chunk, group) in blocks.zip(out.chunks_exact_mut(BLOCK_ELEMS)) {
        let block: BlockQ1_0 = bytemuck::pod_read_unaligned(chunk);
        let d = block.d.to_f32();
        for (j, o) in group.iter_mut().enumerate() {
            let bit = (block.qs[j / 8] >> (j % 8)) & 1;
            *o = if bit == 1 { d } else { -d };
        }
    }
}

pub(super) fn quantize(src: &[f32]) -> Vec<u8> {
    let mut blocks = Vec::with_capacity(src.len() / BLOCK_ELEMS);
    for group in src.chunks_exact(BLOCK_ELEMS) {
        // f64 sum: the mean of 128 f32 magnitudes, then one rounding to f16.
        let mean_abs = group.iter().map(|v| f64::from(v.abs())).sum::<f64>() / BLOCK_ELEMS as f64;
        let mut qs = [0u8; QS_BYTES];
        for (j, &x) in group.iter().enumerate() {
            if x >= 0.0 {
                qs[j / 8] |= 1 << (j % 8);
            }
        }
        blocks.push(BlockQ1_0 { d: nearest_f16(mean_abs), qs });
    }
    bytemuck::cast_slice(&blocks).to_vec()
}

/// The f16 nearest to `x` (finite, >= 0): the L2-optimal scale, since the squared error is a
/// parabola around the mean. `f16::from_f64` rounds through f32 (half 2.7), and a mean within an
/// f32 ulp of an f16 midpoint then lands on the midpoint and rounds to even, possibly the far
/// side (double rounding; seen as 0.978759786 -> 0.9785156 instead of 0.9790039).
fn nearest_f16(x: f64) -> f16 {
    let first = f16::from_f64(x);
    let bits = first.to_bits();
    // The neighbours on both sides, where they are finite and not negative.
    [bits.checked_sub(1), Some(bits), bits.checked_add(1)]
        .into_iter()
        .flatten()
        .map(f16::from_bits)
        .filter(|c| c.is_finite() && c.to_f64() >= 0.0)
        .min_by(|a, b| (a.to_f64() - x).abs().total_cmp(&(b.to_f64() - x).abs()))
        .unwrap_or(first)
}

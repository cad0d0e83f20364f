//! The base-3 ternary blocks: PrismML PTQ1_0 (GGUF id 143, Bonsai 2) and upstream llama.cpp
//! TQ1_0 (id 34). Both store `(trit - 1)·d` with trits packed five to a byte in `qs` and four to
//! a byte in `qh`, the f16 scale LAST, and the same non-positional element order, built by one
//! walk (reference/bonsai2.md §2.5, §2.6):
//!
//! ```text
//! PTQ1_0 (28 B / 128): qs[24] | qh[2] | d     stages {32, 16, 8}: qs[0..16] then qs[16..24]
//! TQ1_0  (54 B / 256): qs[48] | qh[4] | d     stages {32, 16}:    qs[0..32] then qs[32..48]
//!
//! a stage of width c covers c bytes while it fits (j + c <= len(qs)); byte j+m of it holds the
//! elements off + n·c + m, n = 0..4, digit n = 0 the most significant; then qh byte h holds the
//! elements off + h + n·len(qh), n = 0..3.
//!   PTQ1_0: element 16n + m   <- digit n of qs[m]        (m < 16)
//!           element 80 + 8n + m <- digit n of qs[16 + m] (m < 8)
//!           element 120 + 2n + h <- digit n of qh[h]
//! ```
//!
//! A byte stores the 5-digit base-3 number q (first element most significant; a qh byte's four
//! digits are followed by a 0) as ceil(q·256/243). Digit n is recovered without division:
//! `((byte·3^n mod 256)·3) >> 8`: multiplying by 3^n shifts the digits left (mod 256 drops the
//! ones above) and the top "base-3 digit" of the fixed-point fraction byte/256 is then read by ·3.
//!
//! Quantizer (the fork's `quantize_row_ptq1_0_ref` / upstream `quantize_row_tq1_0_ref`, step for
//! step in f32): d = max |x| stored as f16; id = 1/d (0 for an all-zero group); digit =
//! lroundf(x·id) + 1 (round half away from zero). Exact on inputs in {-d, 0, +d} with d an f16
//! value, since d·(1/d) rounds to within an ulp of 1.

use half::f16;

/// Where the bytes of a base-3 block live and the walk over its stages.
pub(crate) struct TritBlock {
    pub elems: usize,
    pub qs_bytes: usize,
    pub qh_bytes: usize,
    pub stages: &'static [usize],
}

impl TritBlock {
    pub const fn bytes(&self) -> usize {
        self.qs_bytes + self.qh_bytes + SCALE_BYTES
    }
}

const SCALE_BYTES: usize = 2;
/// Digits in a `qs` byte (3^5 = 243 <= 256) and in a `qh` byte.
const QS_DIGITS: usize = 5;
const QH_DIGITS: usize = 4;
const POW3: [u8; QS_DIGITS] = [1, 3, 9, 27, 81];

pub(crate) const PTQ1_0: TritBlock =
    TritBlock { elems: 128, qs_bytes: 24, qh_bytes: 2, stages: &[32, 16, 8] };
pub(crate) const TQ1_0: TritBlock =
    TritBlock { elems: 256, qs_bytes: 48, qh_bytes: 4, stages: &[32, 16] };

#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockPtq1_0 {
    pub qs: [u8; 24],
    pub qh: [u8; 2],
    pub d: f16,
}
const _: () = assert!(size_of::<BlockPtq1_0>() == 28 && PTQ1_0.bytes() == 28);

#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockTq1_0 {
    pub qs: [u8; 48],
    pub qh: [u8; 4],
    pub d: f16,
}
const _: () = assert!(size_of::<BlockTq1_0>() == 54 && TQ1_0.bytes() == 54);

/// Digit `n` (0 = most significant) of a packed byte, in {0, 1, 2}.
pub fn trit_digit(byte: u8, n: usize) -> u8 {
    let shifted = byte.wrapping_mul(POW3[n]);
    ((u16::from(shifted) * 3) >> 8) as u8
}

/// The byte that stores the base-3 number `q` (< 243): ceil(q·256/243).
pub fn trit_byte(q: u8) -> u8 {
    debug_assert!(q < 243);
    ((u16::from(q) * 256 + 242) / 243) as u8
}

/// Calls `visit(byte_index, digit_index, element)` for every trit of the block, `byte_index`
/// counting `qs` then `qh`: the one definition of the element order.
fn walk(layout: &TritBlock, mut visit: impl FnMut(usize, usize, usize)) {
    let (mut j, mut off) = (0, 0);
    for &c in layout.stages {
        while j + c <= layout.qs_bytes {
            for n in 0..QS_DIGITS {
                for m in 0..c {
                    visit(j + m, n, off + n * c + m);
                }
            }
            off += QS_DIGITS * c;
            j += c;
        }
    }
    for h in 0..layout.qh_bytes {
        for n in 0..QH_DIGITS {
            visit(layout.qs_bytes + h, n, off + h + n * layout.qh_bytes);
        }
    }
    debug_assert_eq!(off + QH_DIGITS * layout.qh_bytes, layout.elems);
}

/// Levels (trit - 1, in {-1, 0, 1}) and scale of one block.
pub(crate) fn decode_block(layout: &TritBlock, block: &[u8], levels: &mut [i8]) -> f16 {
    let packed = &block[..layout.qs_bytes + layout.qh_bytes];
    walk(layout, |byte, n, e| levels[e] = trit_digit(packed[byte], n) as i8 - 1);
    let d = layout.qs_bytes + layout.qh_bytes;
    f16::from_le_bytes([block[d], block[d + 1]])
}

/// Packs levels in {-1, 0, 1} and a scale into one block (`out.len() == layout.bytes()`).
pub(crate) fn encode_block(layout: &TritBlock, levels: &[i8], d: f16, out: &mut [u8]) {
    let packed_len = layout.qs_bytes + layout.qh_bytes;
    // Horner accumulation in element-visit order: digits arrive most significant first per byte.
    let mut numbers = [0u8; 64];
    walk(layout, |byte, _, e| numbers[byte] = numbers[byte] * 3 + (levels[e] + 1) as u8);
    for (o, &q) in out[..layout.qs_bytes].iter_mut().zip(&numbers) {
        *o = trit_byte(q);
    }
    for (o, &q) in out[layout.qs_bytes..packed_len].iter_mut().zip(&numbers[layout.qs_bytes..]) {
        // Four digits, then a zero fifth so the first sits in the most significant place.
        *o = trit_byte(q * 3);
    }
    out[packed_len..packed_len + SCALE_BYTES].copy_from_slice(&d.to_le_bytes());
}

/// The fork's rounding of one value to a level: lroundf(x·id), clamped to `[lo, hi]`.
pub(crate) fn round_level(x: f32, id: f32, lo: i8, hi: i8) -> i8 {
    // f32::round rounds half away from zero, as lroundf does.
    ((x * id).round() as i32).clamp(i32::from(lo), i32::from(hi)) as i8
}

/// d = max |x| (f32) and id = 1/d (0 when d = 0), as the fork's reference quantizers compute.
pub(crate) fn absmax_scale(group: &[f32]) -> (f32, f32) {
    let d = group.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    (d, if d > 0.0 { 1.0 / d } else { 0.0 })
}

pub(crate) fn dequantize(layout: &TritBlock, data: &[u8], out: &mut [f32]) {
    let mut levels = [0i8; 256];
    for (block, group) in data.chunks_exact(layout.bytes()).zip(out.chunks_exact_mut(layout.elems))
    {
        let d = decode_block(layout, block, &mut levels[..layout.elems]).to_f32();
        for (o, &l) in group.iter_mut().zip(&levels) {
            *o = f32::from(l) * d;
        }
    }
}

pub(crate) fn quantize(layout: &TritBlock, src: &[f32]) -> Vec<u8> {
    let mut out = vec![0u8; src.len() / layout.elems * layout.bytes()];
    let mut levels = [0i8; 256];
    for (group, block) in src.chunks_exact(layout.elems).zip(out.chunks_exact_mut(layout.bytes())) {
        let (d, id) = absmax_scale(group);
        for (l, &x) in levels.iter_mut().zip(group) {
            *l = round_level(x, id, -1, 1);
        }
        encode_block(layout, &levels[..layout.elems], f16::from_f32(d), block);
    }
    out
}

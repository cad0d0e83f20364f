//! A plain Rust model of the PTX semantics behind every ptx.cuh wrapper, written from the PTX ISA
//! (conversions, `ldmatrix`, the `mma.m16n8k16` / `mma.m16n8k8` fragment layouts documented at the
//! top of ptx.cuh). `ptx_wrappers` compares the `bonsai_ptx_probe` kernel with it: on the GPU
//! that checks the wrappers, under the CPU emulator that the emulator agrees with the chip.

use half::{bf16, f16};

/// Lanes of a warp.
pub(crate) const WARP: usize = 32;
/// 16-bit elements in one 8x8 `ldmatrix` matrix row / column.
const MATRIX_DIM: usize = 8;
/// tf32 keeps 10 of f32's 23 mantissa bits; the low 13 are cleared.
const TF32_DROPPED_BITS: u32 = 13;

/// f32 -> f16 bits, round to nearest even (cvt.rn.f16.f32); inputs are never NaN.
pub(crate) fn f32_to_f16(x: f32) -> u32 {
    u32::from(f16::from_f32(x).to_bits())
}

/// f32 -> bf16 bits, round to nearest even (cvt.rn.bf16.f32); inputs are never NaN.
pub(crate) fn f32_to_bf16(x: f32) -> u32 {
    u32::from(bf16::from_f32(x).to_bits())
}

/// f32 -> tf32 (cvt.rna.tf32.f32): round to nearest, ties away from zero, on the magnitude bits;
/// infinities stay. Inputs are never NaN.
pub(crate) fn f32_to_tf32(x: f32) -> u32 {
    let bits = x.to_bits();
    if x.is_infinite() {
        return bits;
    }
    let half_ulp = 1u32 << (TF32_DROPPED_BITS - 1);
    (bits + half_ulp) & !((1u32 << TF32_DROPPED_BITS) - 1)
}

/// f16 bits -> f32 bits (exact); inputs are never NaN.
pub(crate) fn f16_to_f32(h: u16) -> u32 {
    f16::from_bits(h).to_f32().to_bits()
}

/// `ldmatrix` over `matrices` 8x8 b16 matrices stored row after row in `tile` (matrix i's row j
/// is the row address of lane 8i + j). Lane l receives, per matrix, the b16 pair of row l/4 at
/// columns 2(l%4), 2(l%4)+1 (the lower column in the low half); transposed: column l/4 at rows
/// 2(l%4), 2(l%4)+1. Returns lane-major registers (lane * matrices + i).
pub(crate) fn ldmatrix(tile: &[u16], matrices: usize, transposed: bool) -> Vec<u32> {
    let at = |m: usize, row: usize, col: usize| u32::from(tile[(m * MATRIX_DIM + row) * MATRIX_DIM + col]);
    let mut out = Vec::with_capacity(WARP * matrices);
    for lane in 0..WARP {
        let (major, minor) = (lane / 4, 2 * (lane % 4));
        for m in 0..matrices {
            let (lo, hi) = if transposed {
                (at(m, minor, major), at(m, minor + 1, major))
            } else {
                (at(m, major, minor), at(m, major, minor + 1))
            };
            out.push(lo | (hi << 16));
        }
    }
    out
}

/// The operand types of the three mma wrappers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MmaKind {
    Bf16,
    F16,
    Tf32,
}

impl MmaKind {
    pub(crate) const ALL: [MmaKind; 3] = [MmaKind::Bf16, MmaKind::F16, MmaKind::Tf32];

    /// The reduction length of one instruction: m16n8k16 for 16-bit types, m16n8k8 for tf32.
    pub(crate) fn k(self) -> usize {
        match self {
            MmaKind::Bf16 | MmaKind::F16 => 16,
            MmaKind::Tf32 => 8,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            MmaKind::Bf16 => "mma_bf16_16x8x16",
            MmaKind::F16 => "mma_f16_16x8x16",
            MmaKind::Tf32 => "mma_tf32_16x8x8",
        }
    }

    fn decode16(self, h: u32) -> f64 {
        let h = (h & 0xffff) as u16;
        match self {
            MmaKind::Bf16 => f64::from(bf16::from_bits(h).to_f32()),
            _ => f64::from(f16::from_bits(h).to_f32()),
        }
    }
}

/// The binary mma (`mma_b1_and_popc_16x8x128`): D = C + popc(A row AND B column) over 128 k,
/// exact s32 with wrapping. Layout (ptx.cuh), as the probe passes it: bit j of a[lane*4 + i],
/// i < 2, is (row g + 8i, k 32t + j); bit j of b[lane*2] is (k 32t + j, col g) (the other
/// words are unused); C / D as for the float kinds, c[lane*4 + i] = (row g + 8 (i / 2),
/// col 2t + i % 2).
pub(crate) fn mma_b1(a: &[u32], b: &[u32], c: &[i32]) -> Vec<i32> {
    let mut rows = [[0u32; 4]; 16];
    let mut cols = [[0u32; 4]; 8];
    for lane in 0..WARP {
        let (g, t) = (lane / 4, lane % 4);
        for i in 0..2 {
            rows[g + 8 * i][t] = a[lane * 4 + i];
        }
        cols[g][t] = b[lane * 2];
    }
    (0..WARP * 4)
        .map(|e| {
            let (lane, i) = (e / 4, e % 4);
            let (row, col) = (lane / 4 + 8 * (i / 2), 2 * (lane % 4) + i % 2);
            let popc: u32 = (0..4).map(|w| (rows[row][w] & cols[col][w]).count_ones()).sum();
            c[e].wrapping_add(popc as i32)
        })
        .collect()
}

/// The reference of one mma: D (f64, exact) and, per element, the sum of |C| and every |a·b|
/// (what the f32 accumulation error scales with). Fragments are lane-major: `a` lane*4 + i,
/// `b` lane*2 + j, `c` lane*4 + i; the result is in C's layout.
pub(crate) struct MmaReference {
    pub d: Vec<f64>,
    pub magnitude: Vec<f64>,
}

/// Layouts (g = lane/4, t = lane%4), from ptx.cuh:
/// 16-bit: a[0] = (row g, k 2t..2t+1), a[1] = (g+8, 2t..), a[2] = (g, 2t+8..), a[3] = (g+8, 2t+8..);
///         b0 = (k 2t..2t+1, col g), b1 = (k 2t+8..2t+9, col g); each register low half = lower k.
/// tf32:   a[0] = (g, t), a[1] = (g+8, t), a[2] = (g, t+4), a[3] = (g+8, t+4); b0 = (k t, col g),
///         b1 = (k t+4, col g).
/// C/D:    c[0..1] = (row g, cols 2t, 2t+1), c[2..3] = (row g+8, same).
pub(crate) fn mma(kind: MmaKind, a: &[u32], b: &[u32], c: &[f32]) -> MmaReference {
    const M: usize = 16;
    const N: usize = 8;
    let k_len = kind.k();
    let mut am = vec![[0f64; 16]; M];
    let mut bm = vec![[0f64; N]; 16];
    for lane in 0..WARP {
        let (g, t) = (lane / 4, lane % 4);
        for i in 0..4 {
            let row = g + 8 * (i % 2);
            let word = a[lane * 4 + i];
            match kind {
                MmaKind::Tf32 => am[row][t + 4 * (i / 2)] = f64::from(f32::from_bits(word)),
                _ => {
                    let k = 2 * t + 8 * (i / 2);
                    am[row][k] = kind.decode16(word);
                    am[row][k + 1] = kind.decode16(word >> 16);
                }
            }
        }
        for j in 0..2 {
            let word = b[lane * 2 + j];
            match kind {
                MmaKind::Tf32 => bm[t + 4 * j][g] = f64::from(f32::from_bits(word)),
                _ => {
                    let k = 2 * t + 8 * j;
                    bm[k][g] = kind.decode16(word);
                    bm[k + 1][g] = kind.decode16(word >> 16);
                }
            }
        }
    }
    let mut d = Vec::with_capacity(WARP * 4);
    let mut magnitude = Vec::with_capacity(WARP * 4);
    for lane in 0..WARP {
        let (g, t) = (lane / 4, lane % 4);
        for i in 0..4 {
            let (row, col) = (g + 8 * (i / 2), 2 * t + i % 2);
            let c0 = f64::from(c[lane * 4 + i]);
            let products = (0..k_len).map(|k| am[row][k] * bm[k][col]);
            d.push(c0 + products.clone().sum::<f64>());
            magnitude.push(c0.abs() + products.map(f64::abs).sum::<f64>());
        }
    }
    MmaReference { d, magnitude }
}

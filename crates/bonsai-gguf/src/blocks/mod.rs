//! Tensor element types bonsai reads and writes, their on-disk blocks, and the dequantizers and
//! quantizers that define what each block means.
//!
//! Every format is little-endian; the `#[repr(C)]` block structs mirror the disk layout byte for
//! byte (size asserted at compile time) and are what the quantizers emit.

mod float;
mod levels;
mod q1;
mod q2;
mod q8;
mod tq2;
mod trits;

pub use levels::{decode_levels, encode_levels, level_range, Levels, LevelsError};
pub use q1::BlockQ1_0;
pub use q2::{BlockPq2G128, BlockQ2G64, BlockTq2G128};
pub use q8::BlockQ8_0;
pub use tq2::BlockTq2_0;
pub use trits::{trit_byte, trit_digit, BlockPtq1_0, BlockTq1_0};

use crate::error::GgufError;

#[cfg(target_endian = "big")]
compile_error!("bonsai-gguf reads little-endian blocks by reinterpreting bytes; big-endian hosts are not supported");

/// GGUF type ids (ggml `ggml_type`) this crate knows.
pub mod type_id {
    pub const F32: u32 = 0;
    pub const F16: u32 = 1;
    pub const Q8_0: u32 = 8;
    pub const BF16: u32 = 30;
    /// Upstream llama.cpp base-3 ternary, 256 weights per block.
    pub const TQ1_0: u32 = 34;
    /// Upstream llama.cpp 2-bit ternary, 256 weights per block.
    pub const TQ2_0: u32 = 35;
    /// PrismML 1-bit, 128 weights per block.
    pub const Q1_0: u32 = 41;
    /// Shared by three incompatible 2-bit layouts; see [`super::TwoBitLayout`].
    pub const TWO_BIT_SHARED: u32 = 42;
    /// PrismML's unambiguous id for the d-first g128 2-bit layout ("PQ2_0"; `Q2_0_G128` in some
    /// intermediate fork builds).
    pub const PQ2_0: u32 = 142;
    /// PrismML base-3 ternary, 128 weights per block (Bonsai 2).
    pub const PTQ1_0: u32 = 143;
}

/// The three on-disk layouts that hide behind GGUF type id 42 (SPEC §1, reference/bonsai2.md §2.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TwoBitLayout {
    /// OxiBonsai's TQ2_0_g128: `u8 qs[32]; f16 d` (d last); codes 00 -1, 01 0, 10 +1, 11 0.
    /// Read, never written (no PrismML or llama.cpp build reads it).
    Tq2G128ScaleLast,
    /// PrismML's legacy Q2_0 g128, byte-identical to PQ2_0 (id 142): `f16 d; u8 qs[32]` (d
    /// first); code c -> (c - 1)·d.
    Pq2G128ScaleFirst,
    /// Mainline llama.cpp Q2_0 (and the fork from prism-v7): `f16 d; u8 qs[16]`, 64 weights;
    /// code c -> (c - 1)·d.
    Q2G64ScaleFirst,
}

/// A tensor's resolved element type (for id 42 the layout has been detected).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TensorType {
    F32,
    F16,
    BF16,
    Q8_0,
    Q1_0,
    TwoBit(TwoBitLayout),
    /// PrismML PTQ1_0 (id 143): base-3 trits, 128 weights, `qs[24] qh[2] d` (d last).
    Ptq1_0,
    /// Upstream TQ1_0 (id 34): base-3 trits, 256 weights, `qs[48] qh[4] d` (d last).
    Tq1_0,
    /// Upstream TQ2_0 (id 35): 2-bit codes, 256 weights, `qs[64] d` (d last).
    Tq2_0,
}

impl TensorType {
    /// Weights per block (1 for the float types).
    pub const fn block_elems(self) -> usize {
        match self {
            TensorType::F32 | TensorType::F16 | TensorType::BF16 => 1,
            TensorType::Q8_0 => q8::BLOCK_ELEMS,
            TensorType::Q1_0 => q1::BLOCK_ELEMS,
            TensorType::TwoBit(TwoBitLayout::Q2G64ScaleFirst) => q2::G64_BLOCK_ELEMS,
            TensorType::TwoBit(_) => q2::G128_BLOCK_ELEMS,
            TensorType::Ptq1_0 => trits::PTQ1_0.elems,
            TensorType::Tq1_0 => trits::TQ1_0.elems,
            TensorType::Tq2_0 => tq2::BLOCK_ELEMS,
        }
    }

    /// Bytes per block.
    pub const fn block_bytes(self) -> usize {
        match self {
            TensorType::F32 => 4,
            TensorType::F16 | TensorType::BF16 => 2,
            TensorType::Q8_0 => size_of::<BlockQ8_0>(),
            TensorType::Q1_0 => size_of::<BlockQ1_0>(),
            TensorType::TwoBit(TwoBitLayout::Tq2G128ScaleLast) => size_of::<BlockTq2G128>(),
            TensorType::TwoBit(TwoBitLayout::Pq2G128ScaleFirst) => size_of::<BlockPq2G128>(),
            TensorType::TwoBit(TwoBitLayout::Q2G64ScaleFirst) => size_of::<BlockQ2G64>(),
            TensorType::Ptq1_0 => size_of::<BlockPtq1_0>(),
            TensorType::Tq1_0 => size_of::<BlockTq1_0>(),
            TensorType::Tq2_0 => size_of::<BlockTq2_0>(),
        }
    }

    /// Display name, with the detected 2-bit layout spelled out.
    pub const fn name(self) -> &'static str {
        match self {
            TensorType::F32 => "F32",
            TensorType::F16 => "F16",
            TensorType::BF16 => "BF16",
            TensorType::Q8_0 => "Q8_0",
            TensorType::Q1_0 => "Q1_0",
            TensorType::TwoBit(TwoBitLayout::Tq2G128ScaleLast) => "TQ2_0_g128",
            TensorType::TwoBit(TwoBitLayout::Pq2G128ScaleFirst) => "PQ2_0",
            TensorType::TwoBit(TwoBitLayout::Q2G64ScaleFirst) => "Q2_0_g64",
            TensorType::Ptq1_0 => "PTQ1_0",
            TensorType::Tq1_0 => "TQ1_0",
            TensorType::Tq2_0 => "TQ2_0",
        }
    }

    /// The type id a writer uses when none is given: the d-first g128 layout gets its
    /// unambiguous id 142; the other two 2-bit layouts can only be written as 42.
    pub const fn canonical_type_id(self) -> u32 {
        match self {
            TensorType::F32 => type_id::F32,
            TensorType::F16 => type_id::F16,
            TensorType::BF16 => type_id::BF16,
            TensorType::Q8_0 => type_id::Q8_0,
            TensorType::Q1_0 => type_id::Q1_0,
            TensorType::TwoBit(TwoBitLayout::Pq2G128ScaleFirst) => type_id::PQ2_0,
            TensorType::TwoBit(_) => type_id::TWO_BIT_SHARED,
            TensorType::Ptq1_0 => type_id::PTQ1_0,
            TensorType::Tq1_0 => type_id::TQ1_0,
            TensorType::Tq2_0 => type_id::TQ2_0,
        }
    }

    /// llama.cpp's `general.file_type` (`llama_ftype`) for a file mostly of this type: mainline
    /// values, and the fork's 128/129 for its private PQ2_0/PTQ1_0; None for the scale-last
    /// layout, which llama.cpp has no name for.
    pub const fn llama_file_type(self) -> Option<u32> {
        Some(match self {
            TensorType::F32 => 0,
            TensorType::F16 => 1,
            TensorType::Q8_0 => 7,
            TensorType::BF16 => 32,
            TensorType::Tq1_0 => 36,
            TensorType::Tq2_0 => 37,
            TensorType::Q1_0 => 40,
            TensorType::TwoBit(TwoBitLayout::Q2G64ScaleFirst) => 41,
            TensorType::TwoBit(TwoBitLayout::Pq2G128ScaleFirst) => 128,
            TensorType::Ptq1_0 => 129,
            TensorType::TwoBit(TwoBitLayout::Tq2G128ScaleLast) => return None,
        })
    }

    /// Whether `id` is a valid on-disk id for this type.
    pub const fn accepts_type_id(self, id: u32) -> bool {
        match self {
            TensorType::TwoBit(TwoBitLayout::Pq2G128ScaleFirst) => {
                id == type_id::PQ2_0 || id == type_id::TWO_BIT_SHARED
            }
            other => other.canonical_type_id() == id,
        }
    }

    /// Bytes taken by `n_elems` weights, or None if `n_elems` is not a whole number of blocks
    /// or the size overflows.
    pub fn len_bytes_for(self, n_elems: u64) -> Option<u64> {
        let block_elems = self.block_elems() as u64;
        if n_elems % block_elems != 0 {
            return None;
        }
        (n_elems / block_elems).checked_mul(self.block_bytes() as u64)
    }
}

/// The type for a non-shared id; None for 42 (needs layout detection) and for unknown ids.
pub(crate) fn type_for_unshared_id(id: u32) -> Option<TensorType> {
    Some(match id {
        type_id::F32 => TensorType::F32,
        type_id::F16 => TensorType::F16,
        type_id::BF16 => TensorType::BF16,
        type_id::Q8_0 => TensorType::Q8_0,
        type_id::Q1_0 => TensorType::Q1_0,
        type_id::PQ2_0 => TensorType::TwoBit(TwoBitLayout::Pq2G128ScaleFirst),
        type_id::PTQ1_0 => TensorType::Ptq1_0,
        type_id::TQ1_0 => TensorType::Tq1_0,
        type_id::TQ2_0 => TensorType::Tq2_0,
        _ => return None,
    })
}

/// Names of ggml types bonsai knows of but does not read, for a helpful error message.
pub(crate) fn known_unsupported_type_name(id: u32) -> Option<&'static str> {
    Some(match id {
        2 => "Q4_0",
        3 => "Q4_1",
        6 => "Q5_0",
        7 => "Q5_1",
        9 => "Q8_1",
        10 => "Q2_K",
        11 => "Q3_K",
        12 => "Q4_K",
        13 => "Q5_K",
        14 => "Q6_K",
        15 => "Q8_K",
        16..=23 => "IQ (i-quant)",
        24 => "I8",
        25 => "I16",
        26 => "I32",
        27 => "I64",
        28 => "F64",
        29 => "IQ1_M",
        39 => "MXFP4",
        40 => "NVFP4",
        _ => return None,
    })
}

/// Checks `data`/`out` lengths agree with `ty` and returns the number of blocks.
fn checked_block_count(
    op: &'static str,
    ty: TensorType,
    data_len: usize,
    n_elems: usize,
) -> Result<usize, GgufError> {
    let (block_bytes, block_elems) = (ty.block_bytes(), ty.block_elems());
    let bad = |reason: String| GgufError::BadLength { op, type_name: ty.name(), reason };
    if data_len % block_bytes != 0 {
        return Err(bad(format!(
            "{data_len} bytes is not a whole number of {block_bytes}-byte blocks"
        )));
    }
    if n_elems % block_elems != 0 {
        return Err(bad(format!(
            "{n_elems} values is not a whole number of {block_elems}-value groups"
        )));
    }
    let n_blocks = data_len / block_bytes;
    if n_blocks != n_elems / block_elems {
        return Err(bad(format!(
            "{data_len} bytes hold {} values but the buffer has {n_elems}",
            n_blocks * block_elems
        )));
    }
    Ok(n_blocks)
}

/// Decodes `data` (whole blocks of `ty`) into `out` (exactly one f32 per weight).
pub fn dequantize(ty: TensorType, data: &[u8], out: &mut [f32]) -> Result<(), GgufError> {
    checked_block_count("dequantize", ty, data.len(), out.len())?;
    match ty {
        TensorType::F32 => float::dequantize_f32(data, out),
        TensorType::F16 => float::dequantize_f16(data, out),
        TensorType::BF16 => float::dequantize_bf16(data, out),
        TensorType::Q8_0 => q8::dequantize(data, out),
        TensorType::Q1_0 => q1::dequantize(data, out),
        TensorType::TwoBit(layout) => q2::dequantize(layout, data, out),
        TensorType::Ptq1_0 => trits::dequantize(&trits::PTQ1_0, data, out),
        TensorType::Tq1_0 => trits::dequantize(&trits::TQ1_0, data, out),
        TensorType::Tq2_0 => tq2::dequantize(data, out),
    }
    Ok(())
}

/// Encodes `src` into blocks of `ty`. `src.len()` must be a whole number of groups; quantized
/// types reject non-finite inputs (a NaN scale would poison a whole group silently).
pub fn quantize(ty: TensorType, src: &[f32]) -> Result<Vec<u8>, GgufError> {
    let block_elems = ty.block_elems();
    if src.len() % block_elems != 0 {
        return Err(GgufError::BadLength {
            op: "quantize",
            type_name: ty.name(),
            reason: format!(
                "{} values is not a whole number of {block_elems}-value groups",
                src.len()
            ),
        });
    }
    let is_float = matches!(ty, TensorType::F32 | TensorType::F16 | TensorType::BF16);
    if !is_float {
        if let Some((index, &value)) = src.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(GgufError::NonFiniteInput { type_name: ty.name(), index, value });
        }
        // The scale is stored as f16; a larger one would become infinity and decode to NaN.
        // Q8_0's scale is absmax/127, the others' are at most absmax.
        let scale_divisor = if ty == TensorType::Q8_0 { 127.0 } else { 1.0 };
        let absmax = src.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        if absmax / scale_divisor > half::f16::MAX.to_f32() {
            return Err(GgufError::BadLength {
                op: "quantize",
                type_name: ty.name(),
                reason: format!("max |x| = {absmax} gives a group scale beyond the f16 range"),
            });
        }
    }
    Ok(match ty {
        TensorType::F32 => float::quantize_f32(src),
        TensorType::F16 => float::quantize_f16(src),
        TensorType::BF16 => float::quantize_bf16(src),
        TensorType::Q8_0 => q8::quantize(src),
        TensorType::Q1_0 => q1::quantize(src),
        TensorType::TwoBit(layout) => q2::quantize(layout, src),
        TensorType::Ptq1_0 => trits::quantize(&trits::PTQ1_0, src),
        TensorType::Tq1_0 => trits::quantize(&trits::TQ1_0, src),
        TensorType::Tq2_0 => tq2::quantize(src),
    })
}

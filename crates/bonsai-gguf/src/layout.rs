//! Telling apart the three 2-bit layouts that share GGUF type id 42 (SPEC §1).
//!
//! 1. Block size from the tensor's byte length: the bytes between its offset and the next
//!    tensor (or the file end) must equal the candidate size up to alignment padding. 64-weight
//!    blocks take 36 B per 128 weights, 128-weight blocks 34 B.
//! 2. Byte order of the g128 block from metadata: [`keys::BONSAI_TWO_BIT_LAYOUT`], or a string
//!    tag in `general.quantization_version` / `general.file_type` (OxiBonsai writes
//!    "TQ2_0_G128" there).
//! 3. Else a structural check over (a strided sample of) the blocks: a real scale is a finite,
//!    non-negative f16, and the scale-last (TQ2) quantizer never emits code 0b11. Reading the
//!    wrong end as the scale puts a code byte in the f16 sign bit, so over many blocks one
//!    hypothesis fails.
//!
//! When none of these decides, the tensor is rejected with an error naming it.

use crate::blocks::{TensorType, TwoBitLayout};
use crate::error::GgufError;
use crate::keys;
use crate::value::MetaValue;
use half::f16;

/// Blocks examined by the structural check; a strided sample keeps `open` cheap on GB files.
const MAX_SNIFFED_BLOCKS: usize = 4096;
const QS_G128_BYTES: usize = 32;
const SCALE_BYTES: usize = 2;
const F16_SIGN_BIT: u16 = 0x8000;

/// What metadata says about 2-bit tensors, if anything.
pub(crate) fn layout_hint(
    metadata: &[(String, MetaValue)],
) -> Result<Option<TwoBitLayout>, GgufError> {
    for (key, value) in metadata {
        if key == keys::BONSAI_TWO_BIT_LAYOUT {
            let text = value.as_str().ok_or_else(|| GgufError::WrongType {
                key: key.clone(),
                expected: "string",
                found: value.type_description(),
            })?;
            return layout_from_tag(text).map(Some).ok_or_else(|| GgufError::OutOfRange {
                key: key.clone(),
                value: crate::parse::escape_for_message(text),
                reason: "expected tq2_0_g128, q2_0_g128 or q2_0_g64".into(),
            });
        }
    }
    for tag_key in [keys::GENERAL_QUANTIZATION_VERSION, keys::GENERAL_FILE_TYPE] {
        let tag = metadata.iter().find(|(k, _)| k == tag_key).and_then(|(_, v)| v.as_str());
        if let Some(layout) = tag.and_then(layout_from_tag) {
            return Ok(Some(layout));
        }
    }
    Ok(None)
}

/// Maps a layout tag (case-insensitive) to a layout.
pub fn layout_from_tag(tag: &str) -> Option<TwoBitLayout> {
    match tag.to_ascii_lowercase().as_str() {
        "tq2_0_g128" => Some(TwoBitLayout::Tq2G128ScaleLast),
        "pq2_0" | "pq2_0_g128" | "q2_0_g128" => Some(TwoBitLayout::Pq2G128ScaleFirst),
        "q2_0_g64" => Some(TwoBitLayout::Q2G64ScaleFirst),
        _ => None,
    }
}

/// The tag [`layout_from_tag`] reads back; writers put it under `bonsai.two_bit_layout`.
pub fn layout_tag(layout: TwoBitLayout) -> &'static str {
    match layout {
        TwoBitLayout::Tq2G128ScaleLast => "tq2_0_g128",
        TwoBitLayout::Pq2G128ScaleFirst => "q2_0_g128",
        TwoBitLayout::Q2G64ScaleFirst => "q2_0_g64",
    }
}

/// Inputs for resolving one id-42 tensor.
pub(crate) struct TwoBitTensor<'a> {
    pub name: &'a str,
    pub n_elems: u64,
    pub row_len: u64,
    /// Bytes from the tensor's start to the next tensor's start (or the file end).
    pub region: &'a [u8],
    pub alignment: u64,
}

/// Whether `size` bytes fill `region_len` up to alignment padding.
fn fills_region(size: u64, region_len: u64, alignment: u64) -> bool {
    size <= region_len && region_len - size < alignment
}

pub(crate) fn resolve(
    t: &TwoBitTensor<'_>,
    hint: Option<TwoBitLayout>,
) -> Result<TwoBitLayout, GgufError> {
    let region_len = t.region.len() as u64;
    let size_of = |layout| {
        if t.row_len % TensorType::TwoBit(layout).block_elems() as u64 != 0 {
            return None;
        }
        TensorType::TwoBit(layout).len_bytes_for(t.n_elems)
    };
    let g128 = size_of(TwoBitLayout::Tq2G128ScaleLast);
    let g64 = size_of(TwoBitLayout::Q2G64ScaleFirst);
    let fits = |size: Option<u64>| size.is_some_and(|s| fills_region(s, region_len, t.alignment));
    let ambiguous =
        |reason: String| GgufError::AmbiguousLayout { name: t.name.to_string(), reason };

    if let Some(layout) = hint {
        if fits(size_of(layout)) {
            return Ok(layout);
        }
        return Err(ambiguous(format!(
            "metadata says 2-bit layout {} but its size does not match the {region_len} bytes the tensor spans",
            layout_tag(layout)
        )));
    }
    match (fits(g128), fits(g64)) {
        (false, true) => Ok(TwoBitLayout::Q2G64ScaleFirst),
        (true, false) => {
            // fits() implies the size is known and within the region.
            let len = g128.map_or(0, |s| s as usize);
            sniff_g128_byte_order(&t.region[..len]).map_err(ambiguous)
        }
        (true, true) => Err(ambiguous(format!(
            "type 42 with {} weights: both 64- and 128-weight blocks fit its {region_len} bytes; \
             set metadata '{}' to tq2_0_g128, q2_0_g128 or q2_0_g64",
            t.n_elems,
            keys::BONSAI_TWO_BIT_LAYOUT
        ))),
        (false, false) => Err(ambiguous(format!(
            "type 42 with {} weights ({} rows of {}) spans {region_len} bytes, which matches neither \
             128-weight blocks ({} B) nor 64-weight blocks ({} B)",
            t.n_elems,
            t.n_elems / t.row_len.max(1),
            t.row_len,
            g128.map_or("n/a".into(), |s| s.to_string()),
            g64.map_or("n/a".into(), |s| s.to_string()),
        ))),
    }
}

/// A finite, non-negative f16 (+0 allowed): what every quantizer here stores as a scale.
fn plausible_scale(lo: u8, hi: u8) -> bool {
    let bits = u16::from_le_bytes([lo, hi]);
    bits & F16_SIGN_BIT == 0 && f16::from_bits(bits).is_finite()
}

fn has_code_11(qs: &[u8]) -> bool {
    // A byte has a 0b11 pair iff some pair's two bits are both set.
    qs.iter().any(|&b| (b & (b >> 1)) & 0b0101_0101 != 0)
}

/// Structural check of 34-byte g128 blocks: scale last (TQ2) or first (PQ2)?
/// Returns the reason it cannot tell on failure.
pub fn sniff_g128_byte_order(data: &[u8]) -> Result<TwoBitLayout, String> {
    const BLOCK: usize = QS_G128_BYTES + SCALE_BYTES;
    let n_blocks = data.len() / BLOCK;
    if n_blocks == 0 || data.len() % BLOCK != 0 {
        return Err(format!("{} bytes are not whole 34-byte 2-bit blocks", data.len()));
    }
    let stride = n_blocks.div_ceil(MAX_SNIFFED_BLOCKS);
    let (mut scale_last_ok, mut scale_first_ok) = (true, true);
    for block in data.chunks_exact(BLOCK).step_by(stride) {
        let (qs_last, d_last) = block.split_at(QS_G128_BYTES);
        scale_last_ok &= plausible_scale(d_last[0], d_last[1]) && !has_code_11(qs_last);
        scale_first_ok &= plausible_scale(block[0], block[1]);
        if !scale_last_ok && !scale_first_ok {
            break;
        }
    }
    match (scale_last_ok, scale_first_ok) {
        (true, false) => Ok(TwoBitLayout::Tq2G128ScaleLast),
        (false, true) => Ok(TwoBitLayout::Pq2G128ScaleFirst),
        (true, true) => Err(format!(
            "cannot tell the 2-bit layout of type 42 ({n_blocks} blocks read as both TQ2_0_g128 \
             (d last) and Q2_0_g128 (d first)); set metadata '{}'",
            keys::BONSAI_TWO_BIT_LAYOUT
        )),
        (false, false) => Err(format!(
            "type 42 data ({n_blocks} blocks) has no plausible f16 scale at either end of its blocks"
        )),
    }
}

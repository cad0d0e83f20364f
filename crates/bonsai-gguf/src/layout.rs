//! Telling apart the three 2-bit layouts that share GGUF type id 42 (SPEC §1,
//! reference/bonsai2.md §2.8), once per file: every id-42 tensor must be read the same way.
//!
//! 1. Block size by replaying the offset table: a tensor spans the bytes from its offset to the
//!    next tensor's (or the file end); a candidate fits when its size fills that span up to the
//!    alignment padding. 64-weight blocks take 36 B per 128 weights, 128-weight blocks 34 B, so
//!    for real checkpoints exactly one fits (a 5120-wide row: 1440 B against 1360 B). The
//!    candidate must fit every id-42 tensor; when both or neither do, the file is refused.
//! 2. For 128-weight blocks, the byte order from metadata: [`keys::BONSAI_TWO_BIT_LAYOUT`], or a
//!    string tag in `general.quantization_version` / `general.file_type` (OxiBonsai writes
//!    "TQ2_0_G128" there); a tag also fixes the block size, which must then fit.
//! 3. Else a structural check over a strided sample of every tensor's blocks: a real scale is a
//!    finite, non-negative f16, and the scale-last (TQ2) quantizer never emits code 0b11. Reading
//!    the wrong end as the scale puts a code byte in the f16 sign bit, so over many blocks one
//!    hypothesis fails.
//!
//! The outcome, with the reason in words, is kept as a [`TwoBitResolution`].

use crate::blocks::{TensorType, TwoBitLayout};
use crate::error::GgufError;
use crate::keys;
use crate::value::MetaValue;
use half::f16;

/// Blocks examined per tensor by the structural check; a strided sample keeps `open` cheap on
/// GB files.
const MAX_SNIFFED_BLOCKS: usize = 4096;
const QS_G128_BYTES: usize = 32;
const SCALE_BYTES: usize = 2;
const F16_SIGN_BIT: u16 = 0x8000;

/// What metadata says about 2-bit tensors, if anything.
pub(crate) fn layout_hint(
    metadata: &[(String, MetaValue)],
) -> Result<Option<(TwoBitLayout, String)>, GgufError> {
    for (key, value) in metadata {
        if key == keys::BONSAI_TWO_BIT_LAYOUT {
            let text = value.as_str().ok_or_else(|| GgufError::WrongType {
                key: key.clone(),
                expected: "string",
                found: value.type_description(),
            })?;
            let said = format!("metadata {key} = \"{}\"", crate::parse::escape_for_message(text));
            return layout_from_tag(text).map(|l| Some((l, said))).ok_or_else(|| GgufError::OutOfRange {
                key: key.clone(),
                value: crate::parse::escape_for_message(text),
                reason: "expected tq2_0_g128, q2_0_g128 or q2_0_g64".into(),
            });
        }
    }
    for tag_key in [keys::GENERAL_QUANTIZATION_VERSION, keys::GENERAL_FILE_TYPE] {
        let tag = metadata.iter().find(|(k, _)| k == tag_key).and_then(|(_, v)| v.as_str());
        if let Some((layout, text)) = tag.and_then(|t| layout_from_tag(t).map(|l| (l, t))) {
            let said = format!("metadata {tag_key} = \"{}\"", crate::parse::escape_for_message(text));
            return Ok(Some((layout, said)));
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

/// How a file's id-42 tensors are read, and why (for `bonsai info`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TwoBitResolution {
    pub layout: TwoBitLayout,
    pub reason: String,
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

impl TwoBitTensor<'_> {
    /// Bytes the tensor takes in `layout`, None when its rows are not whole blocks.
    fn size(&self, layout: TwoBitLayout) -> Option<u64> {
        let ty = TensorType::TwoBit(layout);
        if self.row_len % ty.block_elems() as u64 != 0 {
            return None;
        }
        ty.len_bytes_for(self.n_elems)
    }

    /// Whether `layout`'s size fills the tensor's span up to alignment padding.
    fn fits(&self, layout: TwoBitLayout) -> bool {
        let span = self.region.len() as u64;
        self.size(layout).is_some_and(|size| size <= span && span - size < self.alignment)
    }

    fn size_text(&self, layout: TwoBitLayout) -> String {
        self.size(layout).map_or("n/a".into(), |s| format!("{s} B"))
    }
}

/// The one layout every id-42 tensor of a file is read in (None when there are none).
pub(crate) fn resolve_file(
    tensors: &[TwoBitTensor<'_>],
    hint: Option<(TwoBitLayout, String)>,
) -> Result<Option<TwoBitResolution>, GgufError> {
    let Some(first) = tensors.first() else { return Ok(None) };
    let n = tensors.len();
    let ambiguous = |t: &TwoBitTensor<'_>, reason: String| GgufError::AmbiguousLayout { name: t.name.to_string(), reason };
    const G128: TwoBitLayout = TwoBitLayout::Pq2G128ScaleFirst;
    const G64: TwoBitLayout = TwoBitLayout::Q2G64ScaleFirst;

    let fit_text = |layout: TwoBitLayout, other: &TwoBitTensor<'_>, rejected: TwoBitLayout| {
        let (bytes, weights) = if layout == G64 { (18, 64) } else { (34, 128) };
        format!(
            "{bytes}-byte blocks of {weights} weights fit the offset table for all {n} id-42 tensors \
             ('{}' spans {} bytes; {} blocks would take {})",
            other.name,
            other.region.len(),
            if rejected == G64 { "64-weight" } else { "128-weight" },
            other.size_text(rejected)
        )
    };
    let misfit = |layout| tensors.iter().find(|t| !t.fits(layout));
    if let Some((layout, said)) = hint {
        if let Some(t) = misfit(layout) {
            return Err(ambiguous(
                t,
                format!(
                    "{said} says 2-bit layout {} but its size ({}) does not match the {} bytes the tensor spans",
                    layout_tag(layout),
                    t.size_text(layout),
                    t.region.len()
                ),
            ));
        }
        let other = if layout == G64 { G128 } else { G64 };
        let reason = match misfit(other) {
            Some(t) => {
                let role = if layout == G64 { "agrees" } else { "gives the byte order" };
                format!("{}; {said} {role}", fit_text(layout, t, other))
            }
            None => format!("{said} (both block sizes fit every id-42 tensor, so the offsets cannot tell)"),
        };
        return Ok(Some(TwoBitResolution { layout, reason }));
    }
    let block_size = match (misfit(G128), misfit(G64)) {
        (Some(not128), None) => Ok((G64, not128)),
        (None, Some(not64)) => Ok((G128, not64)),
        (None, None) => Err(ambiguous(
            first,
            format!(
                "type 42 with {} weights: both 64- and 128-weight blocks fit its {} bytes, and so they do for all \
                 {n} id-42 tensors of the file; set metadata '{}' to q2_0_g128 or q2_0_g64",
                first.n_elems,
                first.region.len(),
                keys::BONSAI_TWO_BIT_LAYOUT
            ),
        )),
        (Some(not128), Some(not64)) => {
            let fits_neither = tensors.iter().find(|t| !t.fits(G128) && !t.fits(G64));
            Err(match fits_neither {
                Some(t) => ambiguous(
                    t,
                    format!(
                        "type 42 with {} weights ({} rows of {}) spans {} bytes, which matches neither 128-weight \
                         blocks ({}) nor 64-weight blocks ({})",
                        t.n_elems,
                        t.n_elems / t.row_len.max(1),
                        t.row_len,
                        t.region.len(),
                        t.size_text(G128),
                        t.size_text(G64)
                    ),
                ),
                None => ambiguous(
                    not128,
                    format!(
                        "the id-42 tensors disagree on the block size: this one fits only 64-weight blocks, \
                         '{}' only 128-weight blocks; one file holds one layout",
                        not64.name
                    ),
                ),
            })
        }
    }?;
    let (layout, other) = block_size;
    if layout == G64 {
        return Ok(Some(TwoBitResolution { layout, reason: fit_text(G64, other, G128) }));
    }
    let regions: Vec<&[u8]> = tensors
        .iter()
        .map(|t| &t.region[..t.size(G128).map_or(0, |s| s as usize)])
        .collect();
    let (order, why) = sniff_g128_blocks(&regions).map_err(|reason| ambiguous(first, reason))?;
    Ok(Some(TwoBitResolution { layout: order, reason: format!("{}; {why}", fit_text(G128, other, G64)) }))
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
    if data.len() % (QS_G128_BYTES + SCALE_BYTES) != 0 {
        return Err(format!("{} bytes are not whole 34-byte 2-bit blocks", data.len()));
    }
    sniff_g128_blocks(&[data]).map(|(layout, _)| layout)
}

/// The structural check over (a strided sample of) every tensor's blocks, jointly: the layout
/// and the evidence in words.
fn sniff_g128_blocks(tensors: &[&[u8]]) -> Result<(TwoBitLayout, String), String> {
    const BLOCK: usize = QS_G128_BYTES + SCALE_BYTES;
    let (mut sampled, mut scale_last_bad, mut scale_first_bad, mut code_11) = (0usize, 0usize, 0usize, 0usize);
    for data in tensors {
        let n_blocks = data.len() / BLOCK;
        if n_blocks == 0 {
            continue;
        }
        let stride = n_blocks.div_ceil(MAX_SNIFFED_BLOCKS);
        for block in data.chunks_exact(BLOCK).step_by(stride) {
            let (qs_last, d_last) = block.split_at(QS_G128_BYTES);
            let eleven = has_code_11(qs_last);
            sampled += 1;
            code_11 += usize::from(eleven);
            scale_last_bad += usize::from(!plausible_scale(d_last[0], d_last[1]) || eleven);
            scale_first_bad += usize::from(!plausible_scale(block[0], block[1]));
        }
    }
    if sampled == 0 {
        return Err("no whole 34-byte 2-bit blocks to examine".into());
    }
    match (scale_last_bad == 0, scale_first_bad == 0) {
        (true, false) => Ok((
            TwoBitLayout::Tq2G128ScaleLast,
            format!(
                "scale last (OxiBonsai TQ2_0_g128): read scale-first, {scale_first_bad} of {sampled} sampled blocks \
                 would start with a negative, infinite or NaN f16"
            ),
        )),
        (false, true) => Ok((
            TwoBitLayout::Pq2G128ScaleFirst,
            format!(
                "scale first (legacy PrismML Q2_0 g128 = PQ2_0): read scale-last, {scale_last_bad} of {sampled} sampled \
                 blocks would end in an implausible f16 or hold code 11 ({code_11} do), which that layout never writes"
            ),
        )),
        (true, true) => Err(format!(
            "cannot tell the 2-bit layout of type 42 ({sampled} sampled blocks read as both TQ2_0_g128 \
             (d last) and Q2_0_g128 (d first)); set metadata '{}'",
            keys::BONSAI_TWO_BIT_LAYOUT
        )),
        (false, false) => Err(format!(
            "type 42 data ({sampled} sampled blocks) has no plausible f16 scale at either end of its blocks"
        )),
    }
}

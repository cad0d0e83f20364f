//! Re-packing a GGUF file's low-bit tensors into another low-bit type without the checkpoint
//! (`bonsai quantize`): every Q1_0, 2-bit (id 42 / 142) and ternary (PTQ1_0, TQ1_0, TQ2_0) tensor
//! becomes the target type; metadata and every other tensor are copied as they are.
//!
//! A tensor moves through its scales and integer levels ([`bonsai_gguf::Levels`]), so the result
//! holds exactly the same weights whenever the target can: Q1_0 -> any ternary type, between the
//! g128 ternary types, g128 -> g64, TQ's 256-groups -> 128. Otherwise (a zero into Q1_0, +2 into a
//! trit, g64 pairs with different scales into one g128 scale) the tensor is refused unless lossy
//! re-packing is allowed; then it is decoded to f32 and quantized with the target's quantizer.
//!
//! F32 and F16 targets decode every low-bit tensor ([`is_decoded_target`]): a file any GGUF tool
//! reads (llama.cpp's `llama-quantize`, or its f32 matmuls for an exact cross-engine check; F32
//! also widens the F16 / BF16 tensors, so every matmul of the file runs in f32 there). Every
//! low-bit weight is a small integer times an f16 scale, so f32 holds it exactly and f16 too
//! unless a +2 level doubles a scale past the f16 range (refused without --allow-lossy).

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use bonsai_gguf::blocks::level_range;
use bonsai_gguf::{
    decode_levels, dequantize, encode_levels, keys, quantize, GgufError, GgufFile, GgufWriter,
    MetaValue, TensorType, TwoBitLayout,
};
use rayon::prelude::*;

/// Rows re-packed per parallel task.
const ROWS_PER_TASK: usize = 64;
/// `general.quantization_version` llama.cpp writes.
const GGML_QUANTIZATION_VERSION: u32 = 2;

#[derive(Debug, thiserror::Error)]
pub enum RequantizeError {
    #[error(
        "tensor '{name}': {from} -> {to} would change weights ({reason}); pass --allow-lossy to re-quantize it from its decoded values"
    )]
    Lossy { name: String, from: &'static str, to: &'static str, reason: String },
    #[error("tensor '{name}': rows of {row_len} weights are not whole {group}-weight {to} groups")]
    RowLength { name: String, row_len: u64, group: usize, to: &'static str },
    #[error("{to} is not written (not a low-bit type, or a layout llama.cpp cannot read); quantize writes Q1_0, Q2_0, PQ2_0, PTQ1_0, F16 or F32")]
    NotWritten { to: &'static str },
    #[error("tensor '{name}': {source}")]
    Gguf { name: String, source: GgufError },
    #[error("'{0}' is the input file; write the output to another path")]
    SameFile(PathBuf),
    #[error("writing '{path}': {source}")]
    Write { path: PathBuf, source: io::Error },
}

/// Where a re-pack stands, reported after each tensor.
#[derive(Debug, Clone)]
pub struct RequantizeProgress<'a> {
    pub name: &'a str,
    pub tensors_done: usize,
    pub n_tensors: usize,
    /// Input tensor bytes handled so far / in all.
    pub bytes_done: u64,
    pub bytes_total: u64,
}

/// What a finished re-pack did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequantizeSummary {
    /// Tensors re-packed exactly.
    pub exact: usize,
    /// Tensors re-quantized from their values (only with lossy re-packing allowed), by name.
    pub lossy: Vec<String>,
    /// Tensors copied unchanged (float, Q8_0, or already the target type).
    pub copied: usize,
}

/// Whether `ty` is one of the types re-packed (the low-bit block types).
pub fn is_repacked(ty: TensorType) -> bool {
    level_range(ty).is_some()
}

/// Whether `to` is a float type that [`requantize`] decodes the low-bit tensors into.
pub fn is_decoded_target(to: TensorType) -> bool {
    matches!(to, TensorType::F32 | TensorType::F16)
}

/// Whether [`requantize`] to `to` rewrites a tensor of type `from` (else copies it).
fn is_rewritten(from: TensorType, to: TensorType) -> bool {
    is_repacked(from) || (to == TensorType::F32 && matches!(from, TensorType::F16 | TensorType::BF16))
}

/// One tensor's blocks in `to`: exact when possible, else (with `allow_lossy`) re-quantized from
/// the decoded values. Returns the bytes and whether any weight changed.
pub fn repack_tensor(
    name: &str,
    from: TensorType,
    shape: &[u64],
    data: &[u8],
    to: TensorType,
    allow_lossy: bool,
) -> Result<(Vec<u8>, bool), RequantizeError> {
    let row_len = shape.first().copied().unwrap_or(0);
    if row_len % to.block_elems() as u64 != 0 || row_len % from.block_elems() as u64 != 0 {
        return Err(RequantizeError::RowLength {
            name: name.into(),
            row_len,
            group: to.block_elems(),
            to: to.name(),
        });
    }
    let gguf = |source| RequantizeError::Gguf { name: name.into(), source };
    let row_len = row_len as usize;
    let (in_row, out_row) = (
        row_len / from.block_elems() * from.block_bytes(),
        row_len / to.block_elems() * to.block_bytes(),
    );
    let n_rows = data.len() / in_row;
    let mut out = vec![0u8; n_rows * out_row];
    let lossy = out
        .par_chunks_mut(out_row * ROWS_PER_TASK)
        .zip(data.par_chunks(in_row * ROWS_PER_TASK))
        .map(|(dst, src)| -> Result<bool, RequantizeError> {
            if is_decoded_target(to) {
                let mut values = vec![0f32; src.len() / from.block_bytes() * from.block_elems()];
                dequantize(from, src, &mut values).map_err(gguf)?;
                let bytes = quantize(to, &values).map_err(gguf)?;
                let mut back = vec![0f32; values.len()];
                dequantize(to, &bytes, &mut back).map_err(gguf)?;
                let changed = back != values;
                if changed && !allow_lossy {
                    return Err(RequantizeError::Lossy {
                        name: name.into(),
                        from: from.name(),
                        to: to.name(),
                        reason: "a weight is outside the f16 range".into(),
                    });
                }
                dst.copy_from_slice(&bytes);
                return Ok(changed);
            }
            let levels = decode_levels(from, src).map_err(gguf)?;
            match encode_levels(to, &levels) {
                Ok(bytes) => {
                    dst.copy_from_slice(&bytes);
                    Ok(false)
                }
                Err(reason) if !allow_lossy => Err(RequantizeError::Lossy {
                    name: name.into(),
                    from: from.name(),
                    to: to.name(),
                    reason: reason.to_string(),
                }),
                Err(_) => {
                    let mut values = vec![0f32; levels.levels.len()];
                    dequantize(from, src, &mut values).map_err(gguf)?;
                    dst.copy_from_slice(&quantize(to, &values).map_err(gguf)?);
                    Ok(true)
                }
            }
        })
        .try_reduce(|| false, |a, b| Ok(a || b))?;
    Ok((out, lossy))
}

/// The output's metadata: the input's, with `general.file_type` (when present) naming `to`, and
/// bonsai's id-42 layout key set for a Q2_0 g64 output and removed otherwise (a stale tag would
/// misread the new blocks), as is a layout tag in `general.quantization_version`.
fn output_metadata(file: &GgufFile, to: TensorType) -> GgufWriter {
    let mut w = GgufWriter::new();
    for (key, value) in file.metadata() {
        w.add_metadata(key, value.clone());
    }
    if file.get(keys::GENERAL_FILE_TYPE).is_some() {
        if let Some(ftype) = to.llama_file_type() {
            w.add_metadata(keys::GENERAL_FILE_TYPE, MetaValue::U32(ftype));
        }
    }
    if file.get(keys::GENERAL_QUANTIZATION_VERSION).and_then(MetaValue::as_str).is_some() {
        w.add_metadata(
            keys::GENERAL_QUANTIZATION_VERSION,
            MetaValue::U32(GGML_QUANTIZATION_VERSION),
        );
    }
    w.remove_metadata(keys::BONSAI_TWO_BIT_LAYOUT);
    if let TensorType::TwoBit(layout @ TwoBitLayout::Q2G64ScaleFirst) = to {
        w.add_metadata(
            keys::BONSAI_TWO_BIT_LAYOUT,
            MetaValue::String(bonsai_gguf::layout::layout_tag(layout).into()),
        );
    }
    w
}

/// Writes `file` with every low-bit tensor re-packed to `to` into `out`, one tensor in memory at
/// a time. `progress` is called before the first tensor and after each.
pub fn requantize(
    file: &GgufFile,
    to: TensorType,
    allow_lossy: bool,
    out: &mut impl Write,
    progress: &mut dyn FnMut(&RequantizeProgress<'_>),
) -> Result<RequantizeSummary, RequantizeError> {
    // The scale-last id-42 layout is read, never written: nothing but bonsai and OxiBonsai reads it.
    if !(is_repacked(to) || is_decoded_target(to)) || to == TensorType::TwoBit(TwoBitLayout::Tq2G128ScaleLast) {
        return Err(RequantizeError::NotWritten { to: to.name() });
    }
    let mut w = output_metadata(file, to);
    for t in file.tensors() {
        let gguf = |source| RequantizeError::Gguf { name: t.name.clone(), source };
        if is_rewritten(t.ty, to) {
            w.add_tensor_deferred(&t.name, &t.shape, to, to.canonical_type_id()).map_err(gguf)?;
        } else {
            let view = file.require_tensor(&t.name).map_err(gguf)?;
            w.add_tensor_with_type_id(&t.name, &t.shape, t.ty, t.type_id, view.data.to_vec())
                .map_err(gguf)?;
        }
    }
    let n_tensors = file.tensors().len();
    // Input bytes up to and including each tensor, in file order (the writer's order too).
    let done_after: Vec<u64> = file
        .tensors()
        .iter()
        .scan(0u64, |sum, t| {
            *sum += t.len_bytes;
            Some(*sum)
        })
        .collect();
    let bytes_total = done_after.last().copied().unwrap_or(0);
    let mut summary = RequantizeSummary::default();
    let mut failure = None;
    progress(&RequantizeProgress {
        name: "",
        tensors_done: 0,
        n_tensors,
        bytes_done: 0,
        bytes_total,
    });
    let mut index = 0;
    let written = w.write_streaming(out, |name| {
        // Deferred tensors come in file order; skip past the copied ones before this one.
        while file.tensors()[index].name != name {
            index += 1;
        }
        let view = file.require_tensor(name).map_err(|e| io::Error::other(e.to_string()))?;
        let result = if view.info.ty == to {
            Ok((view.data.to_vec(), None))
        } else {
            repack_tensor(name, view.info.ty, &view.info.shape, view.data, to, allow_lossy)
                .map(|(b, lossy)| (b, Some(lossy)))
        };
        progress(&RequantizeProgress {
            name,
            tensors_done: index + 1,
            n_tensors,
            bytes_done: done_after[index],
            bytes_total,
        });
        match result {
            Ok((bytes, changed)) => {
                match changed {
                    None => summary.copied += 1,
                    Some(false) => summary.exact += 1,
                    Some(true) => summary.lossy.push(name.to_string()),
                }
                Ok(bytes)
            }
            Err(e) => {
                let message = e.to_string();
                failure = Some(e);
                Err(io::Error::other(message))
            }
        }
    });
    if let Some(e) = failure {
        return Err(e);
    }
    written.map_err(|source| RequantizeError::Write { path: PathBuf::from("(output)"), source })?;
    summary.copied += file.tensors().iter().filter(|t| !is_rewritten(t.ty, to)).count();
    progress(&RequantizeProgress {
        name: "",
        tensors_done: n_tensors,
        n_tensors,
        bytes_done: bytes_total,
        bytes_total,
    });
    Ok(summary)
}

/// [`requantize`] from the file `input` to the file `output`, written atomically (a failure
/// leaves nothing at `output`); refuses to write over `input`.
pub fn requantize_file(
    input: &Path,
    output: &Path,
    to: TensorType,
    allow_lossy: bool,
    progress: &mut dyn FnMut(&RequantizeProgress<'_>),
) -> Result<RequantizeSummary, RequantizeError> {
    if let (Ok(a), Ok(b)) = (input.canonicalize(), output.canonicalize()) {
        if a == b {
            return Err(RequantizeError::SameFile(output.to_path_buf()));
        }
    }
    let file = GgufFile::open(input)
        .map_err(|source| RequantizeError::Gguf { name: input.display().to_string(), source })?;
    let mut summary = None;
    let mut failure = None;
    let written = bonsai_gguf::write_file_atomically(output, |w| {
        match requantize(&file, to, allow_lossy, w, progress) {
            Ok(s) => {
                summary = Some(s);
                Ok(())
            }
            Err(e) => {
                let message = e.to_string();
                failure = Some(e);
                Err(io::Error::other(message))
            }
        }
    });
    if let Some(e) = failure {
        return Err(e);
    }
    written.map_err(|source| RequantizeError::Write { path: output.to_path_buf(), source })?;
    summary.ok_or_else(|| RequantizeError::Write {
        path: output.to_path_buf(),
        source: io::Error::other("nothing written"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_of(tensors: &[(&str, TensorType, Vec<f32>)]) -> GgufFile {
        let mut w = GgufWriter::new();
        w.add_metadata(keys::GENERAL_FILE_TYPE, MetaValue::U32(40));
        for (name, ty, values) in tensors {
            w.add_tensor(name, &[128, values.len() as u64 / 128], *ty, quantize(*ty, values).unwrap()).unwrap();
        }
        let mut bytes = Vec::new();
        w.write_to(&mut bytes).unwrap();
        GgufFile::from_bytes(bytes).unwrap()
    }

    fn decoded(file: &GgufFile, name: &str) -> Vec<f32> {
        file.require_tensor(name).unwrap().dequantize_to_vec().unwrap()
    }

    /// f32 and f16 outputs hold every low-bit weight exactly; f32 tensors are copied.
    #[test]
    fn float_targets_decode_every_low_bit_weight_exactly() {
        let signs: Vec<f32> = (0..256).map(|i| if i % 3 == 0 { -0.75 } else { 0.75 }).collect();
        let trits: Vec<f32> = (0..256).map(|i| [-0.5f32, 0.0, 0.5][i % 3]).collect();
        let norm: Vec<f32> = (0..128).map(|i| 1.0 + i as f32 / 7.0).collect();
        let pq2 = TensorType::TwoBit(TwoBitLayout::Pq2G128ScaleFirst);
        let alpha: Vec<f32> = (0..128).map(|i| i as f32 / 3.0).collect();
        let input = file_of(&[
            ("a", TensorType::Q1_0, signs),
            ("b", pq2, trits),
            ("n", TensorType::F32, norm),
            ("alpha", TensorType::BF16, alpha),
        ]);
        // F32 widens the BF16 tensor too; F16 leaves it (its range is not BF16's).
        for (to, rewritten, alpha_ty) in [(TensorType::F32, 3, TensorType::F32), (TensorType::F16, 2, TensorType::BF16)] {
            let mut bytes = Vec::new();
            let summary = requantize(&input, to, false, &mut bytes, &mut |_| {}).unwrap();
            assert_eq!((summary.exact, summary.copied), (rewritten, 4 - rewritten), "{}", to.name());
            let out = GgufFile::from_bytes(bytes).unwrap();
            for name in ["a", "b", "n", "alpha"] {
                assert_eq!(decoded(&out, name), decoded(&input, name), "{name} as {}", to.name());
            }
            assert_eq!(out.tensor_info("a").unwrap().ty, to);
            assert_eq!(out.tensor_info("n").unwrap().ty, TensorType::F32);
            assert_eq!(out.tensor_info("alpha").unwrap().ty, alpha_ty);
            assert_eq!(out.get(keys::GENERAL_FILE_TYPE).and_then(MetaValue::as_integer), to.llama_file_type().map(i128::from));
        }
    }

    /// A +2 level on a scale above half the f16 range does not fit f16: refused by name, exact in f32.
    #[test]
    fn a_weight_beyond_the_f16_range_is_refused_for_f16_only() {
        // One PQ2_0 block by hand (the quantizer emits no +2): scale 40000, every code 3 (+2).
        let mut block = half::f16::from_f32(40_000.0).to_le_bytes().to_vec();
        block.extend([0xFFu8; 32]);
        let mut w = GgufWriter::new();
        w.add_tensor("w", &[128, 1], TensorType::TwoBit(TwoBitLayout::Pq2G128ScaleFirst), block).unwrap();
        let mut bytes = Vec::new();
        w.write_to(&mut bytes).unwrap();
        let input = GgufFile::from_bytes(bytes).unwrap();
        assert_eq!(decoded(&input, "w")[0], 80_000.0);
        let mut sink = Vec::new();
        let err = requantize(&input, TensorType::F16, false, &mut sink, &mut |_| {}).unwrap_err();
        assert!(matches!(&err, RequantizeError::Lossy { name, .. } if name == "w"), "{err}");
        let mut bytes = Vec::new();
        requantize(&input, TensorType::F32, false, &mut bytes, &mut |_| {}).unwrap();
        assert_eq!(decoded(&GgufFile::from_bytes(bytes).unwrap(), "w"), decoded(&input, "w"));
    }
}

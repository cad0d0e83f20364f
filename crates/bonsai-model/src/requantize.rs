//! Re-packing a GGUF file's low-bit tensors into another low-bit type without the checkpoint
//! (`bonsai quantize`): every Q1_0, 2-bit (id 42 / 142) and ternary (PTQ1_0, TQ1_0, TQ2_0) tensor
//! becomes the target type; metadata and every other tensor are copied as they are.
//!
//! A tensor moves through its scales and integer levels ([`bonsai_gguf::Levels`]), so the result
//! holds exactly the same weights whenever the target can: Q1_0 -> any ternary type, between the
//! g128 ternary types, g128 -> g64, TQ's 256-groups -> 128. Otherwise (a zero into Q1_0, +2 into a
//! trit, g64 pairs with different scales into one g128 scale) the tensor is refused unless lossy
//! re-packing is allowed; then it is decoded to f32 and quantized with the target's quantizer.

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
    #[error("{to} is not written (not a low-bit type, or a layout llama.cpp cannot read); quantize writes Q1_0, Q2_0, PQ2_0 or PTQ1_0")]
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
    if !is_repacked(to) || to == TensorType::TwoBit(TwoBitLayout::Tq2G128ScaleLast) {
        return Err(RequantizeError::NotWritten { to: to.name() });
    }
    let mut w = output_metadata(file, to);
    for t in file.tensors() {
        let gguf = |source| RequantizeError::Gguf { name: t.name.clone(), source };
        if is_repacked(t.ty) {
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
    summary.copied += file.tensors().iter().filter(|t| !is_repacked(t.ty)).count();
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

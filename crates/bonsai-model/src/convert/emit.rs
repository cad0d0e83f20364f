//! Turning the validated checkpoint into GGUF tensors and writing the file atomically.

use std::io::Write;
use std::path::{Path, PathBuf};

use bonsai_gguf::{quantize, GgufWriter, TensorType, TwoBitLayout};
use rayon::prelude::*;

use super::error::ConvertError;
use super::metadata::gguf_metadata;
use super::safetensors::{to_f32, TensorEntry};
use super::tensor_map::{PlannedTensor, TensorRole};
use super::{HfCheckpoint, OutputType};

/// Rows converted per parallel task: large enough to amortise scheduling, small enough that the
/// f32 scratch per task stays a few MB even for 12,288-wide rows.
const ROWS_PER_TASK: usize = 64;

impl OutputType {
    /// The GGUF block type linear weights are stored as.
    pub fn tensor_type(self) -> TensorType {
        match self {
            OutputType::Q1_0 => TensorType::Q1_0,
            OutputType::Q2_0 => TensorType::TwoBit(TwoBitLayout::Q2G64ScaleFirst),
            OutputType::Pq2_0 => TensorType::TwoBit(TwoBitLayout::Pq2G128ScaleFirst),
            OutputType::Ptq1_0 => TensorType::Ptq1_0,
            OutputType::F16 => TensorType::F16,
            OutputType::F32 => TensorType::F32,
        }
    }
}

/// Where a conversion stands, reported after each tensor.
#[derive(Debug, Clone)]
pub struct ConvertProgress<'a> {
    pub gguf_name: &'a str,
    pub tensors_done: usize,
    pub n_tensors: usize,
    /// Source (safetensors) bytes processed so far / in all.
    pub bytes_done: u64,
    pub bytes_total: u64,
}

/// What a finished conversion wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConvertSummary {
    pub n_tensors: usize,
    pub source_bytes: u64,
    pub output_bytes: u64,
}

/// Converts the checkpoint folder `dir` into `out` (written atomically: a failed run leaves no
/// file at `out`). `progress` is called once before the first tensor and after each tensor.
pub fn convert_checkpoint(
    dir: &Path,
    out: &Path,
    ty: OutputType,
    progress: &mut dyn FnMut(&ConvertProgress<'_>),
) -> Result<ConvertSummary, ConvertError> {
    let checkpoint = HfCheckpoint::open(dir, ty)?;
    let writer = build_gguf(&checkpoint, ty, progress)?;
    let output_bytes = write_atomically(&writer, out)?;
    Ok(ConvertSummary {
        n_tensors: checkpoint.tensors.len(),
        source_bytes: checkpoint.source_bytes(),
        output_bytes,
    })
}

/// Metadata plus every tensor, encoded, in a writer ready to be written.
pub fn build_gguf(
    checkpoint: &HfCheckpoint,
    ty: OutputType,
    progress: &mut dyn FnMut(&ConvertProgress<'_>),
) -> Result<GgufWriter, ConvertError> {
    let name = checkpoint
        .dir
        .canonicalize()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "qwen3".to_string());
    let mut writer = GgufWriter::new();
    for (key, value) in gguf_metadata(&name, &checkpoint.config, &checkpoint.tokenizer, ty)? {
        writer.add_metadata(&key, value);
    }
    let n_tensors = checkpoint.tensors.len();
    let bytes_total = checkpoint.source_bytes();
    let mut bytes_done = 0u64;
    progress(&ConvertProgress {
        gguf_name: "",
        tensors_done: 0,
        n_tensors,
        bytes_done,
        bytes_total,
    });
    for (index, planned) in checkpoint.tensors.iter().enumerate() {
        let (entry, bytes) = checkpoint.weights.tensor(&planned.hf_name)?;
        let (tensor_type, data) = encode_tensor(planned, entry, bytes, ty)?;
        writer
            .add_tensor(&planned.gguf_name, &planned.gguf_shape(), tensor_type, data)
            .map_err(|source| ConvertError::Gguf { name: planned.gguf_name.clone(), source })?;
        bytes_done += bytes.len() as u64;
        progress(&ConvertProgress {
            gguf_name: &planned.gguf_name,
            tensors_done: index + 1,
            n_tensors,
            bytes_done,
            bytes_total,
        });
    }
    Ok(writer)
}

/// Norms become F32; linear weights `ty`, row by row (each row is whole groups, checked when the
/// checkpoint was opened), rows spread over threads.
fn encode_tensor(
    planned: &PlannedTensor,
    entry: &TensorEntry,
    bytes: &[u8],
    ty: OutputType,
) -> Result<(TensorType, Vec<u8>), ConvertError> {
    let tensor_type = match planned.role {
        TensorRole::Norm => TensorType::F32,
        TensorRole::Linear => ty.tensor_type(),
    };
    let row_len = planned.row_len();
    let n_rows = entry.numel() / row_len;
    let in_row_bytes = bytes.len() / n_rows;
    let out_row_bytes = tensor_type
        .len_bytes_for(row_len as u64)
        .and_then(|b| usize::try_from(b).ok())
        .ok_or_else(|| ConvertError::GroupMisaligned {
            name: planned.hf_name.clone(),
            k: row_len,
            group: tensor_type.block_elems(),
            ty: ty.name(),
        })?;
    let mut out = vec![0u8; n_rows * out_row_bytes];
    out.par_chunks_mut(out_row_bytes * ROWS_PER_TASK)
        .zip(bytes.par_chunks(in_row_bytes * ROWS_PER_TASK))
        .try_for_each(|(dst, src)| -> Result<(), ConvertError> {
            let mut values = vec![0f32; src.len() / in_row_bytes * row_len];
            to_f32(&planned.hf_name, &entry.dtype, src, &mut values)?;
            let encoded = quantize(tensor_type, &values)
                .map_err(|source| ConvertError::Gguf { name: planned.hf_name.clone(), source })?;
            dst.copy_from_slice(&encoded);
            Ok(())
        })?;
    Ok((tensor_type, out))
}

/// Writes to `OUT.tmp-<pid>` next to `out`, syncs, renames over `out`; removes the temporary on
/// failure. Returns the bytes written.
pub fn write_atomically(writer: &GgufWriter, out: &Path) -> Result<u64, ConvertError> {
    let mut tmp_name = out.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(format!(".tmp-{}", std::process::id()));
    let tmp: PathBuf = out.with_file_name(tmp_name);
    let result = (|| -> std::io::Result<u64> {
        let file = std::fs::File::create(&tmp)?;
        let mut buffered = std::io::BufWriter::new(file);
        writer.write_to(&mut buffered)?;
        buffered.flush()?;
        let file = buffered.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        let len = file.metadata()?.len();
        std::fs::rename(&tmp, out)?;
        Ok(len)
    })();
    result.map_err(|source| {
        // Best effort: the temporary is ours and useless after a failure.
        let _ = std::fs::remove_file(&tmp);
        ConvertError::Write { path: out.to_path_buf(), source }
    })
}

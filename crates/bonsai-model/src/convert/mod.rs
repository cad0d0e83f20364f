//! Hugging Face Qwen3 checkpoint (config.json, safetensors shards, tokenizer files) -> one
//! self-contained GGUF, written the way llama.cpp's converter lays it out.
//!
//! Steps: [`HfCheckpoint::open`] reads and validates everything (architecture, tensor presence,
//! shapes, dtypes, group alignment for quantized types) before any heavy work, so a bad input
//! fails in seconds with a message naming the file / tensor / key.

mod emit;
mod error;
mod hf_config;
mod metadata;
mod safetensors;
mod tensor_map;
mod tokenizer;

#[cfg(test)]
mod safetensors_tests;
#[cfg(test)]
mod tokenizer_tests;

use std::path::{Path, PathBuf};

use serde_json::Value;

pub use emit::{build_gguf, convert_checkpoint, write_atomically, ConvertProgress, ConvertSummary};
pub use error::ConvertError;
pub use hf_config::{HfQwen3Config, RopeScalingSpec, QWEN3_MODEL_TYPE};
pub use metadata::{gguf_metadata, TOKENIZER_MODEL_GPT2, TOKENIZER_PRE_QWEN2};
pub use safetensors::{to_f32, Checkpoint, Dtype, SafetensorsFile, TensorEntry};
pub use tensor_map::{plan_tensors, PlannedTensor, TensorRole};
pub use tokenizer::{
    extract_tokenizer, TokenizerSources, TOKEN_TYPE_CONTROL, TOKEN_TYPE_NORMAL, TOKEN_TYPE_UNUSED,
    TOKEN_TYPE_USER_DEFINED,
};

/// The storage type chosen for linear weights (norms are always F32), each in the layout
/// llama.cpp (mainline or PrismML's fork) reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputType {
    /// Q1_0 (id 41), 128 weights per scale.
    Q1_0,
    /// Mainline Q2_0 (id 42), 64 weights per scale.
    Q2_0,
    /// PrismML PQ2_0 (id 142), 128 weights per scale, scale first.
    Pq2_0,
    /// PrismML PTQ1_0 (id 143), base-3 trits, 128 weights per scale, scale last.
    Ptq1_0,
    F16,
    F32,
}

/// Every `--type` spelling, for help and error messages.
pub const OUTPUT_TYPE_NAMES: &str = "q1_0, q2_0, pq2_0, ptq1_0, f16, f32";

impl OutputType {
    /// The spelling used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            OutputType::Q1_0 => "q1_0",
            OutputType::Q2_0 => "q2_0",
            OutputType::Pq2_0 => "pq2_0",
            OutputType::Ptq1_0 => "ptq1_0",
            OutputType::F16 => "f16",
            OutputType::F32 => "f32",
        }
    }

    /// Row length the type requires a multiple of (1 for plain floats).
    pub fn group_len(self) -> usize {
        self.tensor_type().block_elems()
    }
}

impl std::str::FromStr for OutputType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "q1_0" | "q1_0_g128" => Ok(OutputType::Q1_0),
            "q2_0" | "q2_0_g64" => Ok(OutputType::Q2_0),
            "pq2_0" => Ok(OutputType::Pq2_0),
            "ptq1_0" => Ok(OutputType::Ptq1_0),
            "f16" => Ok(OutputType::F16),
            "f32" => Ok(OutputType::F32),
            "tq2_0_g128" => Err("type 'tq2_0_g128' (the scale-last 2-bit layout) is no longer written: llama.cpp cannot \
                 read it; use pq2_0 (the same ternary values, scale first, id 142), ptq1_0 (id 143) or q2_0 (mainline, \
                 64-weight groups)"
                .to_string()),
            other => Err(format!("unknown type '{other}' ({OUTPUT_TYPE_NAMES})")),
        }
    }
}

/// A checkpoint folder, read and validated against the Qwen3 layout.
pub struct HfCheckpoint {
    pub dir: PathBuf,
    pub config: HfQwen3Config,
    pub tokenizer: bonsai_gguf::TokenizerMeta,
    pub tensors: Vec<PlannedTensor>,
    pub weights: Checkpoint,
}

fn read_json(path: &Path) -> Result<Value, ConvertError> {
    let bytes = std::fs::read(path).map_err(|e| ConvertError::io(path, e))?;
    serde_json::from_slice(&bytes)
        .map_err(|source| ConvertError::Json { path: path.to_path_buf(), source })
}

fn read_optional_json(path: &Path) -> Result<Option<Value>, ConvertError> {
    if path.is_file() {
        read_json(path).map(Some)
    } else {
        Ok(None)
    }
}

/// The chat template kept outside tokenizer_config.json by newer transformers.
fn read_chat_template_file(dir: &Path) -> Result<Option<String>, ConvertError> {
    let jinja = dir.join("chat_template.jinja");
    if jinja.is_file() {
        let text = std::fs::read_to_string(&jinja).map_err(|e| ConvertError::io(&jinja, e))?;
        return Ok(Some(text));
    }
    let json = dir.join("chat_template.json");
    Ok(read_optional_json(&json)?
        .and_then(|v| v.get("chat_template").and_then(Value::as_str).map(str::to_string)))
}

impl HfCheckpoint {
    /// Reads `dir` and checks every planned tensor: present, shape as config.json implies,
    /// BF16/F16/F32, and (for `ty`) row length a multiple of the group.
    pub fn open(dir: &Path, ty: OutputType) -> Result<Self, ConvertError> {
        if !dir.is_dir() {
            return Err(ConvertError::MissingFile(dir.to_path_buf()));
        }
        let config_value = read_json(&dir.join("config.json"))?;
        let config = HfQwen3Config::from_json(&config_value)?;
        let tokenizer_json = read_json(&dir.join("tokenizer.json"))?;
        let tokenizer_config = read_optional_json(&dir.join("tokenizer_config.json"))?;
        let tokenizer = extract_tokenizer(&TokenizerSources {
            tokenizer_json: &tokenizer_json,
            tokenizer_config: tokenizer_config.as_ref(),
            chat_template_file: read_chat_template_file(dir)?,
            vocab_size: config.vocab,
            config_bos_id: config.bos_token_id,
            config_eos_id: config.eos_token_id,
            config_pad_id: config.pad_token_id,
        })?;
        let weights = Checkpoint::open(dir)?;
        let tensors = plan_tensors(&config);
        for planned in &tensors {
            validate_tensor(&weights, planned, ty)?;
        }
        Ok(HfCheckpoint { dir: dir.to_path_buf(), config, tokenizer, tensors, weights })
    }

    /// Bytes of source tensor data the conversion reads (for progress reporting).
    pub fn source_bytes(&self) -> u64 {
        self.tensors
            .iter()
            .filter_map(|t| self.weights.tensor(&t.hf_name).ok())
            .map(|(entry, _)| entry.len_bytes() as u64)
            .sum()
    }
}

fn validate_tensor(
    weights: &Checkpoint,
    planned: &PlannedTensor,
    ty: OutputType,
) -> Result<(), ConvertError> {
    let (entry, _) = weights.tensor(&planned.hf_name)?;
    if entry.shape != planned.hf_shape {
        return Err(ConvertError::ShapeMismatch {
            name: planned.hf_name.clone(),
            found: entry.shape.clone(),
            expected: planned.hf_shape.clone(),
        });
    }
    if let Dtype::Other(dtype) = &entry.dtype {
        return Err(ConvertError::UnsupportedDtype {
            name: planned.hf_name.clone(),
            dtype: dtype.clone(),
        });
    }
    let k = planned.row_len();
    if planned.role == TensorRole::Linear && k % ty.group_len() != 0 {
        return Err(ConvertError::GroupMisaligned {
            name: planned.hf_name.clone(),
            k,
            group: ty.group_len(),
            ty: ty.name(),
        });
    }
    Ok(())
}

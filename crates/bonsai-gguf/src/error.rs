//! The one error type of the crate. Every message is one line and names the file, key, tensor or
//! type it is about, so a user can act on it without a backtrace.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    /// The io error is part of the message (not a `source`), so a cause chain prints it once.
    #[error("cannot read '{path}': {err}")]
    Io { path: PathBuf, err: std::io::Error },

    #[error("not a GGUF file (magic 0x{found:08x}, expected 0x{expected:08x} \"GGUF\")")]
    BadMagic { found: u32, expected: u32 },

    #[error("unsupported GGUF version {0} (this reader handles versions 2 and 3)")]
    UnsupportedVersion(u32),

    /// A header item (count, string, value, tensor info) runs past the end of the file.
    #[error("truncated GGUF: {what} at byte {offset} needs {needed} bytes but the file has {file_len} bytes")]
    Truncated { what: String, offset: u64, needed: u64, file_len: u64 },

    #[error("tensor '{name}' data ends at byte {end} past the file end ({file_len} bytes)")]
    TensorPastEnd { name: String, end: u64, file_len: u64 },

    #[error("unknown tensor type id {id} for tensor '{name}'")]
    UnknownTensorType { id: u32, name: String },

    #[error("unsupported tensor type {type_name} (id {id}) for tensor '{name}'; bonsai reads F32, F16, BF16, Q8_0, Q1_0, the 2-bit types 42/142, PTQ1_0 (143), TQ1_0 (34) and TQ2_0 (35)")]
    UnsupportedTensorType { id: u32, type_name: &'static str, name: String },

    #[error("unknown metadata value type id {id} for key '{key}'")]
    UnknownValueType { id: u32, key: String },

    #[error("metadata key '{key}': arrays nested deeper than {max_depth} levels")]
    NestingTooDeep { key: String, max_depth: usize },

    #[error("{what} is not valid UTF-8")]
    InvalidUtf8 { what: String },

    #[error("{kind} \"{escaped}\" contains a control character")]
    ControlCharacter { kind: &'static str, escaped: String },

    #[error("duplicate {kind} '{name}'")]
    Duplicate { kind: &'static str, name: String },

    #[error("general.alignment = {0} is not a power of two between 1 and 2^30")]
    BadAlignment(u64),

    #[error("tensor '{name}': {reason}")]
    BadTensorInfo { name: String, reason: String },

    #[error("tensor '{name}': {reason}")]
    AmbiguousLayout { name: String, reason: String },

    #[error("missing metadata key '{0}'")]
    MissingKey(String),

    #[error("metadata key '{key}' has type {found}, expected {expected}")]
    WrongType { key: String, expected: &'static str, found: String },

    #[error("metadata key '{key}' = {value} is out of range: {reason}")]
    OutOfRange { key: String, value: String, reason: String },

    #[error("unsupported architecture '{0}' (bonsai runs qwen3 and qwen35)")]
    UnsupportedArchitecture(String),

    /// The `prism.hadamard.*` contract (bonsai2.md §4.1) is broken or names something unknown.
    #[error("Hadamard metadata: '{key}' {reason}")]
    Hadamard { key: String, reason: String },

    #[error("missing tensor '{0}'")]
    MissingTensor(String),

    /// Buffer length does not match what a (de)quantizer needs.
    #[error("{op} {type_name}: {reason}")]
    BadLength { op: &'static str, type_name: &'static str, reason: String },

    #[error("quantize {type_name}: input element {index} is {value}, not finite")]
    NonFiniteInput { type_name: &'static str, index: usize, value: f32 },
}

//! Errors of the checkpoint converter. Each message names the file, tensor or key at fault.

use std::path::PathBuf;

/// Everything that can go wrong while reading a Hugging Face checkpoint or writing its GGUF.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    #[error("missing file {}", .0.display())]
    MissingFile(PathBuf),

    #[error("cannot read {}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },

    #[error("{}: invalid JSON: {source}", path.display())]
    Json { path: PathBuf, source: serde_json::Error },

    #[error("{}: {what}", path.display())]
    BadFile { path: PathBuf, what: String },

    #[error("config.json: missing or invalid key '{key}' ({expected})")]
    ConfigKey { key: String, expected: &'static str },

    #[error("unsupported architecture: config.json model_type is '{0}', expected 'qwen3'")]
    UnsupportedArchitecture(String),

    #[error("unsupported rope scaling type '{0}' in config.json (supported: yarn, linear)")]
    UnsupportedRopeScaling(String),

    #[error("tokenizer.json: {0}")]
    Tokenizer(String),

    #[error("missing tensor '{0}' in the checkpoint")]
    MissingTensor(String),

    #[error("tensor '{name}' appears in more than one shard ({first} and {second})")]
    DuplicateTensor { name: String, first: String, second: String },

    #[error("tensor '{name}' has shape {found:?}, config.json implies {expected:?}")]
    ShapeMismatch { name: String, found: Vec<usize>, expected: Vec<usize> },

    #[error("tensor '{name}' has dtype {dtype}; supported: BF16, F16, F32")]
    UnsupportedDtype { name: String, dtype: String },

    #[error(
        "tensor '{name}': K = {k} (input dim) is not a multiple of {group} as {ty} needs; \
         use --type f16 or f32"
    )]
    GroupMisaligned { name: String, k: usize, group: usize, ty: &'static str },

    #[error("tensor '{name}': {source}")]
    Gguf { name: String, source: bonsai_gguf::GgufError },

    #[error("cannot write {}: {source}", path.display())]
    Write { path: PathBuf, source: std::io::Error },
}

impl ConvertError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        let path = path.into();
        if source.kind() == std::io::ErrorKind::NotFound {
            return ConvertError::MissingFile(path);
        }
        ConvertError::Io { path, source }
    }

    pub(crate) fn bad_file(path: impl Into<PathBuf>, what: impl Into<String>) -> Self {
        ConvertError::BadFile { path: path.into(), what: what.into() }
    }
}

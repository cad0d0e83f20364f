//! Opening a model file: config, tokenizer and weights from one GGUF onto a backend (a qwen3 or
//! a qwen35 file, by `general.architecture`).

use std::path::Path;

use bonsai_gguf::{keys, GgufFile, Qwen35Config, Qwen3Config, SamplingDefaults, TokenizerMeta};

use crate::backend::Backend;
use crate::qwen3::{HostWeights, Qwen3};
use crate::tokenizer::Tokenizer;
use crate::ModelError;

/// Context size when the user gives none (capped by the model's own context length).
pub const DEFAULT_CTX: usize = 4096;

pub struct LoadedModel<B: Backend> {
    pub model: Qwen3<B>,
    /// None when the file carries no tokenizer (no `tokenizer.ggml.*` metadata): it still runs
    /// on token ids (`bench`, `check`), as llama-bench runs such files.
    pub tokenizer: Option<Tokenizer>,
    pub chat_template: Option<String>,
    /// Weight bytes read per decoded token (for bandwidth figures).
    pub decode_bytes_per_token: usize,
    /// The sampler settings the file recommends (`general.sampling.*`).
    pub sampling: SamplingDefaults,
}

/// The context to size the cache for: `requested`, or the default, within the model's limit.
pub fn resolve_ctx(config: &Qwen3Config, requested: Option<usize>) -> Result<usize, ModelError> {
    resolve_context(config.context_len, requested)
}

fn resolve_context(context_len: usize, requested: Option<usize>) -> Result<usize, ModelError> {
    match requested {
        Some(0) => Err(ModelError::Unsupported("--ctx 0".into())),
        Some(n) if n > context_len => {
            Err(ModelError::Unsupported(format!("--ctx {n} exceeds the model's context length of {context_len}")))
        }
        Some(n) => Ok(n),
        None => Ok(DEFAULT_CTX.min(context_len)),
    }
}

impl<B: Backend> LoadedModel<B> {
    /// The tokenizer, or an error saying the file has none (for commands that need text).
    pub fn text_tokenizer(&self) -> Result<&Tokenizer, ModelError> {
        self.tokenizer.as_ref().ok_or_else(|| {
            ModelError::Unsupported(
                "the file has no tokenizer (no tokenizer.ggml.* metadata): this command needs text; `bench` and \
                 `check --prompt-tokens` run on token ids"
                    .into(),
            )
        })
    }
}

/// The metadata key whose absence means "no tokenizer" (a file with a broken tokenizer is an
/// error, not a file without one).
const TOKENIZER_TOKENS_KEY: &str = "tokenizer.ggml.tokens";

/// The architecture of `file` (`general.architecture`) and its config.
enum FileConfig {
    Qwen3(Qwen3Config),
    Qwen35(Qwen35Config),
}

/// Loads every part of the model in `file` onto `backend` with a cache of `ctx` tokens.
pub fn load_model<B: Backend>(file: &GgufFile, backend: B, ctx: Option<usize>) -> Result<LoadedModel<B>, ModelError> {
    let config = match file.get_str(keys::GENERAL_ARCHITECTURE)? {
        keys::ARCH_QWEN35 => FileConfig::Qwen35(Qwen35Config::from_gguf(file)?),
        _ => FileConfig::Qwen3(Qwen3Config::from_gguf(file)?),
    };
    let (vocab, context_len) = match &config {
        FileConfig::Qwen3(c) => (c.vocab, c.context_len),
        FileConfig::Qwen35(c) => (c.vocab, c.context_len),
    };
    let ctx = resolve_context(context_len, ctx)?;
    let (tokenizer, chat_template) = match file.get(TOKENIZER_TOKENS_KEY) {
        None => (None, None),
        Some(_) => {
            let meta = TokenizerMeta::from_gguf(file)?;
            let chat_template = meta.chat_template.clone();
            let tokenizer = Tokenizer::from_parts(&meta)?;
            if tokenizer.vocab_size() != vocab {
                return Err(ModelError::Unsupported(format!(
                    "tokenizer has {} tokens but token_embd has {vocab} rows",
                    tokenizer.vocab_size(),
                )));
            }
            (Some(tokenizer), chat_template)
        }
    };
    let (model, decode_bytes_per_token) = match config {
        FileConfig::Qwen3(config) => {
            let host = HostWeights::load(&config, file)?;
            let bytes = host.decode_bytes_per_token();
            (Qwen3::new(backend, config, host, ctx)?, bytes)
        }
        FileConfig::Qwen35(config) => {
            let host = crate::qwen35::HostWeights::load(&config, file)?;
            let bytes = host.decode_bytes_per_token();
            (Qwen3::new_qwen35(backend, config, host, ctx)?, bytes)
        }
    };
    Ok(LoadedModel { model, tokenizer, chat_template, decode_bytes_per_token, sampling: SamplingDefaults::from_gguf(file) })
}

/// Opens `path` and loads it (see [`load_model`]).
pub fn open_model<B: Backend>(path: &Path, backend: B, ctx: Option<usize>) -> Result<LoadedModel<B>, ModelError> {
    let file = GgufFile::open(path)?;
    load_model(&file, backend, ctx)
}

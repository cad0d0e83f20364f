//! The built-in default model, used when no `-m`/`-hf` is given: bonsai-tiny-stories, a 1-bit
//! (Q1_0) Qwen3 trained on simple children's stories (models/, scripts/default-model/). Its GGUF
//! is compiled into the binary, so an installed `bonsai` needs neither the repository nor a
//! download; on first use it is written to the cache directory, because the loader maps files.

use std::path::PathBuf;

use anyhow::Context;

/// The GGUF, as scripts/default-model/install.sh wrote it.
const DEFAULT_MODEL: &[u8] = include_bytes!("../../../models/bonsai-tiny-stories-q1_0.gguf");
const DEFAULT_MODEL_FILE_NAME: &str = "bonsai-tiny-stories-q1_0.gguf";

/// The default model's path in the cache directory, written there (atomically) unless a file
/// with exactly its bytes is already there. Announced on stderr.
pub fn default_model_path(config: &bonsai_kernels::Config) -> anyhow::Result<PathBuf> {
    let dir = config
        .cache_dir
        .clone()
        .context("no cache directory: set BONSAI_CACHE_DIR (HOME is not set)")?;
    let path = dir.join(DEFAULT_MODEL_FILE_NAME);
    // Comparing the bytes (a few MB) is what keeps an older binary's copy from being used.
    if std::fs::read(&path).ok().as_deref() != Some(DEFAULT_MODEL) {
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("creating cache directory {}", dir.display()))?;
        bonsai_gguf::write_file_atomically(&path, |file| std::io::Write::write_all(file, DEFAULT_MODEL))
            .with_context(|| format!("writing the default model to {}", path.display()))?;
    }
    eprintln!("note: no -m given; using the built-in default model ({}), a small 1-bit model trained on children's stories", path.display());
    Ok(path)
}


//! The built-in demo model: written on first use into the user's cache directory, so `bonsai
//! generate` works without a download. Its weights are random: the text it makes is gibberish.

use std::path::PathBuf;

use anyhow::Context;
use bonsai_model::demo::demo_gguf_writer;

/// Bump when the demo's geometry, seed or vocab changes, so an old cached file is not reused.
const DEMO_FILE_NAME: &str = "demo-qwen3-q1_0-v1.gguf";

/// The demo model's path in the cache directory, writing it (atomically) if it is not there yet.
/// Announced on stderr.
pub fn demo_model_path(config: &bonsai_kernels::Config) -> anyhow::Result<PathBuf> {
    let dir = config.cache_dir.clone().context("no cache directory: set BONSAI_CACHE_DIR (HOME is not set)")?;
    let path = dir.join(DEMO_FILE_NAME);
    if !path.is_file() {
        std::fs::create_dir_all(&dir).with_context(|| format!("creating cache directory {}", dir.display()))?;
        let writer = demo_gguf_writer().context("building the demo model")?;
        writer.write_file(&path).with_context(|| format!("writing the demo model to {}", path.display()))?;
    }
    eprintln!(
        "note: no -m given; using the built-in demo model ({}): random weights, so the output is gibberish",
        path.display()
    );
    Ok(path)
}

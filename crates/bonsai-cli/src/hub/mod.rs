//! `-hf OWNER/REPO[:QUANT]` and `--hf-file NAME`: a model named by its Hugging Face repository,
//! downloaded once into the cache that `huggingface_hub` uses, with llama.cpp's conventions.
//!
//! - [`select`]: the `-hf` argument and which GGUF file of the repository it picks;
//! - [`config`]: endpoint, cache folder, token and offline mode from the environment;
//! - [`client`]: the two hub API calls and their error messages;
//! - [`cache`]: the cache layout (blobs, snapshots, refs);
//! - [`download`]: streaming, resuming and checking one file.

mod cache;
mod client;
mod config;
mod download;
mod select;
#[cfg(test)]
pub(crate) mod test_server;
#[cfg(test)]
mod tests;

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::Context;

use cache::RepoCache;
use client::{Client, HubError};
pub use config::HubConfig;
use select::{RepoSpec, Want};

/// The branch `-hf` follows.
const REVISION: &str = "main";

/// The model options every model-loading command shares with `-m`.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct HubArgs {
    /// Download the model from a Hugging Face repository (short: -hf), into the Hugging Face
    /// cache; QUANT picks the GGUF file whose name contains it (e.g. :Q1_0)
    #[arg(long = "hf-repo", value_name = "OWNER/REPO[:QUANT]")]
    pub hf_repo: Option<String>,
    /// The file of --hf-repo to use (short: -hff), instead of choosing by QUANT
    #[arg(long = "hf-file", value_name = "NAME", requires = "hf_repo")]
    pub hf_file: Option<String>,
}

impl HubArgs {
    /// The local path of the file `-hf` names, downloaded first when the cache lacks it; None
    /// without `-hf`.
    pub fn fetch(&self) -> anyhow::Result<Option<PathBuf>> {
        let Some(repo) = &self.hf_repo else { return Ok(None) };
        let spec = RepoSpec::parse(repo)?;
        let config = HubConfig::from_env()?;
        resolve(&spec, self.hf_file.as_deref(), &config).map(Some)
    }
}

/// Rewrites llama.cpp's multi-letter short options, which clap cannot define, to their long
/// forms: `-hf` to `--hf-repo`, `-hff` to `--hf-file`, `-np` to `--parallel` (whole arguments only, none after `--`).
pub fn expand_short_options(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut after_separator = false;
    args.into_iter()
        .map(|arg| {
            if after_separator {
                return arg;
            }
            match arg.to_str() {
                Some("--") => {
                    after_separator = true;
                    arg
                }
                Some("-hf") => "--hf-repo".into(),
                Some("-hff") => "--hf-file".into(),
                Some("-np") => "--parallel".into(),
                _ => arg,
            }
        })
        .collect()
}

/// What the user asked for, as they typed it (for messages).
fn label(spec: &RepoSpec, file: Option<&str>) -> String {
    match (file, &spec.quant) {
        (Some(file), _) => format!("{}/{file}", spec.repo),
        (None, Some(quant)) => format!("{}:{quant}", spec.repo),
        (None, None) => spec.repo.clone(),
    }
}

/// The cached file for `spec` / `file` at the commit `refs/main` last recorded, chosen among the
/// cached files with the same rules as online. Err: the cached GGUF files, and why none fits.
fn from_cache(repo: &RepoCache, spec: &RepoSpec, want: Want) -> Result<PathBuf, (Vec<String>, anyhow::Error)> {
    let Some(commit) = repo.read_ref(REVISION) else {
        return Err((Vec::new(), anyhow::anyhow!("nothing of {} is cached", spec.repo)));
    };
    let names = repo.snapshot_files(&commit);
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    match select::choose(&spec.repo, &refs, want) {
        Ok(chosen) => Ok(repo.snapshot(&commit, chosen)),
        Err(why) => Err((names.iter().filter(|n| select::is_gguf(n)).cloned().collect(), why)),
    }
}

/// The offline answer: the cached file, or why there is none.
fn offline(repo: &RepoCache, spec: &RepoSpec, want: Want) -> anyhow::Result<PathBuf> {
    match from_cache(repo, spec, want) {
        Ok(path) => Ok(path),
        // Several cached files and nothing to choose by: the same message as online.
        Err((cached, why)) if cached.len() > 1 && want.file.is_none() && want.quant.is_none() => {
            Err(why.context("HF_HUB_OFFLINE is set; among the cached files"))
        }
        Err((cached, _)) => anyhow::bail!(
            "HF_HUB_OFFLINE is set and {} is not in the cache {} (cached GGUF files: {}); unset HF_HUB_OFFLINE to download it",
            label(spec, want.file),
            repo.root().display(),
            if cached.is_empty() { "none".to_string() } else { cached.join(", ") }
        ),
    }
}

/// The local path of the file that `spec` and `file` name: from the cache when it holds the
/// file at the commit `main` points at, else downloaded. Offline (`HF_HUB_OFFLINE`), or when
/// the hub cannot be reached, the cache's last recorded commit serves.
pub fn resolve(spec: &RepoSpec, file: Option<&str>, config: &HubConfig) -> anyhow::Result<PathBuf> {
    let want = Want { file, quant: spec.quant.as_deref() };
    let repo = RepoCache::new(&config.cache_dir, &spec.repo);
    if config.offline {
        return offline(&repo, spec, want);
    }
    let client = Client::new(config);
    let listing = match client.list(&spec.repo, REVISION) {
        Ok(listing) => listing,
        Err(HubError::Unreachable(why)) => {
            let unreachable = client.explain(HubError::Unreachable(why), &spec.repo, None);
            return match from_cache(&repo, spec, want) {
                Ok(path) => {
                    eprintln!("note: {unreachable:#}; using the cached {}", path.display());
                    Ok(path)
                }
                _ => Err(unreachable),
            };
        }
        Err(e) => return Err(client.explain(e, &spec.repo, None)),
    };
    let names: Vec<&str> = listing.files.iter().map(|f| f.name.as_str()).collect();
    let chosen = select::choose(&spec.repo, &names, want)?;
    let remote = listing.files.iter().find(|f| f.name == chosen).expect("the chosen file is listed");
    if let Some(path) = repo.cached(&listing.commit, chosen) {
        repo.write_ref(REVISION, &listing.commit).context("recording the commit in the cache")?;
        return Ok(path);
    }
    let etag = remote.etag().with_context(|| {
        format!("{}: the hub lists {chosen} without a hash or blob id", client.endpoint())
    })?;
    let blob = repo.blob(etag);
    if !blob.is_file() {
        let dir = blob.parent().expect("a blob path has a parent");
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let size = remote.size.map(|s| format!(" ({})", indicatif::HumanBytes(s))).unwrap_or_default();
        eprintln!("downloading {}/{chosen}{size} into {}", spec.repo, config.cache_dir.display());
        let target = download::Remote {
            repo: &spec.repo,
            file: chosen,
            url: client.file_url(&spec.repo, &listing.commit, chosen),
            size: remote.size,
            sha256: remote.sha256.as_deref(),
        };
        download::download(&client, &target, &blob, config.retries, config.progress)?;
    }
    let path = repo
        .link(&listing.commit, chosen, etag)
        .with_context(|| format!("linking {chosen} into the cache {}", repo.root().display()))?;
    repo.write_ref(REVISION, &listing.commit).context("recording the commit in the cache")?;
    Ok(path)
}

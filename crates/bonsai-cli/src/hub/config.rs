//! Where the hub is and where its files go, read from the environment variables that
//! `huggingface_hub` reads, so that both tools share one cache and one login.

use std::path::{Path, PathBuf};

use anyhow::Context;

/// The public hub.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// How `-hf` talks to the hub and where it keeps files.
#[derive(Clone, Debug)]
pub struct HubConfig {
    /// Base URL, without a trailing slash (`HF_ENDPOINT`).
    pub endpoint: String,
    /// The hub cache: `models--OWNER--REPO` folders live here.
    pub cache_dir: PathBuf,
    /// Sent as `Authorization: Bearer` (gated and private repositories).
    pub token: Option<String>,
    /// `HF_HUB_OFFLINE`: never touch the network, use the cache or fail.
    pub offline: bool,
    /// Draw a progress bar on stderr.
    pub progress: bool,
    /// Further attempts after a download breaks off, each resuming where the last stopped.
    pub retries: u32,
}

impl HubConfig {
    /// The configuration from this process's environment.
    pub fn from_env() -> anyhow::Result<Self> {
        use std::io::IsTerminal;
        let mut config = Self::from_lookup(|name| std::env::var(name).ok())?;
        config.progress = std::io::stderr().is_terminal();
        Ok(config)
    }

    /// The configuration from `get` (an environment lookup; empty values count as unset):
    /// - cache: `HF_HUB_CACHE`, else `$HF_HOME/hub`, else `$XDG_CACHE_HOME/huggingface/hub`,
    ///   else `~/.cache/huggingface/hub`;
    /// - token: `HF_TOKEN`, else the file `HF_TOKEN_PATH`, else `$HF_HOME/token` (where
    ///   `huggingface-cli login` writes it);
    /// - `HF_ENDPOINT`, `HF_HUB_OFFLINE` (1, true, yes or on).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> anyhow::Result<Self> {
        let get = |name: &str| get(name).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        let hf_home = || -> anyhow::Result<PathBuf> {
            if let Some(home) = get("HF_HOME") {
                return Ok(PathBuf::from(home));
            }
            let cache = match get("XDG_CACHE_HOME") {
                Some(xdg) => PathBuf::from(xdg),
                None => PathBuf::from(get("HOME").context(
                    "no Hugging Face cache directory: set HF_HUB_CACHE or HF_HOME (HOME is not set)",
                )?)
                .join(".cache"),
            };
            Ok(cache.join("huggingface"))
        };
        let cache_dir = match get("HF_HUB_CACHE") {
            Some(dir) => PathBuf::from(dir),
            None => hf_home()?.join("hub"),
        };
        let token = match get("HF_TOKEN") {
            Some(token) => Some(token),
            None => {
                let file = match get("HF_TOKEN_PATH") {
                    Some(path) => Some(PathBuf::from(path)),
                    None => hf_home().ok().map(|home| home.join("token")),
                };
                file.as_deref().and_then(read_token)
            }
        };
        let endpoint = get("HF_ENDPOINT").unwrap_or_else(|| DEFAULT_ENDPOINT.to_string());
        let offline = get("HF_HUB_OFFLINE")
            .is_some_and(|v| matches!(v.to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on"));
        Ok(HubConfig {
            endpoint: endpoint.trim_end_matches('/').to_string(),
            cache_dir,
            token,
            offline,
            progress: false,
            retries: 3,
        })
    }
}

/// The token stored in `path`, if the file exists and holds one.
fn read_token(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let token = text.trim();
    (!token.is_empty()).then(|| token.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn config(vars: &[(&str, &str)]) -> anyhow::Result<HubConfig> {
        let vars: HashMap<String, String> =
            vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        HubConfig::from_lookup(|name| vars.get(name).cloned())
    }

    #[test]
    fn the_cache_follows_huggingface_hub_precedence() {
        let home = [("HOME", "/home/u")];
        assert_eq!(config(&home).unwrap().cache_dir, Path::new("/home/u/.cache/huggingface/hub"));
        let xdg = [("HOME", "/home/u"), ("XDG_CACHE_HOME", "/xdg")];
        assert_eq!(config(&xdg).unwrap().cache_dir, Path::new("/xdg/huggingface/hub"));
        let hf_home = [("HOME", "/home/u"), ("XDG_CACHE_HOME", "/xdg"), ("HF_HOME", "/hf")];
        assert_eq!(config(&hf_home).unwrap().cache_dir, Path::new("/hf/hub"));
        let hub = [("HF_HOME", "/hf"), ("HF_HUB_CACHE", "/hub-cache")];
        assert_eq!(config(&hub).unwrap().cache_dir, Path::new("/hub-cache"));
        // An empty value is unset.
        let empty = [("HOME", "/home/u"), ("HF_HUB_CACHE", ""), ("HF_HOME", " ")];
        assert_eq!(config(&empty).unwrap().cache_dir, Path::new("/home/u/.cache/huggingface/hub"));
        let err = config(&[]).unwrap_err().to_string();
        assert!(err.contains("set HF_HUB_CACHE or HF_HOME"), "{err}");
    }

    #[test]
    fn endpoint_offline_and_token() {
        let c = config(&[("HF_HUB_CACHE", "/c")]).unwrap();
        assert_eq!(c.endpoint, DEFAULT_ENDPOINT);
        assert!(!c.offline);
        let c = config(&[("HF_HUB_CACHE", "/c"), ("HF_ENDPOINT", "http://127.0.0.1:9/"), ("HF_HUB_OFFLINE", "1")])
            .unwrap();
        assert_eq!(c.endpoint, "http://127.0.0.1:9");
        assert!(c.offline);
        for (value, offline) in [("TRUE", true), ("yes", true), ("on", true), ("0", false), ("false", false)] {
            let c = config(&[("HF_HUB_CACHE", "/c"), ("HF_HUB_OFFLINE", value)]).unwrap();
            assert_eq!(c.offline, offline, "HF_HUB_OFFLINE={value}");
        }
        let c = config(&[("HF_HUB_CACHE", "/c"), ("HF_TOKEN", " hf_abc\n")]).unwrap();
        assert_eq!(c.token.as_deref(), Some("hf_abc"));
    }

    #[test]
    fn the_token_file_is_read_when_hf_token_is_unset() {
        let dir = std::env::temp_dir().join(format!("bonsai-hub-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("token"), "hf_from_file\n").unwrap();
        let home = dir.to_str().unwrap();
        let c = config(&[("HF_HOME", home)]).unwrap();
        assert_eq!(c.token.as_deref(), Some("hf_from_file"));
        let c = config(&[("HF_HOME", home), ("HF_TOKEN", "hf_env")]).unwrap();
        assert_eq!(c.token.as_deref(), Some("hf_env"), "HF_TOKEN wins over the file");
        std::fs::write(dir.join("other"), "hf_other").unwrap();
        let other = dir.join("other");
        let c = config(&[("HF_HOME", home), ("HF_TOKEN_PATH", other.to_str().unwrap())]).unwrap();
        assert_eq!(c.token.as_deref(), Some("hf_other"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

//! The hub's HTTP API, the two calls `-hf` needs: list a repository's files at a revision
//! (`GET /api/models/{repo}/revision/{rev}?blobs=true`) and fetch one file, from a byte offset
//! (`GET /{repo}/resolve/{commit}/{file}`, which redirects to the storage that serves it).
//! Failures become one-line messages that say what to do.

use std::io::Read;
use std::net::IpAddr;
use std::time::Duration;

use anyhow::anyhow;
use serde_json::Value;
use ureq::http::Response;
use ureq::Body;

use super::cache::safe_relative;
use super::HubConfig;

/// A file of a repository at one commit, as the API lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepoFile {
    /// Path in the repository (`/`-separated).
    pub name: String,
    pub size: Option<u64>,
    /// LFS files: the SHA-256 of the content, also the blob's name in the cache.
    pub sha256: Option<String>,
    /// The git blob id: the cache's blob name for files outside LFS.
    pub blob_id: Option<String>,
}

impl RepoFile {
    /// The blob's name in the cache: `huggingface_hub` names blobs by the resolve endpoint's
    /// etag, which is the SHA-256 for LFS files and the git blob id otherwise.
    pub fn etag(&self) -> Option<&str> {
        self.sha256.as_deref().or(self.blob_id.as_deref())
    }
}

/// A repository's files at one commit.
#[derive(Clone, Debug)]
pub struct Listing {
    pub commit: String,
    pub files: Vec<RepoFile>,
}

/// Why a request failed.
#[derive(Debug)]
pub enum HubError {
    /// No answer: DNS, connection, TLS, timeout.
    Unreachable(String),
    /// The hub answered with an error status; `code` is its `X-Error-Code` header.
    Status { status: u16, code: Option<String>, message: Option<String> },
    /// An answer that is not what the API returns.
    Invalid(String),
}

pub struct Client {
    agent: ureq::Agent,
    endpoint: String,
    token: Option<String>,
}

/// Non-empty and hexadecimal.
fn is_hex(text: &str) -> bool {
    !text.is_empty() && text.chars().all(|c| c.is_ascii_hexdigit())
}

/// Percent-encodes a repository path for a URL, keeping `/` between its parts.
fn encode_path(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Whether the endpoint's host is this machine (then no proxy applies).
fn is_loopback(endpoint: &str) -> bool {
    let rest = endpoint.split_once("://").map_or(endpoint, |(_, rest)| rest);
    let authority = rest.split('/').next().unwrap_or("");
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => authority.rsplit_once(':').map_or(authority, |(host, _)| host),
    };
    host.eq_ignore_ascii_case("localhost") || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Reads an error answer's explanation: `X-Error-Message`, else the JSON body's `error`.
fn error_of(response: Response<Body>) -> HubError {
    let status = response.status().as_u16();
    let header = |name: &str| {
        response.headers().get(name).and_then(|v| v.to_str().ok()).map(|v| v.trim().to_string())
    };
    let code = header("x-error-code").filter(|c| !c.is_empty());
    let mut message = header("x-error-message").filter(|m| !m.is_empty());
    if message.is_none() {
        let mut text = String::new();
        let _ = response.into_body().into_reader().take(64 * 1024).read_to_string(&mut text);
        message = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v["error"].as_str().map(str::to_string))
            .filter(|m| !m.is_empty());
    }
    // One line, whatever the server sent.
    let message = message.map(|m| m.split_whitespace().collect::<Vec<_>>().join(" "));
    HubError::Status { status, code, message }
}

impl Client {
    pub fn new(config: &HubConfig) -> Self {
        let mut builder = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .user_agent(format!("bonsai/{}", env!("CARGO_PKG_VERSION")))
            .timeout_connect(Some(Duration::from_secs(30)))
            .timeout_recv_response(Some(Duration::from_secs(60)))
            // A stalled transfer ends (and is resumed) instead of hanging.
            .timeout_per_read(Some(Duration::from_secs(60)))
            // The token goes along when the hub redirects within itself (a renamed repository),
            // never to the storage host it redirects downloads to.
            .redirect_auth_headers(ureq::config::RedirectAuthHeaders::SameHost);
        if is_loopback(&config.endpoint) {
            builder = builder.proxy(None);
        }
        Client {
            agent: builder.build().into(),
            endpoint: config.endpoint.clone(),
            token: config.token.clone(),
        }
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    fn get(&self, url: &str) -> ureq::RequestBuilder<ureq::typestate::WithoutBody> {
        let request = self.agent.get(url);
        match &self.token {
            Some(token) => request.header("Authorization", format!("Bearer {token}")),
            None => request,
        }
    }

    /// The files of `repo` at `revision`, with their sizes and hashes.
    pub fn list(&self, repo: &str, revision: &str) -> Result<Listing, HubError> {
        let url = format!("{}/api/models/{repo}/revision/{}?blobs=true", self.endpoint, encode_path(revision));
        let response = self.get(&url).call().map_err(|e| HubError::Unreachable(e.to_string()))?;
        if !response.status().is_success() {
            return Err(error_of(response));
        }
        let text = response
            .into_body()
            .into_with_config()
            .limit(64 << 20)
            .read_to_string()
            .map_err(|e| HubError::Unreachable(e.to_string()))?;
        parse_listing(&text)
    }

    pub fn file_url(&self, repo: &str, commit: &str, file: &str) -> String {
        format!("{}/{repo}/resolve/{commit}/{}", self.endpoint, encode_path(file))
    }

    /// Starts fetching `url` from byte `from` (a `Range` request when not 0). The answer is
    /// 200 (the whole file), 206 (from `from`) or 416 (a range past the end); others are errors.
    pub fn fetch(&self, url: &str, from: u64) -> Result<Response<Body>, HubError> {
        let mut request = self.get(url).header("Accept-Encoding", "identity");
        if from > 0 {
            request = request.header("Range", format!("bytes={from}-"));
        }
        let response = request.call().map_err(|e| HubError::Unreachable(e.to_string()))?;
        match response.status().as_u16() {
            200 | 206 | 416 => Ok(response),
            _ => Err(error_of(response)),
        }
    }

    /// `err` as the one-line message a user reads, about `repo` (and `file` when fetching it).
    pub fn explain(&self, err: HubError, repo: &str, file: Option<&str>) -> anyhow::Error {
        let endpoint = &self.endpoint;
        let target = match file {
            Some(file) => format!("{repo}/{file}"),
            None => repo.to_string(),
        };
        let need_token = "set HF_TOKEN to a Hugging Face access token that can read it";
        match err {
            HubError::Unreachable(detail) => anyhow!(
                "cannot reach the Hugging Face hub at {endpoint} ({detail}); check the network, \
                 or set HF_HUB_OFFLINE=1 to use files already in the cache"
            ),
            HubError::Invalid(detail) => anyhow!("{endpoint} gave an unexpected answer for {target}: {detail}"),
            HubError::Status { status, code, message } => {
                let said = message.map(|m| format!(" (the hub says: {m})")).unwrap_or_default();
                match (status, code.as_deref(), self.token.is_some()) {
                    (401, Some("RepoNotFound"), false) => anyhow!(
                        "{repo}: repository not found on {endpoint} (401); if it is private or gated, {need_token}"
                    ),
                    (401, _, false) => anyhow!(
                        "{target}: 401 Unauthorized: the repository is gated or private; {need_token}{said}"
                    ),
                    (401, _, true) => anyhow!(
                        "{target}: 401 Unauthorized: the hub refused the token (HF_TOKEN or the token file), \
                         or the repository does not exist{said}"
                    ),
                    (403, _, _) => anyhow!(
                        "{target}: 403 Forbidden: the token has no access to {repo}; for a gated model, \
                         request access on its page first{said}"
                    ),
                    (404, Some("EntryNotFound"), _) => anyhow!("{target}: file not found in {repo} (404)"),
                    (404, Some("RevisionNotFound"), _) => anyhow!("{repo}: revision not found (404){said}"),
                    (404, Some("RepoNotFound") | None, _) if file.is_none() => {
                        anyhow!("{repo}: repository not found on {endpoint} (404)")
                    }
                    (404, _, _) => anyhow!("{target}: not found on {endpoint} (404){said}"),
                    _ => anyhow!("{target}: the hub at {endpoint} answered HTTP {status}{said}"),
                }
            }
        }
    }
}

/// The API's JSON answer as a [`Listing`].
fn parse_listing(text: &str) -> Result<Listing, HubError> {
    let v: Value = serde_json::from_str(text).map_err(|e| HubError::Invalid(format!("not JSON: {e}")))?;
    let commit = v["sha"].as_str().filter(|c| c.len() == 40 && is_hex(c)).ok_or_else(|| {
        HubError::Invalid("no commit hash (\"sha\") in the repository's listing".into())
    })?;
    let siblings = v["siblings"]
        .as_array()
        .ok_or_else(|| HubError::Invalid("no file list (\"siblings\") in the repository's listing".into()))?;
    let mut files = Vec::with_capacity(siblings.len());
    for s in siblings {
        let Some(name) = s["rfilename"].as_str() else { continue };
        if !safe_relative(name) {
            return Err(HubError::Invalid(format!("a file name that leaves the repository: {name:?}")));
        }
        let lfs = &s["lfs"];
        let sha256 = lfs["sha256"].as_str().map(str::to_ascii_lowercase);
        if sha256.as_deref().is_some_and(|h| h.len() != 64 || !is_hex(h)) {
            return Err(HubError::Invalid(format!("{name}: a malformed SHA-256 {sha256:?}")));
        }
        let blob_id = s["blobId"].as_str().filter(|b| is_hex(b)).map(str::to_string);
        files.push(RepoFile {
            name: name.to_string(),
            size: lfs["size"].as_u64().or(s["size"].as_u64()),
            sha256,
            blob_id,
        });
    }
    Ok(Listing { commit: commit.to_string(), files })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(token: Option<&str>) -> Client {
        Client::new(&HubConfig {
            endpoint: "https://hub.example".into(),
            cache_dir: "/nonexistent".into(),
            token: token.map(str::to_string),
            offline: false,
            progress: false,
            retries: 0,
        })
    }

    fn status(status: u16, code: Option<&str>) -> HubError {
        HubError::Status { status, code: code.map(str::to_string), message: None }
    }

    #[test]
    fn listings_parse_sizes_hashes_and_commit() {
        let sha = "ab".repeat(32);
        let text = format!(
            r#"{{"id":"o/r","sha":"{}","siblings":[
                {{"rfilename":"README.md","blobId":"0123abcd","size":12}},
                {{"rfilename":"m-Q1_0.gguf","blobId":"ffee","size":134,"lfs":{{"sha256":"{}","size":5000,"pointerSize":134}}}}
            ]}}"#,
            "c".repeat(40),
            sha.to_uppercase()
        );
        let listing = parse_listing(&text).unwrap();
        assert_eq!(listing.commit, "c".repeat(40));
        assert_eq!(listing.files[0].etag(), Some("0123abcd"));
        assert_eq!(listing.files[0].size, Some(12));
        let gguf = &listing.files[1];
        assert_eq!((gguf.size, gguf.sha256.as_deref(), gguf.etag()), (Some(5000), Some(sha.as_str()), Some(sha.as_str())));
        for bad in [
            "not json".to_string(),
            r#"{"siblings":[]}"#.to_string(),
            format!(r#"{{"sha":"{}"}}"#, "c".repeat(40)),
            format!(r#"{{"sha":"{}","siblings":[{{"rfilename":"../../x"}}]}}"#, "c".repeat(40)),
        ] {
            assert!(matches!(parse_listing(&bad), Err(HubError::Invalid(_))), "{bad}");
        }
    }

    #[test]
    fn urls_encode_file_names() {
        let c = client(None);
        assert_eq!(c.file_url("o/r", "abc", "dir/m Q1+0.gguf"), "https://hub.example/o/r/resolve/abc/dir/m%20Q1%2B0.gguf");
        assert!(is_loopback("http://127.0.0.1:8080") && is_loopback("http://localhost/") && is_loopback("http://[::1]:9"));
        assert!(!is_loopback("https://huggingface.co") && !is_loopback("http://10.0.0.1:80"));
    }

    #[test]
    fn errors_say_what_to_do() {
        let msg = |c: &Client, e, file| c.explain(e, "o/r", file).to_string();
        let anonymous = client(None);
        let m = msg(&anonymous, status(401, Some("GatedRepo")), Some("m.gguf"));
        assert!(m.starts_with("o/r/m.gguf: 401 Unauthorized: the repository is gated or private; set HF_TOKEN"), "{m}");
        let m = msg(&anonymous, status(401, Some("RepoNotFound")), None);
        assert!(m.contains("repository not found on https://hub.example (401)") && m.contains("HF_TOKEN"), "{m}");
        let m = msg(&client(Some("t")), status(401, None), None);
        assert!(m.contains("refused the token"), "{m}");
        let m = msg(&client(Some("t")), status(403, Some("GatedRepo")), None);
        assert!(m.contains("403 Forbidden") && m.contains("request access"), "{m}");
        assert_eq!(msg(&anonymous, status(404, Some("RepoNotFound")), None), "o/r: repository not found on https://hub.example (404)");
        assert_eq!(msg(&anonymous, status(404, None), None), "o/r: repository not found on https://hub.example (404)");
        assert_eq!(msg(&anonymous, status(404, Some("EntryNotFound")), Some("m.gguf")), "o/r/m.gguf: file not found in o/r (404)");
        let m = msg(&anonymous, HubError::Unreachable("connection refused".into()), None);
        assert!(m.starts_with("cannot reach the Hugging Face hub at https://hub.example (connection refused)"), "{m}");
        assert!(m.contains("HF_HUB_OFFLINE=1"), "{m}");
        let m = msg(&anonymous, HubError::Status { status: 500, code: None, message: Some("oops".into()) }, None);
        assert_eq!(m, "o/r: the hub at https://hub.example answered HTTP 500 (the hub says: oops)");
    }
}

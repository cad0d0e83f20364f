//! A stand-in for the Hugging Face hub on 127.0.0.1, for tests: the repository listing
//! (`/api/models/{repo}/revision/{rev}`), `resolve` redirecting LFS files to a storage path
//! (`/cdn/{sha256}`) that honours `Range`, the hub's error codes, a request log, and faults to
//! order: a connection cut part-way, a corrupted body, a server that ignores ranges.
//! Shared by the unit tests (`src/hub/tests.rs`) and the CLI tests (`tests/hub.rs`).
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

/// One request the hub saw.
#[derive(Clone, Debug)]
pub struct Logged {
    pub method: String,
    /// Path and query, as sent.
    pub target: String,
    pub range: Option<String>,
    pub authorization: Option<String>,
}

impl Logged {
    /// A request for file content (resolve or storage), not the listing API.
    pub fn is_file_request(&self) -> bool {
        !self.target.starts_with("/api/")
    }
}

struct MockFile {
    bytes: Vec<u8>,
    sha256: String,
    /// Listed, but `resolve` answers 404 (a file removed after the listing).
    missing: bool,
}

struct MockRepo {
    commit: String,
    files: Vec<(String, MockFile)>,
    /// Gated: `resolve` wants `Authorization: Bearer <token>`.
    token: Option<String>,
}

#[derive(Default)]
struct State {
    repos: HashMap<String, MockRepo>,
    log: Vec<Logged>,
    /// Close the next file body after this many bytes.
    cut_next_at: Option<usize>,
    corrupt: bool,
    ignore_ranges: bool,
}

pub struct MockHub {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

impl MockHub {
    pub fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding the mock hub");
        let addr = listener.local_addr().expect("the mock hub's address");
        let state = Arc::new(Mutex::new(State::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (thread_state, thread_stop) = (Arc::clone(&state), Arc::clone(&stop));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if thread_stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let state = Arc::clone(&thread_state);
                std::thread::spawn(move || {
                    let _ = serve(stream, addr, &state);
                });
            }
        });
        MockHub { addr, state, stop }
    }

    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("mock hub state")
    }

    /// Publishes `repo` with `files` (all stored as LFS files); returns its commit hash.
    pub fn add_repo(&self, repo: &str, files: &[(&str, &[u8])]) -> String {
        let commit = sha256_hex(repo.as_bytes())[..40].to_string();
        let files = files
            .iter()
            .map(|(name, bytes)| {
                (name.to_string(), MockFile { bytes: bytes.to_vec(), sha256: sha256_hex(bytes), missing: false })
            })
            .collect();
        self.state().repos.insert(repo.to_string(), MockRepo { commit: commit.clone(), files, token: None });
        commit
    }

    pub fn gate(&self, repo: &str, token: &str) {
        self.state().repos.get_mut(repo).expect("a published repo").token = Some(token.to_string());
    }

    /// Keeps `file` in the listing but answers 404 for its content.
    pub fn remove_content(&self, repo: &str, file: &str) {
        let mut state = self.state();
        let repo = state.repos.get_mut(repo).expect("a published repo");
        repo.files.iter_mut().find(|(n, _)| n == file).expect("a published file").1.missing = true;
    }

    /// Closes the connection of the next file body after `bytes` bytes, once.
    pub fn cut_next_download_at(&self, bytes: usize) {
        self.state().cut_next_at = Some(bytes);
    }

    /// Flips one byte of every file body served.
    pub fn corrupt_downloads(&self, on: bool) {
        self.state().corrupt = on;
    }

    /// Answers ranged requests with the whole file (200).
    pub fn ignore_ranges(&self, on: bool) {
        self.state().ignore_ranges = on;
    }

    pub fn requests(&self) -> Vec<Logged> {
        self.state().log.clone()
    }

    pub fn file_requests(&self) -> Vec<Logged> {
        self.requests().into_iter().filter(Logged::is_file_request).collect()
    }

    pub fn clear_log(&self) {
        self.state().log.clear();
    }
}

impl Drop for MockHub {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop so that it sees the flag.
        let _ = TcpStream::connect(self.addr);
    }
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// Close after this many body bytes.
    cut_at: Option<usize>,
}

impl Reply {
    fn new(status: u16, body: impl Into<Vec<u8>>) -> Self {
        Reply { status, headers: Vec::new(), body: body.into(), cut_at: None }
    }

    fn header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.push((name.to_string(), value.into()));
        self
    }

    fn error(status: u16, code: &str, message: &str) -> Self {
        Reply::new(status, format!("{{\"error\":\"{message}\"}}"))
            .header("X-Error-Code", code)
            .header("X-Error-Message", message)
    }
}

fn serve(mut stream: TcpStream, addr: SocketAddr, state: &Mutex<State>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or("").to_string(), parts.next().unwrap_or("").to_string());
    let mut headers = HashMap::new();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_string());
        }
    }
    let logged = Logged {
        method,
        target: target.clone(),
        range: headers.get("range").cloned(),
        authorization: headers.get("authorization").cloned(),
    };
    let reply = {
        let mut state = state.lock().expect("mock hub state");
        state.log.push(logged.clone());
        route(&mut state, &logged, addr)
    };
    let reason = match reply.status {
        200 => "OK",
        206 => "Partial Content",
        302 => "Found",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        416 => "Range Not Satisfiable",
        _ => "Error",
    };
    let mut head = format!("HTTP/1.1 {} {reason}\r\nContent-Length: {}\r\nConnection: close\r\n", reply.status, reply.body.len());
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    let end = reply.cut_at.map_or(reply.body.len(), |cut| cut.min(reply.body.len()));
    stream.write_all(&reply.body[..end])?;
    stream.flush()?;
    stream.shutdown(Shutdown::Both)
}

fn route(state: &mut State, request: &Logged, addr: SocketAddr) -> Reply {
    let path = percent_decode(request.target.split('?').next().unwrap_or(""));
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match segments.as_slice() {
        ["api", "models", owner, name, "revision", revision] => {
            let Some(repo) = state.repos.get(&format!("{owner}/{name}")) else {
                // The hub hides whether a repository exists from anonymous callers.
                let status = if request.authorization.is_some() { 404 } else { 401 };
                return Reply::error(status, "RepoNotFound", "Repository not found");
            };
            if *revision != "main" && *revision != repo.commit {
                return Reply::error(404, "RevisionNotFound", "Invalid rev id");
            }
            let siblings: Vec<String> = repo
                .files
                .iter()
                .map(|(name, f)| {
                    format!(
                        r#"{{"rfilename":"{name}","blobId":"{}","size":{},"lfs":{{"sha256":"{}","size":{},"pointerSize":134}}}}"#,
                        &f.sha256[..40],
                        f.bytes.len(),
                        f.sha256,
                        f.bytes.len()
                    )
                })
                .collect();
            let body = format!(
                r#"{{"id":"{owner}/{name}","sha":"{}","private":false,"siblings":[{}]}}"#,
                repo.commit,
                siblings.join(",")
            );
            Reply::new(200, body).header("Content-Type", "application/json")
        }
        ["cdn", sha256] => {
            let found = state.repos.values().flat_map(|r| &r.files).find(|(_, f)| f.sha256 == *sha256);
            let Some((_, file)) = found else { return Reply::error(404, "EntryNotFound", "No such blob") };
            let mut bytes = file.bytes.clone();
            if state.corrupt && !bytes.is_empty() {
                let mid = bytes.len() / 2;
                bytes[mid] ^= 0xff;
            }
            let len = bytes.len();
            let range = request.range.as_deref().filter(|_| !state.ignore_ranges);
            let start = range.and_then(|r| r.strip_prefix("bytes=")?.strip_suffix('-')?.parse::<usize>().ok());
            let mut reply = match start {
                Some(start) if start >= len => {
                    return Reply::new(416, Vec::new()).header("Content-Range", format!("bytes */{len}"))
                }
                Some(start) => Reply::new(206, bytes[start..].to_vec())
                    .header("Content-Range", format!("bytes {start}-{}/{len}", len - 1)),
                None => Reply::new(200, bytes),
            };
            reply.cut_at = state.cut_next_at.take();
            reply.header("Accept-Ranges", "bytes")
        }
        [owner, name, "resolve", revision, file @ ..] => {
            let file = file.join("/");
            let Some(repo) = state.repos.get(&format!("{owner}/{name}")) else {
                return Reply::error(404, "RepoNotFound", "Repository not found");
            };
            if let Some(token) = &repo.token {
                match request.authorization.as_deref() {
                    None => return Reply::error(401, "GatedRepo", "Access to this model is restricted"),
                    Some(auth) if auth != format!("Bearer {token}") => {
                        return Reply::error(403, "GatedRepo", "Your token has no access to this model")
                    }
                    Some(_) => {}
                }
            }
            if *revision != "main" && *revision != repo.commit {
                return Reply::error(404, "RevisionNotFound", "Invalid rev id");
            }
            match repo.files.iter().find(|(n, f)| *n == file && !f.missing) {
                None => Reply::error(404, "EntryNotFound", "Entry not found"),
                Some((_, f)) => Reply::new(302, Vec::new())
                    .header("Location", format!("http://{addr}/cdn/{}", f.sha256))
                    .header("X-Repo-Commit", repo.commit.clone())
                    .header("X-Linked-Etag", format!("\"{}\"", f.sha256))
                    .header("X-Linked-Size", f.bytes.len().to_string()),
            }
        }
        _ => Reply::error(404, "NotFound", "Not found"),
    }
}

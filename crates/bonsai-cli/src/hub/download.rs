//! One file from the hub into `blobs/<etag>`: streamed into `<etag>.incomplete`, resumed with a
//! `Range` request after a break (in this run, or the next), its SHA-256 checked against the
//! hub's before it is moved into place. A mismatch deletes the partial file.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use indicatif::{ProgressBar, ProgressStyle};
use sha2::{Digest, Sha256};

use super::client::{Client, HubError};

/// What to fetch and what it must be.
pub struct Remote<'a> {
    pub repo: &'a str,
    /// The file's name in the repository (for messages).
    pub file: &'a str,
    pub url: String,
    pub size: Option<u64>,
    /// Lowercase hex.
    pub sha256: Option<&'a str>,
}

/// Bytes read from the network per write.
const CHUNK: usize = 1 << 20;

/// The partial file beside `blob`.
pub fn incomplete_path(blob: &Path) -> PathBuf {
    let mut name = blob.file_name().expect("a blob path names a file").to_os_string();
    name.push(".incomplete");
    blob.with_file_name(name)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The partial file and the hash of everything in it so far.
struct Partial {
    path: PathBuf,
    file: File,
    hasher: Sha256,
    len: u64,
}

impl Partial {
    /// Opens (or creates) the partial file, hashing what an earlier attempt left in it.
    fn open(path: &Path) -> io::Result<Self> {
        let mut file = OpenOptions::new().read(true).append(true).create(true).open(path)?;
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; CHUNK];
        let mut len = 0u64;
        loop {
            let n = file.read(&mut buf)?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            len += n as u64;
        }
        Ok(Partial { path: path.to_path_buf(), file, hasher, len })
    }

    /// Starts over from an empty file.
    fn reset(&mut self) -> io::Result<()> {
        self.file.set_len(0)?;
        self.hasher = Sha256::new();
        self.len = 0;
        Ok(())
    }

    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.file.write_all(bytes)?;
        self.hasher.update(bytes);
        self.len += bytes.len() as u64;
        Ok(())
    }
}

/// How one attempt ended, when it did not finish.
enum Stop {
    /// The transfer broke off; another attempt resumes it.
    Interrupted { why: String, progressed: bool },
    Fatal(anyhow::Error),
}

impl From<io::Error> for Stop {
    // Local file errors (a full disk) are not fixed by trying again.
    fn from(e: io::Error) -> Self {
        Stop::Fatal(anyhow::Error::new(e))
    }
}

/// `Content-Range: bytes START-END/TOTAL` -> START.
fn range_start(response: &ureq::http::Response<ureq::Body>) -> Option<u64> {
    let value = response.headers().get("content-range")?.to_str().ok()?;
    value.trim().strip_prefix("bytes ")?.split('-').next()?.trim().parse().ok()
}

fn progress_bar(show: bool, remote: &Remote) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let bar = match remote.size {
        Some(size) => ProgressBar::new(size),
        None => ProgressBar::no_length(),
    };
    let style = ProgressStyle::with_template(
        "{msg} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} ETA {eta}",
    )
    .expect("a valid progress template")
    .progress_chars("=> ");
    bar.set_style(style);
    bar.set_message(remote.file.rsplit('/').next().unwrap_or(remote.file).to_string());
    bar
}

/// One request: appends to `partial` from its current length until the body ends.
fn attempt(client: &Client, remote: &Remote, partial: &mut Partial, bar: &ProgressBar) -> Result<(), Stop> {
    if remote.size.is_some_and(|size| partial.len > size) {
        partial.reset()?;
    }
    if remote.size == Some(partial.len) && partial.len > 0 {
        return Ok(());
    }
    let from = partial.len;
    let response = match client.fetch(&remote.url, from) {
        Ok(response) => response,
        Err(HubError::Unreachable(why)) => return Err(Stop::Interrupted { why, progressed: false }),
        Err(e) => return Err(Stop::Fatal(client.explain(e, remote.repo, Some(remote.file)))),
    };
    match response.status().as_u16() {
        206 if range_start(&response) == Some(from) => {}
        // The whole file (the server ignored the range): start over.
        200 => partial.reset()?,
        // A range that does not fit what the server has: start over next time.
        _ => {
            partial.reset()?;
            let why = format!("the server could not resume at byte {from} (HTTP {})", response.status().as_u16());
            return Err(Stop::Interrupted { why, progressed: true });
        }
    }
    bar.set_position(partial.len);
    let mut reader = response.into_body().into_reader();
    let mut buf = vec![0u8; CHUNK];
    let start_len = partial.len;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                partial.file.flush()?;
                return Err(Stop::Interrupted { why: e.to_string(), progressed: partial.len > start_len });
            }
        };
        partial.append(&buf[..n])?;
        bar.set_position(partial.len);
        if remote.size.is_some_and(|size| partial.len > size) {
            partial.reset()?;
            return Err(Stop::Fatal(anyhow::anyhow!(
                "{}/{}: the hub sent more than the {} bytes it lists; nothing was cached",
                remote.repo,
                remote.file,
                remote.size.unwrap_or(0)
            )));
        }
    }
    match remote.size {
        Some(size) if partial.len < size => Err(Stop::Interrupted {
            why: format!("the connection closed at byte {} of {size}", partial.len),
            progressed: partial.len > start_len,
        }),
        _ => Ok(()),
    }
}

/// Downloads `remote` into `blob` (its directory exists), trying `retries` more times after a
/// break, each attempt resuming where the last stopped, then checks the SHA-256 and moves the
/// file into place. A break past the retries keeps the partial file for the next run.
pub fn download(client: &Client, remote: &Remote, blob: &Path, retries: u32, show_progress: bool) -> anyhow::Result<()> {
    let label = format!("{}/{}", remote.repo, remote.file);
    let path = incomplete_path(blob);
    let mut partial = Partial::open(&path).with_context(|| format!("opening {}", path.display()))?;
    if partial.len > 0 && remote.size.is_none_or(|size| partial.len < size) {
        eprintln!("resuming {label} at byte {}", partial.len);
    }
    let bar = progress_bar(show_progress, remote);
    bar.set_position(partial.len);
    bar.reset_eta();
    let mut failures = 0;
    loop {
        match attempt(client, remote, &mut partial, &bar) {
            Ok(()) => break,
            Err(Stop::Fatal(e)) => {
                bar.abandon();
                return Err(e);
            }
            Err(Stop::Interrupted { why, progressed }) => {
                if failures >= retries {
                    bar.abandon();
                    bail!(
                        "downloading {label} stopped at byte {} of {} ({why}); run the command again to resume",
                        partial.len,
                        remote.size.map_or("?".to_string(), |s| s.to_string())
                    );
                }
                failures += 1;
                if !progressed {
                    std::thread::sleep(Duration::from_secs(u64::from(failures)));
                }
            }
        }
    }
    bar.finish_and_clear();
    partial.file.sync_all().with_context(|| format!("writing {}", path.display()))?;
    let got = hex(&partial.hasher.clone().finalize());
    if let Some(expected) = remote.sha256 {
        if got != expected {
            drop(partial);
            std::fs::remove_file(&path).with_context(|| format!("deleting {}", path.display()))?;
            bail!(
                "{label}: the downloaded file's SHA-256 is {got}, the hub lists {expected}; \
                 the download was deleted and nothing was cached (run again to retry)"
            );
        }
    }
    let Partial { path, .. } = partial;
    std::fs::rename(&path, blob).with_context(|| format!("moving {} to {}", path.display(), blob.display()))?;
    Ok(())
}

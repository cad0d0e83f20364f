//! The on-disk kernel cache: compiled cubins keyed by a SHA-256 of everything that shaped them.
//!
//! ```text
//! <dir>/kernels/<hex key>.kcache      dir mode 0700, file mode 0600
//! offset  len  field
//!      0    8  magic  "BONSAIKC"
//!      8    4  format version, u32 LE
//!     12   32  key (raw SHA-256), must equal the file name's key
//!     44    8  payload length in bytes, u64 LE, must equal the bytes that follow
//!     52   32  SHA-256 of the payload
//!     84    -  payload (a cubin)
//! ```
//!
//! Files are written to a temporary name in the same directory and renamed into place, so a
//! reader sees a whole entry or none. A reader trusts nothing: an entry failing any check is
//! deleted and reported as rejected, and the caller rebuilds it.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::error::KernelError;

/// First bytes of every cache file.
pub const CACHE_MAGIC: [u8; 8] = *b"BONSAIKC";
/// Bumped whenever the header layout or the key derivation changes.
pub const CACHE_FORMAT_VERSION: u32 = 1;
/// Extension of cache entries; `clear` removes only these and leftover temporaries.
pub const CACHE_FILE_EXT: &str = "kcache";
/// Extension of a temporary file being written.
const TEMP_FILE_EXT: &str = "tmp";
/// Subfolder of the bonsai cache dir holding kernel entries.
pub const KERNELS_SUBDIR: &str = "kernels";
/// Bytes before the payload: magic, version, key, length, checksum.
pub const HEADER_LEN: usize = 8 + 4 + 32 + 8 + 32;
/// Only the owner may read the cached code the process will execute.
#[cfg(unix)]
const DIR_MODE: u32 = 0o700;
#[cfg(unix)]
const FILE_MODE: u32 = 0o600;

/// SHA-256 identifying one compiled library.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheKey(pub [u8; 32]);

impl CacheKey {
    /// Hashes every input that changes the compiled code. Each field is length-prefixed
    /// (u64 LE) so no two different inputs can concatenate to the same byte stream; SHA-256 is
    /// fixed by its standard, so keys stay stable across Rust releases and platforms.
    pub fn new(source: &str, options: &[String], arch: u32, compiler: &str) -> Self {
        let mut hasher = Sha256::new();
        let mut field = |bytes: &[u8]| {
            hasher.update((bytes.len() as u64).to_le_bytes());
            hasher.update(bytes);
        };
        field(b"bonsai kernel cache key v1");
        field(source.as_bytes());
        field(&(options.len() as u64).to_le_bytes());
        for option in options {
            field(option.as_bytes());
        }
        field(&arch.to_le_bytes());
        field(compiler.as_bytes());
        CacheKey(hasher.finalize().into())
    }

    pub fn hex(&self) -> String {
        hex(&self.0)
    }
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// SHA-256 of `bytes`, as used for payload checksums and source hashes.
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// The kernel cache directory under the cache root `root` (`Config::cache_dir`).
pub fn kernels_dir(root: Option<&Path>) -> Result<PathBuf, KernelError> {
    root.map(|r| r.join(KERNELS_SUBDIR)).ok_or(KernelError::NoCacheDir)
}

/// What a cache lookup found.
#[derive(Debug, PartialEq, Eq)]
pub enum CacheRead {
    /// A verified payload.
    Hit(Vec<u8>),
    /// No entry for the key.
    Miss,
    /// An entry existed but failed verification; it has been deleted (`removed` says whether
    /// the delete worked). It was never returned.
    Rejected { reason: String, removed: bool },
}

/// What `clear` removed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ClearReport {
    pub files: usize,
    pub len_bytes: u64,
}

/// A kernel cache rooted at one directory (the `kernels/` folder itself).
#[derive(Clone, Debug)]
pub struct KernelCache {
    dir: PathBuf,
}

impl KernelCache {
    /// A cache in `dir`; nothing is touched until the first read or write.
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file an entry for `key` lives in.
    pub fn entry_path(&self, key: &CacheKey) -> PathBuf {
        self.dir.join(format!("{}.{CACHE_FILE_EXT}", key.hex()))
    }

    /// Looks `key` up, verifying magic, version, key, length and checksum.
    pub fn read(&self, key: &CacheKey) -> Result<CacheRead, KernelError> {
        let path = self.entry_path(key);
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(CacheRead::Miss),
            Err(e) => return Err(KernelError::CacheIo { path, source: e }),
        };
        match verify(&bytes, key) {
            Ok(()) => Ok(CacheRead::Hit(bytes[HEADER_LEN..].to_vec())),
            Err(reason) => {
                let removed = fs::remove_file(&path).is_ok();
                Ok(CacheRead::Rejected { reason, removed })
            }
        }
    }

    /// Stores `payload` under `key` atomically; returns the entry's path.
    pub fn write(&self, key: &CacheKey, payload: &[u8]) -> Result<PathBuf, KernelError> {
        create_private_dir(&self.dir)?;
        let path = self.entry_path(key);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let temp =
            self.dir.join(format!(".{}.{}.{nanos}.{TEMP_FILE_EXT}", key.hex(), std::process::id()));
        let mut file_bytes = Vec::with_capacity(HEADER_LEN + payload.len());
        file_bytes.extend_from_slice(&CACHE_MAGIC);
        file_bytes.extend_from_slice(&CACHE_FORMAT_VERSION.to_le_bytes());
        file_bytes.extend_from_slice(&key.0);
        file_bytes.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        file_bytes.extend_from_slice(&sha256(payload));
        file_bytes.extend_from_slice(payload);

        let result = write_new_private_file(&temp, &file_bytes)
            .and_then(|()| fs::rename(&temp, &path).map_err(KernelError::cache_io(&path)));
        if result.is_err() {
            // Best effort: a leftover temporary is also removed by `clear`.
            let _ = fs::remove_file(&temp);
        }
        result.map(|()| path)
    }

    /// Removes every cache entry and leftover temporary file; other files are left alone.
    pub fn clear(&self) -> Result<ClearReport, KernelError> {
        let mut report = ClearReport::default();
        let entries = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(report),
            Err(e) => return Err(KernelError::CacheIo { path: self.dir.clone(), source: e }),
        };
        for entry in entries {
            let entry = entry.map_err(KernelError::cache_io(&self.dir))?;
            let path = entry.path();
            let ours =
                path.extension().is_some_and(|ext| ext == CACHE_FILE_EXT || ext == TEMP_FILE_EXT);
            let meta = entry.metadata().map_err(KernelError::cache_io(&path))?;
            if !ours || !meta.is_file() {
                continue;
            }
            fs::remove_file(&path).map_err(KernelError::cache_io(&path))?;
            report.files += 1;
            report.len_bytes += meta.len();
        }
        Ok(report)
    }
}

/// Checks a whole cache file against the key it was looked up by; the error says why not.
fn verify(bytes: &[u8], key: &CacheKey) -> Result<(), String> {
    if bytes.len() < HEADER_LEN {
        return Err(format!("{} bytes is shorter than the {HEADER_LEN}-byte header", bytes.len()));
    }
    let (header, payload) = bytes.split_at(HEADER_LEN);
    if header[0..8] != CACHE_MAGIC {
        return Err("bad magic (not a bonsai kernel cache file)".into());
    }
    let version = u32::from_le_bytes([header[8], header[9], header[10], header[11]]);
    if version != CACHE_FORMAT_VERSION {
        return Err(format!("format version {version}, expected {CACHE_FORMAT_VERSION}"));
    }
    if header[12..44] != key.0 {
        return Err(format!("foreign key {} in the file", hex(&header[12..44])));
    }
    let mut len = [0u8; 8];
    len.copy_from_slice(&header[44..52]);
    let len = u64::from_le_bytes(len);
    if len != payload.len() as u64 {
        return Err(format!("header says {len} payload bytes, file holds {}", payload.len()));
    }
    if header[52..84] != sha256(payload) {
        return Err("payload checksum mismatch".into());
    }
    Ok(())
}

/// Creates `dir` (and parents); the final folder is made private to the user.
fn create_private_dir(dir: &Path) -> Result<(), KernelError> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        builder.mode(DIR_MODE);
        builder.create(dir).map_err(KernelError::cache_io(dir))?;
        // An existing folder keeps whatever mode it had; tighten it (we own what we created).
        let mode = fs::metadata(dir).map_err(KernelError::cache_io(dir))?.permissions().mode();
        if mode & 0o777 != DIR_MODE {
            fs::set_permissions(dir, fs::Permissions::from_mode(DIR_MODE))
                .map_err(KernelError::cache_io(dir))?;
        }
        Ok(())
    }
    #[cfg(not(unix))]
    builder.create(dir).map_err(KernelError::cache_io(dir))
}

/// Writes a fresh file readable only by the user, flushed to disk before the caller renames it.
fn write_new_private_file(path: &Path, bytes: &[u8]) -> Result<(), KernelError> {
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(FILE_MODE);
    }
    let mut file = options.open(path).map_err(KernelError::cache_io(path))?;
    file.write_all(bytes).map_err(KernelError::cache_io(path))?;
    file.sync_all().map_err(KernelError::cache_io(path))
}

#[cfg(test)]
#[path = "cache_tests.rs"]
mod tests;

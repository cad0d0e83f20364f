//! The Hugging Face cache layout, as `huggingface_hub` writes it:
//!
//! ```text
//! <cache>/models--OWNER--REPO/
//!     blobs/<etag>                  the file's bytes (LFS files: etag = SHA-256)
//!     blobs/<etag>.incomplete       a download in progress, resumed from its length
//!     snapshots/<commit>/<file>     relative symlink to ../../blobs/<etag>
//!     refs/main                     the commit `main` pointed at when last fetched
//! ```

use std::io;
use std::path::{Component, Path, PathBuf};

/// One repository's folder in the cache.
#[derive(Clone, Debug)]
pub struct RepoCache {
    root: PathBuf,
}

/// Whether `name` is a plain relative path inside a repository (no `..`, no root): repository
/// file names come from the network and must not point outside the cache.
pub fn safe_relative(name: &str) -> bool {
    !name.is_empty()
        && !name.contains('\\')
        && Path::new(name).components().all(|c| matches!(c, Component::Normal(_)))
}

/// A commit hash or etag as a file name (hex and nothing else).
fn safe_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 128 && id.chars().all(|c| c.is_ascii_alphanumeric())
}

impl RepoCache {
    /// `repo` is `OWNER/REPO` (already validated).
    pub fn new(cache_dir: &Path, repo: &str) -> Self {
        RepoCache { root: cache_dir.join(format!("models--{}", repo.replace('/', "--"))) }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn blob(&self, etag: &str) -> PathBuf {
        self.root.join("blobs").join(etag)
    }

    pub fn snapshot(&self, commit: &str, file: &str) -> PathBuf {
        self.root.join("snapshots").join(commit).join(file)
    }

    /// The commit `name` (a branch) points at, if it was recorded and looks like one.
    pub fn read_ref(&self, name: &str) -> Option<String> {
        let text = std::fs::read_to_string(self.root.join("refs").join(name)).ok()?;
        let commit = text.trim();
        safe_id(commit).then(|| commit.to_string())
    }

    /// Records that `name` points at `commit` (written only when it changes).
    pub fn write_ref(&self, name: &str, commit: &str) -> io::Result<()> {
        if self.read_ref(name).as_deref() == Some(commit) {
            return Ok(());
        }
        let path = self.root.join("refs").join(name);
        std::fs::create_dir_all(self.root.join("refs"))?;
        std::fs::write(path, commit)
    }

    /// The cached copy of `file` at `commit`, if its snapshot entry leads to a file.
    pub fn cached(&self, commit: &str, file: &str) -> Option<PathBuf> {
        let path = self.snapshot(commit, file);
        path.is_file().then_some(path)
    }

    /// Points `snapshots/<commit>/<file>` at `blobs/<etag>` with a relative symlink (a copy
    /// where symlinks cannot be made) and returns the snapshot path.
    pub fn link(&self, commit: &str, file: &str, etag: &str) -> io::Result<PathBuf> {
        if !safe_id(commit) || !safe_id(etag) || !safe_relative(file) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("refusing to cache {file:?} (commit {commit:?}, etag {etag:?})"),
            ));
        }
        let snapshot = self.snapshot(commit, file);
        let parent = snapshot.parent().expect("a snapshot path has a parent");
        std::fs::create_dir_all(parent)?;
        // From snapshots/<commit>/<dir>.../ back up to the repository folder.
        let depth = 2 + Path::new(file).components().count() - 1;
        let mut target = PathBuf::new();
        for _ in 0..depth {
            target.push("..");
        }
        target.push("blobs");
        target.push(etag);
        if snapshot.symlink_metadata().is_ok() {
            std::fs::remove_file(&snapshot)?;
        }
        make_link(&target, &self.blob(etag), &snapshot)?;
        Ok(snapshot)
    }

    /// The files in `snapshots/<commit>/` that lead to a file (relative names, `/`-separated).
    pub fn snapshot_files(&self, commit: &str) -> Vec<String> {
        let mut out = Vec::new();
        let root = self.root.join("snapshots").join(commit);
        let mut stack = vec![root.clone()];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            for entry in entries.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.is_file() {
                    if let Ok(rel) = path.strip_prefix(&root) {
                        let parts: Vec<String> =
                            rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
                        out.push(parts.join("/"));
                    }
                }
            }
        }
        out.sort();
        out
    }
}

#[cfg(unix)]
fn make_link(relative: &Path, _blob: &Path, link: &Path) -> io::Result<()> {
    std::os::unix::fs::symlink(relative, link)
}

#[cfg(not(unix))]
fn make_link(_relative: &Path, blob: &Path, link: &Path) -> io::Result<()> {
    std::fs::copy(blob, link).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(test: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("bonsai-hub-cache-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";
    const ETAG: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

    #[test]
    fn the_layout_matches_huggingface_hub() {
        let dir = temp("layout");
        let repo = RepoCache::new(&dir, "prism-ml/Bonsai-8B-gguf");
        assert_eq!(repo.root(), dir.join("models--prism-ml--Bonsai-8B-gguf"));
        std::fs::create_dir_all(repo.blob(ETAG).parent().unwrap()).unwrap();
        std::fs::write(repo.blob(ETAG), b"gguf bytes").unwrap();
        assert_eq!(repo.cached(COMMIT, "m.gguf"), None);
        let path = repo.link(COMMIT, "m.gguf", ETAG).unwrap();
        assert_eq!(path, dir.join(format!("models--prism-ml--Bonsai-8B-gguf/snapshots/{COMMIT}/m.gguf")));
        #[cfg(unix)]
        assert_eq!(std::fs::read_link(&path).unwrap(), Path::new("../../blobs").join(ETAG));
        assert_eq!(std::fs::read(&path).unwrap(), b"gguf bytes");
        assert_eq!(repo.cached(COMMIT, "m.gguf"), Some(path));
        // A file in a folder links one level further up.
        let nested = repo.link(COMMIT, "Q1_0/m.gguf", ETAG).unwrap();
        #[cfg(unix)]
        assert_eq!(std::fs::read_link(&nested).unwrap(), Path::new("../../../blobs").join(ETAG));
        assert_eq!(std::fs::read(&nested).unwrap(), b"gguf bytes");
        assert_eq!(repo.snapshot_files(COMMIT), ["Q1_0/m.gguf", "m.gguf"]);

        assert_eq!(repo.read_ref("main"), None);
        repo.write_ref("main", COMMIT).unwrap();
        assert_eq!(std::fs::read_to_string(repo.root().join("refs/main")).unwrap(), COMMIT);
        assert_eq!(repo.read_ref("main").as_deref(), Some(COMMIT));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn names_that_would_leave_the_cache_are_refused() {
        let dir = temp("escape");
        let repo = RepoCache::new(&dir, "a/b");
        for bad in ["../x.gguf", "/etc/x.gguf", "a/../../x.gguf", "", "a\\b.gguf"] {
            assert!(!safe_relative(bad), "{bad:?}");
            assert!(repo.link(COMMIT, bad, ETAG).is_err(), "{bad:?}");
        }
        assert!(repo.link("../x", "m.gguf", ETAG).is_err());
        assert!(repo.link(COMMIT, "m.gguf", "../../x").is_err());
        assert!(safe_relative("dir/m.gguf") && safe_relative("m.gguf"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_dangling_snapshot_is_not_a_cached_file() {
        let dir = temp("dangling");
        let repo = RepoCache::new(&dir, "a/b");
        let path = repo.link(COMMIT, "m.gguf", ETAG).unwrap();
        assert!(path.symlink_metadata().is_ok());
        assert_eq!(repo.cached(COMMIT, "m.gguf"), None, "the blob is missing");
        assert!(repo.snapshot_files(COMMIT).is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

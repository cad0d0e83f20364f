//! `bonsai kernels` as a user runs it: `clear` empties a real cache directory and says how many
//! bytes it removed; without a CUDA driver, `info` and `build` fail with the one-line message.

use std::path::PathBuf;
use std::process::Command;

use bonsai_kernels::cuda::cache::{CacheKey, KernelCache, HEADER_LEN};
use bonsai_kernels::cuda::driver_present;

const BIN: &str = env!("CARGO_BIN_EXE_bonsai");

/// A fresh directory under the system temp dir, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = std::env::temp_dir()
            .join(format!("bonsai-cli-test-{tag}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn clear_removes_entries_and_reports_bytes() {
    let tmp = TempDir::new("clear");
    let cache = KernelCache::new(tmp.0.join("kernels"));
    let payload_lens = [1234usize, 567];
    for (i, len) in payload_lens.iter().enumerate() {
        let key = CacheKey::new(&format!("source {i}"), &[], 90, "test");
        let payload: Vec<u8> = (0..*len).map(|j| (j * 31 + i) as u8).collect();
        cache.write(&key, &payload).expect("write");
    }
    let total: usize = payload_lens.iter().map(|len| len + HEADER_LEN).sum();

    let out = Command::new(BIN)
        .args(["kernels", "clear"])
        .env("BONSAI_CACHE_DIR", &tmp.0)
        .output()
        .expect("run bonsai");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "clear failed: {}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains(&format!("removed 2 cache file(s), {total} bytes")), "{stdout}");
    let left = std::fs::read_dir(cache.dir()).expect("list").count();
    assert_eq!(left, 0, "entries left after clear");
}

#[test]
fn without_a_driver_gpu_commands_fail_with_one_line() {
    if driver_present() {
        println!("a CUDA driver is present: nothing to check");
        return;
    }
    for command in ["info", "build"] {
        let out = Command::new(BIN).args(["kernels", command]).output().expect("run bonsai");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "kernels {command}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "kernels {command}: not one line: {stderr}");
        assert!(
            stderr.starts_with("error: no CUDA driver found (libcuda.so): "),
            "kernels {command}: {stderr}"
        );
    }
}

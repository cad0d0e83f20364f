//! The disk cache without a GPU: key stability, atomic write + verified read, rejection of
//! corrupt and foreign entries, `clear`, and directory resolution from the environment.

use super::*;

/// A fresh directory under the system temp dir, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str, seed: u64) -> Self {
        let dir = std::env::temp_dir()
            .join(format!("bonsai-cache-test-{tag}-{}-{seed:016x}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// A fresh seed per run, printed so a failure can be replayed.
fn fresh_seed() -> u64 {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0x5eed, |d| d.as_nanos() as u64);
    eprintln!("seed = {seed:#x}");
    seed
}

/// splitmix64: a tiny deterministic generator for test payloads.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn random_payload(state: &mut u64) -> Vec<u8> {
    let len = 1000 + (next(state) % 4000) as usize;
    (0..len).map(|_| next(state) as u8).collect()
}

fn key_for(tag: &str) -> CacheKey {
    CacheKey::new(tag, &["-O3".to_string()], 90, "nvrtc 13.0")
}

#[test]
fn key_is_fixed_for_fixed_input() {
    // Cross-checked with Python's hashlib over the documented encoding (each field as u64 LE
    // length + bytes: tag, source, option count, each option, arch u32 LE, compiler). A change
    // here invalidates every user's cache and must come with a CACHE_FORMAT_VERSION bump.
    let key = CacheKey::new(
        "extern \"C\" __global__ void k() {}",
        &["--gpu-architecture=sm_90".to_string(), "-std=c++17".to_string()],
        90,
        "nvrtc 13.0",
    );
    assert_eq!(key.hex(), "955c03346d9df5519a33705ee522ffac2e354ecf03e36977e9f671c3a79ae2c9");
}

#[test]
fn key_changes_with_every_field_and_field_boundaries() {
    let base = CacheKey::new("ab", &["c".into()], 90, "nvcc 13.0");
    assert_ne!(base, CacheKey::new("ab ", &["c".into()], 90, "nvcc 13.0"));
    assert_ne!(base, CacheKey::new("ab", &["d".into()], 90, "nvcc 13.0"));
    assert_ne!(base, CacheKey::new("ab", &["c".into()], 89, "nvcc 13.0"));
    assert_ne!(base, CacheKey::new("ab", &["c".into()], 90, "nvcc 13.1"));
    // Moving bytes between fields must not collide.
    assert_ne!(base, CacheKey::new("a", &["bc".into()], 90, "nvcc 13.0"));
    assert_ne!(base, CacheKey::new("ab", &["c".into(), String::new()], 90, "nvcc 13.0"));
}

#[test]
fn write_then_read_round_trips_privately_and_atomically() {
    let seed = fresh_seed();
    let mut rng = seed;
    let tmp = TempDir::new("roundtrip", seed);
    let cache = KernelCache::new(tmp.0.join("kernels"));
    let key = key_for("round trip");
    assert_eq!(cache.read(&key).expect("read"), CacheRead::Miss, "empty cache, seed {seed:#x}");

    let payload = random_payload(&mut rng);
    let path = cache.write(&key, &payload).expect("write");
    assert_eq!(path, cache.entry_path(&key));
    assert_eq!(fs::metadata(&path).expect("stat").len() as usize, HEADER_LEN + payload.len());
    assert_eq!(cache.read(&key).expect("read"), CacheRead::Hit(payload.clone()), "seed {seed:#x}");

    // Overwriting an entry replaces it whole.
    let replacement = random_payload(&mut rng);
    cache.write(&key, &replacement).expect("rewrite");
    assert_eq!(cache.read(&key).expect("read"), CacheRead::Hit(replacement), "seed {seed:#x}");

    let names: Vec<_> = fs::read_dir(cache.dir())
        .expect("list")
        .map(|e| e.expect("entry").file_name().into_string().expect("utf-8"))
        .collect();
    assert_eq!(names, vec![format!("{}.{CACHE_FILE_EXT}", key.hex())], "no temporaries left");

    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| fs::metadata(p).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode(cache.dir()), 0o700);
        assert_eq!(mode(&path), 0o600);
    }
}

/// Writes a valid entry, damages it with `damage`, and checks the read rejects and deletes it.
fn assert_rejected(tag: &str, damage: impl FnOnce(&mut Vec<u8>, &mut u64), expect_reason: &str) {
    let seed = fresh_seed();
    let mut rng = seed;
    let tmp = TempDir::new(tag, seed);
    let cache = KernelCache::new(tmp.0.clone());
    let key = key_for(tag);
    let path = cache.write(&key, &random_payload(&mut rng)).expect("write");
    let mut bytes = fs::read(&path).expect("read back");
    damage(&mut bytes, &mut rng);
    fs::write(&path, &bytes).expect("damage");

    match cache.read(&key).expect("read") {
        CacheRead::Rejected { reason, removed } => {
            assert!(reason.contains(expect_reason), "{tag}: reason '{reason}', seed {seed:#x}");
            assert!(removed, "{tag}: not removed");
        }
        other => panic!("{tag}: damaged entry was {other:?}, seed {seed:#x}"),
    }
    assert!(!path.exists(), "{tag}: file still present");
    assert_eq!(cache.read(&key).expect("read"), CacheRead::Miss, "{tag}: second read");
}

#[test]
fn flipped_payload_byte_is_rejected_and_removed() {
    assert_rejected(
        "flip-payload",
        |bytes, rng| {
            let at = HEADER_LEN + (next(rng) as usize) % (bytes.len() - HEADER_LEN);
            bytes[at] ^= 1 << (next(rng) % 8);
        },
        "checksum",
    );
}

#[test]
fn flipped_checksum_byte_is_rejected() {
    assert_rejected(
        "flip-sum",
        |bytes, rng| bytes[52 + (next(rng) as usize) % 32] ^= 0x80,
        "checksum",
    );
}

#[test]
fn flipped_magic_and_version_are_rejected() {
    assert_rejected("flip-magic", |bytes, _| bytes[3] ^= 0x20, "magic");
    assert_rejected("flip-version", |bytes, _| bytes[8] ^= 0x02, "version");
}

#[test]
fn truncated_entries_are_rejected() {
    assert_rejected("trunc-payload", |bytes, _| bytes.truncate(bytes.len() - 1), "payload bytes");
    assert_rejected(
        "trunc-header",
        |bytes, rng| bytes.truncate((next(rng) as usize) % HEADER_LEN),
        "shorter",
    );
    assert_rejected("extended", |bytes, _| bytes.push(0), "payload bytes");
}

#[test]
fn entry_under_another_key_is_rejected_as_foreign() {
    let seed = fresh_seed();
    let mut rng = seed;
    let tmp = TempDir::new("foreign", seed);
    let cache = KernelCache::new(tmp.0.clone());
    let (ours, theirs) = (key_for("ours"), key_for("theirs"));
    let their_path = cache.write(&theirs, &random_payload(&mut rng)).expect("write");
    fs::copy(&their_path, cache.entry_path(&ours)).expect("plant");
    match cache.read(&ours).expect("read") {
        CacheRead::Rejected { reason, removed: true } => assert!(reason.contains("foreign key")),
        other => panic!("foreign entry was {other:?}, seed {seed:#x}"),
    }
    assert!(!cache.entry_path(&ours).exists());
    assert!(
        matches!(cache.read(&theirs).expect("read"), CacheRead::Hit(_)),
        "the rightful entry stays"
    );
}

#[test]
fn clear_removes_only_cache_files_and_counts_bytes() {
    let seed = fresh_seed();
    let mut rng = seed;
    let tmp = TempDir::new("clear", seed);
    let cache = KernelCache::new(tmp.0.clone());
    let mut expected = 0u64;
    for tag in ["one", "two", "three"] {
        let payload = random_payload(&mut rng);
        expected += (HEADER_LEN + payload.len()) as u64;
        cache.write(&key_for(tag), &payload).expect("write");
    }
    let stray = tmp.0.join(format!(".leftover.{TEMP_FILE_EXT}"));
    fs::write(&stray, b"partial").expect("stray");
    expected += 7;
    let unrelated = tmp.0.join("notes.txt");
    fs::write(&unrelated, b"keep me").expect("unrelated");

    let report = cache.clear().expect("clear");
    assert_eq!(report, ClearReport { files: 4, len_bytes: expected }, "seed {seed:#x}");
    assert!(unrelated.exists(), "a file that is not ours was removed");
    assert_eq!(cache.clear().expect("clear again"), ClearReport::default());

    let missing = KernelCache::new(tmp.0.join("never-created"));
    assert_eq!(missing.clear().expect("clear missing"), ClearReport::default());
}

#[test]
fn the_kernels_directory_sits_under_the_cache_root() {
    assert_eq!(kernels_dir(Some(Path::new("/c"))).expect("dir"), PathBuf::from("/c/kernels"));
    assert!(matches!(kernels_dir(None), Err(KernelError::NoCacheDir)));
}

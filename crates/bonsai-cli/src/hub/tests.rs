//! `resolve` end to end against the mock hub on loopback, each test with its own cache folder.

use std::path::{Path, PathBuf};

use super::cache::RepoCache;
use super::download::incomplete_path;
use super::test_server::{sha256_hex, MockHub};
use super::*;

const REPO: &str = "test-org/Tiny-gguf";

struct Setup {
    hub: MockHub,
    dir: PathBuf,
    config: HubConfig,
}

impl Setup {
    fn new(test: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("bonsai-hub-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        let hub = MockHub::start();
        let config = HubConfig {
            endpoint: hub.endpoint(),
            cache_dir: dir.join("hub"),
            token: None,
            offline: false,
            progress: false,
            retries: 0,
        };
        Setup { hub, dir, config }
    }

    fn resolve(&self, spec: &str, file: Option<&str>) -> anyhow::Result<PathBuf> {
        resolve(&RepoSpec::parse(spec).expect("a valid spec"), file, &self.config)
    }

    fn err(&self, spec: &str, file: Option<&str>) -> String {
        format!("{:#}", self.resolve(spec, file).expect_err("an error"))
    }

    fn repo_cache(&self, repo: &str) -> RepoCache {
        RepoCache::new(&self.config.cache_dir, repo)
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Deterministic bytes that are not all alike.
fn content(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 8) as u8).collect()
}

const BIG: usize = 300_000;

#[test]
fn llama_cpp_short_options_become_long_ones() {
    let args = ["bonsai", "info", "-hf", "o/r:Q1_0", "-hff", "m.gguf", "-hfx", "--", "-hf"];
    let expanded = expand_short_options(args.iter().map(OsString::from));
    assert_eq!(expanded, ["bonsai", "info", "--hf-repo", "o/r:Q1_0", "--hf-file", "m.gguf", "-hfx", "--", "-hf"]);
}

#[test]
fn the_file_is_chosen_by_quant_by_name_or_as_the_only_gguf() {
    let s = Setup::new("choose");
    let (q1, q2) = (content(1000, 1), content(1200, 2));
    s.hub.add_repo(REPO, &[("README.md", b"hello"), ("Tiny-Q1_0.gguf", &q1), ("Tiny-PQ2_0.gguf", &q2)]);
    s.hub.add_repo("test-org/One-gguf", &[("README.md", b"hello"), ("one.gguf", &q1)]);

    let path = s.resolve(&format!("{REPO}:q1_0"), None).unwrap();
    assert!(path.ends_with("Tiny-Q1_0.gguf"), "{}", path.display());
    assert_eq!(std::fs::read(&path).unwrap(), q1);
    let path = s.resolve(REPO, Some("Tiny-PQ2_0.gguf")).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), q2);
    let path = s.resolve("test-org/One-gguf", None).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), q1);
    // The same content in two repositories: each has its own blob.
    assert!(s.repo_cache("test-org/One-gguf").blob(&sha256_hex(&q1)).is_file());

    s.hub.clear_log();
    let err = s.err(REPO, None);
    assert_eq!(
        err,
        "test-org/Tiny-gguf has 2 GGUF files: Tiny-Q1_0.gguf, Tiny-PQ2_0.gguf; \
         pick one with -hf test-org/Tiny-gguf:QUANT (e.g. :Q1_0) or --hf-file NAME"
    );
    let err = s.err(&format!("{REPO}:Q4_K_M"), None);
    assert!(err.contains("no GGUF file matching :Q4_K_M; its GGUF files: Tiny-Q1_0.gguf, Tiny-PQ2_0.gguf"), "{err}");
    let err = s.err(REPO, Some("tiny-q1_0.gguf"));
    assert!(err.contains("has no file \"tiny-q1_0.gguf\""), "{err}");
    assert!(s.hub.file_requests().is_empty(), "nothing is fetched when the choice fails");
}

#[test]
fn a_download_fills_the_cache_and_the_next_run_fetches_nothing() {
    let s = Setup::new("cache");
    let bytes = content(BIG, 3);
    let commit = s.hub.add_repo(REPO, &[("Tiny-Q1_0.gguf", &bytes)]);
    let sha = sha256_hex(&bytes);

    let path = s.resolve(REPO, None).unwrap();
    let repo = s.repo_cache(REPO);
    assert_eq!(path, repo.snapshot(&commit, "Tiny-Q1_0.gguf"));
    assert_eq!(path, s.config.cache_dir.join(format!("models--test-org--Tiny-gguf/snapshots/{commit}/Tiny-Q1_0.gguf")));
    #[cfg(unix)]
    assert_eq!(std::fs::read_link(&path).unwrap(), Path::new("../../blobs").join(&sha));
    assert_eq!(std::fs::read(repo.blob(&sha)).unwrap(), bytes);
    assert_eq!(std::fs::read_to_string(repo.root().join("refs/main")).unwrap(), commit);
    assert!(!incomplete_path(&repo.blob(&sha)).exists());
    let files = s.hub.file_requests();
    assert_eq!(files.len(), 2, "resolve, then the storage it redirects to: {files:?}");
    assert_eq!(files[0].target, format!("/{REPO}/resolve/{commit}/Tiny-Q1_0.gguf"));
    assert_eq!(files[1].target, format!("/cdn/{sha}"));
    assert!(files.iter().all(|r| r.range.is_none()));

    s.hub.clear_log();
    assert_eq!(s.resolve(&format!("{REPO}:Q1_0"), None).unwrap(), path);
    let seen = s.hub.requests();
    assert_eq!(seen.len(), 1, "only the listing: {seen:?}");
    assert_eq!(seen[0].target, format!("/api/models/{REPO}/revision/main?blobs=true"));
}

#[test]
fn a_cut_connection_is_resumed_in_the_same_run() {
    let mut s = Setup::new("resume-run");
    s.config.retries = 2;
    let bytes = content(BIG, 4);
    s.hub.add_repo(REPO, &[("Tiny-Q1_0.gguf", &bytes)]);
    s.hub.cut_next_download_at(BIG / 2);

    let path = s.resolve(REPO, None).unwrap();
    assert_eq!(sha256_hex(&std::fs::read(&path).unwrap()), sha256_hex(&bytes));
    let ranges: Vec<Option<String>> =
        s.hub.file_requests().iter().filter(|r| r.target.starts_with("/cdn/")).map(|r| r.range.clone()).collect();
    assert_eq!(ranges, [None, Some(format!("bytes={}-", BIG / 2))]);
}

#[test]
fn a_cut_connection_is_resumed_by_the_next_run() {
    let s = Setup::new("resume-next");
    let bytes = content(BIG, 5);
    let commit = s.hub.add_repo(REPO, &[("Tiny-Q1_0.gguf", &bytes)]);
    s.hub.cut_next_download_at(BIG / 3);

    let err = s.err(REPO, None);
    assert!(err.starts_with(&format!("downloading {REPO}/Tiny-Q1_0.gguf stopped at byte {} of {BIG}", BIG / 3)), "{err}");
    assert!(err.ends_with("run the command again to resume"), "{err}");
    let repo = s.repo_cache(REPO);
    let blob = repo.blob(&sha256_hex(&bytes));
    assert_eq!(std::fs::metadata(incomplete_path(&blob)).unwrap().len(), (BIG / 3) as u64, "the partial file stays");
    assert!(!blob.exists() && repo.cached(&commit, "Tiny-Q1_0.gguf").is_none());

    s.hub.clear_log();
    let path = s.resolve(REPO, None).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    let storage: Vec<_> = s.hub.file_requests().into_iter().filter(|r| r.target.starts_with("/cdn/")).collect();
    assert_eq!(storage.len(), 1);
    assert_eq!(storage[0].range.as_deref(), Some(format!("bytes={}-", BIG / 3).as_str()));
    assert!(!incomplete_path(&blob).exists());
}

#[test]
fn a_server_that_ignores_the_range_restarts_the_file() {
    let s = Setup::new("no-range");
    let bytes = content(BIG, 6);
    s.hub.add_repo(REPO, &[("Tiny-Q1_0.gguf", &bytes)]);
    s.hub.cut_next_download_at(1000);
    assert!(s.resolve(REPO, None).is_err());
    s.hub.ignore_ranges(true);
    let path = s.resolve(REPO, None).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), bytes, "the whole answer replaced the partial file");
}

#[test]
fn a_corrupted_download_is_deleted_and_not_cached() {
    let s = Setup::new("corrupt");
    let bytes = content(BIG, 7);
    s.hub.add_repo(REPO, &[("Tiny-Q1_0.gguf", &bytes)]);
    s.hub.corrupt_downloads(true);

    let err = s.err(REPO, None);
    let sha = sha256_hex(&bytes);
    assert!(err.starts_with(&format!("{REPO}/Tiny-Q1_0.gguf: the downloaded file's SHA-256 is ")), "{err}");
    assert!(err.contains(&format!("the hub lists {sha}")) && err.contains("nothing was cached"), "{err}");
    let repo = s.repo_cache(REPO);
    assert!(!repo.blob(&sha).exists() && !incomplete_path(&repo.blob(&sha)).exists());
    assert!(!repo.root().join("snapshots").exists() && repo.read_ref("main").is_none());

    s.hub.corrupt_downloads(false);
    assert_eq!(std::fs::read(s.resolve(REPO, None).unwrap()).unwrap(), bytes);
}

#[test]
fn gated_repositories_need_a_token() {
    let mut s = Setup::new("gated");
    s.hub.add_repo(REPO, &[("Tiny-Q1_0.gguf", &content(100, 8))]);
    s.hub.gate(REPO, "hf_right");

    let err = s.err(REPO, None);
    assert!(err.starts_with(&format!("{REPO}/Tiny-Q1_0.gguf: 401 Unauthorized")), "{err}");
    assert!(err.contains("set HF_TOKEN"), "{err}");
    s.config.token = Some("hf_wrong".into());
    let err = s.err(REPO, None);
    assert!(err.contains("403 Forbidden: the token has no access"), "{err}");

    s.config.token = Some("hf_right".into());
    s.hub.clear_log();
    s.resolve(REPO, None).unwrap();
    let seen = s.hub.requests();
    assert!(seen.iter().take(2).all(|r| r.authorization.as_deref() == Some("Bearer hf_right")), "{seen:?}");
}

#[test]
fn missing_repositories_and_files_say_so() {
    let mut s = Setup::new("missing");
    s.hub.add_repo(REPO, &[("Tiny-Q1_0.gguf", &content(100, 9)), ("Gone-Q2_0.gguf", &content(100, 10))]);
    s.hub.remove_content(REPO, "Gone-Q2_0.gguf");
    let endpoint = s.hub.endpoint();

    // Anonymous callers get a 401 for a repository that does not exist, as from the real hub.
    let err = s.err("test-org/nope", None);
    assert!(err.starts_with(&format!("test-org/nope: repository not found on {endpoint} (401)")), "{err}");
    assert!(err.contains("set HF_TOKEN"), "{err}");
    let err = s.err(REPO, Some("Gone-Q2_0.gguf"));
    assert_eq!(err, format!("{REPO}/Gone-Q2_0.gguf: file not found in {REPO} (404)"));
    s.config.token = Some("hf_any".into());
    assert_eq!(s.err("test-org/nope", None), format!("test-org/nope: repository not found on {endpoint} (404)"));
}

#[test]
fn offline_uses_the_cache_or_says_the_file_is_not_cached() {
    let mut s = Setup::new("offline");
    let (q1, q2) = (content(500, 11), content(600, 12));
    s.hub.add_repo(REPO, &[("Tiny-Q1_0.gguf", &q1), ("Tiny-PQ2_0.gguf", &q2)]);
    s.config.offline = true;

    let err = s.err(&format!("{REPO}:Q1_0"), None);
    let root = s.repo_cache(REPO).root().display().to_string();
    assert_eq!(
        err,
        format!(
            "HF_HUB_OFFLINE is set and {REPO}:Q1_0 is not in the cache {root} (cached GGUF files: none); \
             unset HF_HUB_OFFLINE to download it"
        )
    );

    s.config.offline = false;
    let online = s.resolve(&format!("{REPO}:Q1_0"), None).unwrap();
    s.config.offline = true;
    s.hub.clear_log();
    assert_eq!(s.resolve(&format!("{REPO}:q1_0"), None).unwrap(), online);
    assert_eq!(s.resolve(REPO, Some("Tiny-Q1_0.gguf")).unwrap(), online);
    assert_eq!(s.resolve(REPO, None).unwrap(), online, "the one cached GGUF");
    let err = s.err(&format!("{REPO}:PQ2_0"), None);
    assert!(err.contains("PQ2_0 is not in the cache") && err.contains("(cached GGUF files: Tiny-Q1_0.gguf)"), "{err}");
    assert!(s.hub.requests().is_empty(), "offline means no requests");
}

#[test]
fn an_unreachable_hub_is_an_error_unless_the_cache_has_the_file() {
    let mut s = Setup::new("unreachable");
    let bytes = content(500, 13);
    s.hub.add_repo(REPO, &[("Tiny-Q1_0.gguf", &bytes)]);
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let online = s.resolve(REPO, None).unwrap();

    s.config.endpoint = closed.clone();
    assert_eq!(s.resolve(REPO, None).unwrap(), online, "the cached file serves");
    let err = s.err("test-org/Other-gguf", None);
    assert!(err.starts_with(&format!("cannot reach the Hugging Face hub at {closed} (")), "{err}");
    assert!(err.contains("HF_HUB_OFFLINE=1") && !err.contains('\n'), "{err}");
}

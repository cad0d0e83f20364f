//! `-hf` / `--hf-file` through the real binary, against a mock hub on loopback (`HF_ENDPOINT`)
//! and a temporary cache (`HF_HUB_CACHE`): bench, info and generate on a model named by its
//! repository, the cache reused, offline mode, and the argument rules.

#[path = "../src/hub/test_server.rs"]
mod test_server;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use test_server::MockHub;

const REPO: &str = "test-org/Demo-gguf";
const FILE: &str = "Demo-Q1_0.gguf";

struct Setup {
    hub: MockHub,
    dir: PathBuf,
}

impl Setup {
    fn new(test: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("bonsai-hub-cli-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        let mut gguf = Vec::new();
        bonsai_model::demo::demo_gguf_writer().expect("demo model").write_to(&mut gguf).expect("gguf bytes");
        let hub = MockHub::start();
        hub.add_repo(REPO, &[("README.md", b"a demo"), (FILE, &gguf)]);
        Setup { hub, dir }
    }

    fn cache(&self) -> PathBuf {
        self.dir.join("hub")
    }

    /// `bonsai args` with the hub and the cache pointed at this test's, and no user settings.
    fn bonsai(&self, args: &[&str], offline: bool) -> Output {
        let mut command = Command::new(env!("CARGO_BIN_EXE_bonsai"));
        command
            .args(args)
            .env("HF_ENDPOINT", self.hub.endpoint())
            .env("HF_HUB_CACHE", self.cache())
            // The token file is looked up under HF_HOME: an empty folder, not the user's login.
            .env("HF_HOME", &self.dir)
            .env("BONSAI_CACHE_DIR", self.dir.join("bonsai"));
        for var in ["HF_TOKEN", "HF_TOKEN_PATH", "HF_HUB_OFFLINE"] {
            command.env_remove(var);
        }
        if offline {
            command.env("HF_HUB_OFFLINE", "1");
        }
        command.output().expect("running bonsai")
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn snapshot_of(cache: &Path, json_file: &str) -> bool {
    Path::new(json_file).starts_with(cache.join("models--test-org--Demo-gguf/snapshots"))
        && json_file.ends_with(FILE)
}

#[test]
fn bench_and_info_run_a_model_named_by_its_repository() {
    let s = Setup::new("bench");
    let out = s.bonsai(&["bench", "--cpu", "-hf", REPO, "-p", "8", "-n", "2", "-r", "1"], false);
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let table = text(&out.stdout);
    assert!(table.contains("| pp8") && table.contains("| tg2"), "{table}");
    assert!(text(&out.stderr).contains(&format!("downloading {REPO}/{FILE}")), "{}", text(&out.stderr));
    assert_eq!(s.hub.file_requests().len(), 2, "resolve and storage: {:?}", s.hub.file_requests());

    // The cached file serves: -hf with a quant, and the llama.cpp short forms -hf / -hff.
    s.hub.clear_log();
    for args in [
        vec!["info", "-hf", "test-org/Demo-gguf:q1_0", "--json"],
        vec!["info", "--json", "-hf", REPO, "-hff", FILE],
        vec!["info", "--json", "--hf-repo", REPO, "--hf-file", FILE],
    ] {
        let out = s.bonsai(&args, false);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
        assert!(snapshot_of(&s.cache(), v["file"].as_str().unwrap_or("")), "{v}");
        assert_eq!(v["architecture"], "qwen3");
    }
    assert!(s.hub.file_requests().is_empty(), "no file was fetched again: {:?}", s.hub.file_requests());

    let out = s.bonsai(&["generate", "--cpu", "-hf", REPO, "-p", "The bonsai", "-n", "4"], false);
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    assert!(text(&out.stderr).contains("decode: "), "{}", text(&out.stderr));
}

#[test]
fn offline_mode_uses_the_cache_or_fails_in_one_line() {
    let s = Setup::new("offline");
    let out = s.bonsai(&["info", "-hf", REPO], true);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.starts_with(&format!("error: HF_HUB_OFFLINE is set and {REPO} is not in the cache")), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(s.hub.requests().is_empty(), "offline: no request");

    assert!(s.bonsai(&["info", "-hf", REPO], false).status.success());
    s.hub.clear_log();
    let out = s.bonsai(&["info", "-hf", REPO, "--json"], true);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(s.hub.requests().is_empty(), "offline: no request");
}

#[test]
fn hub_errors_are_one_line() {
    let s = Setup::new("errors");
    let out = s.bonsai(&["info", "-hf", "test-org/missing"], false);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.starts_with("error: test-org/missing: repository not found on http://127.0.0.1:"), "{err}");
    assert!(err.contains("HF_TOKEN") && err.lines().count() == 1, "{err}");
    let out = s.bonsai(&["info", "-hf", "not-a-repo"], false);
    assert!(text(&out.stderr).starts_with("error: -hf wants OWNER/REPO[:QUANT]"), "{}", text(&out.stderr));
}

#[test]
fn model_and_repository_options_conflict() {
    let s = Setup::new("conflicts");
    for args in [
        vec!["generate", "-m", "x.gguf", "-hf", REPO, "-p", "hi"],
        vec!["bench", "--synthetic", "tiny", "-hf", REPO],
        vec!["info", "x.gguf", "-hf", REPO],
    ] {
        let out = s.bonsai(&args, false);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = text(&out.stderr);
        assert!(err.contains("cannot be used with") && err.contains("--hf-repo"), "{args:?}: {err}");
    }
    let out = s.bonsai(&["info", "--hf-file", FILE], false);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--hf-repo"), "{}", text(&out.stderr));
    assert!(s.hub.requests().is_empty());
}

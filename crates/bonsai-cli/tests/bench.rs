//! Runs `bonsai bench` on the CPU with the tiny synthetic models: the JSON report's shape, the
//! table, and the clear error for a request beyond --ctx.

use std::process::{Command, Output};

fn bonsai(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bonsai")).args(args).output().expect("running bonsai")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn cpu_bench_on_tiny_prints_a_json_report() {
    let out = bonsai(&["bench", "--cpu", "--synthetic", "tiny", "-p", "16", "-n", "4", "-r", "2", "--ctx-depth", "0,8", "--json"]);
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is one JSON object");
    assert_eq!(v["model"], "tiny (synthetic)");
    assert!(v["backend"].as_str().is_some_and(|b| b.starts_with("cpu (")), "{v}");
    assert_eq!(v["ctx"], 16, "max(prompt 16, deepest decode: depth 8 + 4 generated)");
    assert!(v["weight_bytes_per_token"].as_u64().is_some_and(|b| b > 0), "{v}");
    assert!(v["bandwidth_bytes_per_s"].as_f64().is_some_and(|b| b > 0.0), "{v}");
    let rows = v["results"].as_array().expect("results");
    let tests: Vec<&str> = rows.iter().filter_map(|r| r["test"].as_str()).collect();
    assert_eq!(tests, ["pp16", "tg4", "tg4 @ d8"]);
    for r in rows {
        let (lo, mid, hi) = (r["tok_per_s_min"].as_f64(), r["tok_per_s_median"].as_f64(), r["tok_per_s_max"].as_f64());
        let (lo, mid, hi) = (lo.expect("min"), mid.expect("median"), hi.expect("max"));
        assert!(lo > 0.0 && lo <= mid && mid <= hi, "{r}");
    }
    assert!(rows[1]["percent_of_bandwidth_limit"].as_f64().is_some_and(|p| p > 0.0), "{v}");
    assert!(text(&out.stderr).contains("backend: cpu ("), "the backend is announced");
}

/// The hybrid path (DeltaNet states, Hadamard fold) through bench, decode at a depth included:
/// a recurrent state refills between repetitions instead of rewinding.
#[test]
fn cpu_bench_runs_the_qwen35_tiny_model() {
    let out = bonsai(&["bench", "--cpu", "--synthetic", "qwen35-tiny", "-p", "8", "-n", "4", "-r", "2", "--ctx-depth", "0,8", "--json"]);
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is one JSON object");
    assert_eq!(v["model"], "qwen35-tiny (synthetic)");
    let tests: Vec<&str> = v["results"].as_array().expect("results").iter().filter_map(|r| r["test"].as_str()).collect();
    assert_eq!(tests, ["pp8", "tg4", "tg4 @ d8"]);
}

#[test]
fn cpu_bench_table_lists_every_test() {
    let out = bonsai(&["bench", "--cpu", "--synthetic", "tiny", "-p", "8", "-n", "2", "-r", "1"]);
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let table = text(&out.stdout);
    assert!(table.contains("| pp8") && table.contains("| tg2") && table.contains("read bandwidth ("), "{table}");
}

#[test]
fn a_request_beyond_ctx_fails_in_one_line() {
    let out = bonsai(&["bench", "--cpu", "--synthetic", "tiny", "-p", "8", "-n", "8", "--ctx-depth", "60", "--ctx", "64"]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.starts_with("error: bench needs a context of 68 tokens") && err.lines().count() == 1, "{err}");
}

/// Without a GPU the CPU takes over, announced; `--cpu` asks for it, so nothing is announced.
/// (Where a driver and device exist the first run uses the GPU; only the --cpu half applies.)
#[test]
fn the_cpu_fallback_is_announced_and_cpu_is_not() {
    let args = ["bench", "--synthetic", "tiny", "-p", "4", "-n", "2", "-r", "1", "--json"];
    let forced = bonsai(&[&args[..], &["--cpu"]].concat());
    assert!(forced.status.success(), "stderr: {}", text(&forced.stderr));
    assert!(!text(&forced.stderr).contains("no CUDA device found"), "{}", text(&forced.stderr));
    if bonsai_kernels::cuda::driver_present() {
        return;
    }
    let auto = bonsai(&args);
    assert!(auto.status.success(), "stderr: {}", text(&auto.stderr));
    let err = text(&auto.stderr);
    assert!(err.contains("no CUDA device found, using the CPU") && err.contains("backend: cpu ("), "{err}");
}

/// A GGUF with no tokenizer metadata (as llama-bench's test files often are): `bench` and
/// `info` run it on token ids; commands that need text say the file has no tokenizer.
#[test]
fn a_file_without_a_tokenizer_benches_and_text_commands_say_why_not() {
    use bonsai_model::demo::model_gguf_writer;
    use bonsai_model::synthetic::{random_tensors, Geometry, WeightKind};
    let dir = std::env::temp_dir().join(format!("bonsai-bench-notok-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("no-tokenizer.gguf");
    let g = Geometry::tiny();
    let tensors = random_tensors(&g, WeightKind::OneBit, 7).expect("tensors");
    model_gguf_writer(&g, &tensors, None, None).expect("writer").write_file(&path).expect("write");
    let file = path.to_str().expect("utf-8 path");

    let out = bonsai(&["bench", "--cpu", "-m", file, "-p", "8", "-n", "2", "-r", "1", "--json"]);
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is one JSON object");
    assert_eq!(v["results"].as_array().map(Vec::len), Some(2), "{v}");

    let out = bonsai(&["info", file]);
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    assert!(text(&out.stdout).contains("tokenizer:     unavailable"), "{}", text(&out.stdout));

    for args in [&["generate", "--cpu", "-m", file, "-p", "hi", "-n", "2"][..], &["perplexity", "--cpu", "-m", file, "-f", file][..]] {
        let out = bonsai(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = text(&out.stderr);
        let last = err.lines().last().unwrap_or("");
        assert!(last.starts_with("error: ") && last.contains("has no tokenizer"), "{args:?}: {err}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

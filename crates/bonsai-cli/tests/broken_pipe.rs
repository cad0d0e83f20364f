//! A reader that closes stdout early (`bonsai info F | head`): the command must stop quietly
//! with status 0, not panic with "failed printing to stdout: Broken pipe".

use bonsai_gguf::{quantize, GgufWriter, TensorType};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

/// Tensors in the fixture: each prints one ~90-byte line, so the text report is ~180 KiB, well
/// over a Linux pipe's 64 KiB buffer. The command therefore must meet the closed read end even
/// if it started writing before the test closed it (a full pipe blocks until then).
const N_TENSORS: usize = 2000;
/// Weights per fixture tensor (one 128-weight group: the smallest F32 payload that is not trivial).
const TENSOR_LEN: usize = 128;
/// Bytes a Linux pipe buffers by default.
const PIPE_BUFFER_BYTES: usize = 64 * 1024;

fn scratch(test: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("bonsai-broken-pipe-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// A GGUF with [`N_TENSORS`] small F32 tensors and long names (no model metadata: `info`
/// reports the geometry as unavailable, which is fine here).
fn write_many_tensors(path: &PathBuf) {
    let mut w = GgufWriter::new();
    let values: Vec<f32> = (0..TENSOR_LEN).map(|i| i as f32 - 64.0).collect();
    for i in 0..N_TENSORS {
        let data = quantize(TensorType::F32, &values).expect("quantize f32");
        let name = format!("blk.{i}.a_long_tensor_name_so_each_line_is_wide.weight");
        w.add_tensor(&name, &[TENSOR_LEN as u64], TensorType::F32, data).expect("add tensor");
    }
    w.write_file(path).expect("write fixture");
}

/// Runs `bonsai ARGS` with stdout a pipe whose read end is closed right after the spawn.
fn run_with_stdout_closed(args: &[&str], cache: &PathBuf) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_bonsai"))
        .args(args)
        .env("BONSAI_CACHE_DIR", cache)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run bonsai");
    drop(child.stdout.take());
    child.wait_with_output().expect("wait for bonsai")
}

fn assert_quiet_success(what: &str, out: &Output) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked") && !stderr.contains("Broken pipe"), "{what}: {stderr}");
    assert!(!stderr.contains("error:"), "{what}: {stderr}");
    assert_eq!(out.status.code(), Some(0), "{what}: stderr: {stderr}");
}

#[test]
fn info_exits_quietly_when_stdout_closes() {
    let dir = scratch("info");
    let path = dir.join("many.gguf");
    write_many_tensors(&path);
    let path_text = path.to_str().expect("utf-8 path");
    // The premise: the full report does not fit in the pipe buffer.
    let full = Command::new(env!("CARGO_BIN_EXE_bonsai")).args(["info", path_text]).output();
    let full = full.expect("run bonsai info");
    assert!(full.status.success(), "{}", String::from_utf8_lossy(&full.stderr));
    assert!(
        full.stdout.len() > 2 * PIPE_BUFFER_BYTES,
        "report is only {} bytes",
        full.stdout.len()
    );

    for args in [vec!["info", path_text], vec!["info", path_text, "--json"]] {
        let out = run_with_stdout_closed(&args, &dir);
        assert_quiet_success(&args.join(" "), &out);
    }
}

/// Generation streams tokens to stdout; the first token comes after the default model is written
/// to the cache and prefilled, long after the read end is closed.
#[test]
fn generate_exits_quietly_when_stdout_closes() {
    let cache = scratch("generate");
    let out =
        run_with_stdout_closed(&["generate", "-p", "Hello", "-n", "8", "--seed", "3"], &cache);
    assert_quiet_success("generate", &out);
}

/// Perplexity prints its one result line after scoring the whole file.
#[test]
fn perplexity_exits_quietly_when_stdout_closes() {
    let cache = scratch("perplexity");
    let file = cache.join("text.txt");
    std::fs::write(&file, "The quick brown fox jumps over the lazy dog.").expect("write text");
    let file = file.to_str().expect("utf-8 path");
    let out = run_with_stdout_closed(&["perplexity", "-f", file, "--ctx", "16"], &cache);
    assert_quiet_success("perplexity", &out);
}

/// Bench prints its table (or JSON) once, after measuring.
#[test]
fn bench_exits_quietly_when_stdout_closes() {
    let cache = scratch("bench");
    let base = ["bench", "--cpu", "--synthetic", "tiny", "-p", "8", "-n", "2", "-r", "1"];
    for json in [false, true] {
        let args: Vec<&str> = base.iter().copied().chain(json.then_some("--json")).collect();
        let out = run_with_stdout_closed(&args, &cache);
        assert_quiet_success(&args.join(" "), &out);
    }
}

/// `kernels clear` needs no GPU and prints one line.
#[test]
fn kernels_clear_exits_quietly_when_stdout_closes() {
    let cache = scratch("kernels");
    let out = run_with_stdout_closed(&["kernels", "clear"], &cache);
    assert_quiet_success("kernels clear", &out);
}

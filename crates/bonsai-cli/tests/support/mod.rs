//! What the server tests share: starting `bonsai serve` and speaking raw HTTP/1.1 to it (raw, so
//! that tests can send malformed requests and vanish mid-stream).

#![allow(dead_code)] // each test binary uses its own part

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub const KEY: &str = "test-key";

/// A server child process, killed on drop.
pub struct Server {
    child: Child,
    pub addr: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The random-weight demo model (`bonsai_model::demo`) written as `dir/bonsai-demo.gguf` (so the
/// server names it "bonsai-demo"). Server tests use it rather than the built-in trained model:
/// its streams run to their token budget (a trained model ends a story with its stop token), its
/// context is 4096 tokens, and its logits are small, as the near-tie bounds assume.
pub fn demo_model_file(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("bonsai-demo.gguf");
    let mut bytes = Vec::new();
    bonsai_model::demo::demo_gguf_writer().unwrap().write_to(&mut bytes).unwrap();
    if std::fs::read(&path).ok() != Some(bytes.clone()) {
        // Tests run on several threads: each writes its own temporary and renames it in place.
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = dir.join(format!("bonsai-demo.gguf.tmp-{}-{n}", std::process::id()));
        std::fs::write(&tmp, &bytes).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
    }
    path
}

/// A value recorded in models/bonsai-tiny-stories.expect (`key value` lines, written by
/// scripts/default-model/install.sh with the built-in default model).
pub fn default_model_expect(key: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models/bonsai-tiny-stories.expect");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(' ').map(|v| v.trim().to_string()))
        .unwrap_or_else(|| panic!("no '{key}' in {}", path.display()))
}

/// Starts `cmd` (a `bonsai serve` command line) on a free port with [`KEY`]; returns once it
/// listens.
pub fn start_server(mut cmd: Command) -> Server {
    let mut child = cmd.args(["--port", "0", "--api-key", KEY]).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "the server exited before listening");
        if let Some(rest) = line.split("http://").nth(1) {
            let addr = rest.split_whitespace().next().unwrap().to_string();
            // Keep draining stderr so the server never blocks on a full pipe.
            std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
            return Server { child, addr };
        }
    }
}

/// One HTTP/1.1 exchange on a fresh connection: (status, body).
pub fn request(addr: &str, method: &str, path: &str, key: Option<&str>, body: &[u8]) -> (u16, String) {
    let mut s = connect(addr);
    send(&mut s, method, path, key, body);
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or(String::new(), |(_, b)| b.to_string());
    (status, body)
}

pub fn connect(addr: &str) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(300))).unwrap();
    s
}

pub fn send(s: &mut TcpStream, method: &str, path: &str, key: Option<&str>, body: &[u8]) {
    let auth = key.map_or(String::new(), |k| format!("Authorization: Bearer {k}\r\n"));
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: test\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    // The server may answer (413) and close before reading everything: ignore write errors.
    let _ = s.write_all(head.as_bytes()).and_then(|()| s.write_all(body));
}

/// The counter or gauge `name` of the server's `/metrics`.
pub fn metric(addr: &str, name: &str) -> u64 {
    let (status, body) = request(addr, "GET", "/metrics", Some(KEY), b"");
    assert_eq!(status, 200);
    body.lines().find_map(|l| l.strip_prefix(&format!("{name} "))).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{name} in {body}"))
}

/// The parsed reply to the non-streamed completion request `body`, panicking on any status but 200.
fn post_completion(addr: &str, body: &str) -> serde_json::Value {
    let (status, reply) = request(addr, "POST", "/v1/completions", Some(KEY), body.as_bytes());
    assert_eq!(status, 200, "{reply}");
    serde_json::from_str(&reply).unwrap_or_else(|e| panic!("{e}: {reply}"))
}

/// A non-streamed completion of token ids `prompt` (greedy, `max_tokens`, plus `extra` fields):
/// the parsed response, panicking on any status but 200.
pub fn completion(addr: &str, prompt: &[u32], max_tokens: usize, extra: &str) -> serde_json::Value {
    post_completion(addr, &format!(r#"{{"model": "bonsai-demo", "prompt": {prompt:?}, "max_tokens": {max_tokens}, "temperature": 0{extra}}}"#))
}

/// A non-streamed completion of token ids `prompt` sampled at temperature 0.8 with `seed` (the
/// server's defaults for top-k, top-p and min-p), `max_tokens` long whatever it generates, plus
/// `extra` fields: the parsed response, panicking on any status but 200.
pub fn sampled_completion(addr: &str, prompt: &[u32], max_tokens: usize, seed: u64, extra: &str) -> serde_json::Value {
    post_completion(
        addr,
        &format!(r#"{{"model": "bonsai-demo", "prompt": {prompt:?}, "max_tokens": {max_tokens}, "temperature": 0.8, "seed": {seed}, "ignore_eos": true{extra}}}"#),
    )
}

/// The text of a completion response.
pub fn text_of(reply: &serde_json::Value) -> String {
    reply["choices"][0]["text"].as_str().unwrap_or_else(|| panic!("no text in {reply}")).to_string()
}

/// Each of `got`'s completions (`steps` tokens, greedy) has the text of `alone`'s (requested with
/// `"logprobs": 2`) or parts from it only at a step whose top two logits of `alone` are within
/// `near_tie`: a tie the two runs' arithmetic may break either way.
pub fn assert_greedy_equal_or_near_tie(alone: &[serde_json::Value], got: &[serde_json::Value], steps: usize, near_tie: f64) {
    for (s, (want, got)) in alone.iter().zip(got).enumerate() {
        let want_tokens = want["choices"][0]["logprobs"]["tokens"].as_array().unwrap();
        assert_eq!(got["usage"]["completion_tokens"], steps, "stream {s}: {got}");
        let (want_text, got_text) = (want["choices"][0]["text"].as_str().unwrap(), got["choices"][0]["text"].as_str().unwrap());
        if want_text != got_text {
            // The first token whose text the other answer does not continue with.
            let mut prefix = String::new();
            let step = want_tokens.iter().position(|t| {
                prefix.push_str(t.as_str().unwrap());
                !got_text.starts_with(&prefix)
            });
            let step = step.unwrap_or_else(|| panic!("stream {s}: {got_text:?} vs alone {want_text:?}"));
            let tops: Vec<f64> = want["choices"][0]["logprobs"]["top_logprobs"][step].as_object().unwrap().values().map(|v| v.as_f64().unwrap()).collect();
            let gap = (tops[0] - tops[1]).abs();
            assert!(gap <= near_tie, "stream {s} parts at step {step} with a top-2 gap of {gap}: {got_text:?} vs {want_text:?}");
            println!("stream {s}: parts at step {step}, a near tie (gap {gap:.2e})");
        }
    }
}
/// A streamed completion of token ids `prompt` that runs until its connection is dropped (it
/// ignores the stop token and asks for more tokens than any context holds), returned once its
/// first token arrived: its prompt is in its sequence's cache by then.
pub fn hold_sequence(addr: &str, prompt: &[u32]) -> TcpStream {
    let mut s = connect(addr);
    let body = format!(r#"{{"model": "bonsai-demo", "prompt": {prompt:?}, "stream": true, "max_tokens": 100000, "ignore_eos": true}}"#);
    send(&mut s, "POST", "/v1/completions", Some(KEY), body.as_bytes());
    read_first_event(&mut s);
    s
}

/// Reads a streaming response on `s` until its first `data:` event (a generated token: the
/// request's prompt is in its sequence's cache by then).
pub fn read_first_event(s: &mut TcpStream) {
    let mut seen = Vec::new();
    let mut buf = [0u8; 512];
    while !String::from_utf8_lossy(&seen).contains("data: {") {
        let n = std::io::Read::read(s, &mut buf).unwrap();
        assert!(n > 0, "the stream ended before its first event: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
}

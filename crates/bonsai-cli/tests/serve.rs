//! `bonsai serve` on the random-weight demo model (CPU, see `support::demo_model_file`): the official `openai` Python client against it, and
//! hostile input over raw HTTP (malformed and fuzzed bodies, wrong keys, oversized bodies, long
//! prompts, a full queue, clients that vanish mid-stream) while other streams complete.

mod support;

use std::io::Read;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use support::{connect, demo_model_file, metric, request, send, start_server, KEY};

const MODEL: &str = "bonsai-demo";

fn cache_dir() -> PathBuf {
    std::env::temp_dir().join(format!("bonsai-serve-test-{}", std::process::id()))
}

fn start(args: &[&str]) -> support::Server {
    let cache = cache_dir();
    let model = demo_model_file(&cache);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_bonsai"));
    cmd.args(["serve", "--cpu", "-m"]).arg(&model).args(args).env("BONSAI_CACHE_DIR", &cache);
    start_server(cmd)
}

/// A server (2 sequences) on the demo model with `template` as its chat template, its files in a
/// cache folder of its own (`name`).
fn start_with_template(name: &str, template: &str) -> support::Server {
    let cache = cache_dir().join(name);
    let demo = demo_model_file(&cache);
    let mut w = bonsai_gguf::GgufWriter::from_file(&bonsai_gguf::GgufFile::open(&demo).unwrap()).unwrap();
    w.add_metadata(bonsai_gguf::keys::TOKENIZER_CHAT_TEMPLATE, bonsai_gguf::MetaValue::String(template.into()));
    let model = cache.join("bonsai-demo.gguf");
    w.write_file(&model).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_bonsai"));
    cmd.args(["serve", "--cpu", "-m"]).arg(&model).args(["-np", "2"]).env("BONSAI_CACHE_DIR", &cache);
    start_server(cmd)
}

fn post(addr: &str, path: &str, body: &str) -> (u16, String) {
    request(addr, "POST", path, Some(KEY), body.as_bytes())
}

fn chat_body(content: &str, extra: &str) -> String {
    format!(r#"{{"model": "{MODEL}", "messages": [{{"role": "user", "content": "{content}"}}]{extra}}}"#)
}

fn error_of(body: &str) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    assert!(v["error"]["message"].is_string() && v["error"]["type"].is_string(), "{body}");
    v["error"].clone()
}

/// A streaming request read up to its `[DONE]`: the concatenated content.
fn stream_to_end(addr: &str, content: &str, max_tokens: usize) -> String {
    let (status, body) = post(addr, "/v1/chat/completions", &chat_body(content, &format!(r#", "stream": true, "max_tokens": {max_tokens}, "temperature": 0"#)));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("data: [DONE]"), "{body}");
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .filter_map(|d| serde_json::from_str::<serde_json::Value>(d).ok())
        .filter_map(|v| v["choices"][0]["delta"]["content"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn the_openai_python_client_works_against_the_server() {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let has_client = Command::new(&python).args(["-c", "import openai"]).status().is_ok_and(|s| s.success());
    if !has_client {
        // scripts/test.sh installs the pinned client and sets this, so CI never skips.
        assert!(std::env::var_os("BONSAI_REQUIRE_OPENAI").is_none(), "the openai package is not importable by {python}");
        eprintln!("skipped: the openai Python package is not installed (scripts/test.sh installs it)");
        return;
    }
    let server = start(&["-np", "4"]);
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/serve/openai_client_test.py");
    let out = Command::new(&python).arg(script).args([format!("http://{}", server.addr), KEY.into(), MODEL.into()]).output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    println!("{stdout}");
}

#[test]
fn bad_input_gets_openai_errors_and_never_stops_other_streams() {
    let server = start(&["-np", "4", "--ctx", "256"]);
    let addr = server.addr.clone();
    let want = stream_to_end(&addr, "a stream that runs meanwhile", 24);
    // A stream runs while the hostile requests arrive; it must end normally and say the same.
    let background = {
        let addr = addr.clone();
        std::thread::spawn(move || stream_to_end(&addr, "a stream that runs meanwhile", 24))
    };

    let (status, _) = request(&addr, "GET", "/health", None, b"");
    assert_eq!(status, 200, "/health needs no key");
    let (status, body) = request(&addr, "GET", "/v1/models", None, b"");
    assert_eq!((status, error_of(&body)["code"].as_str()), (401, Some("invalid_api_key")));
    let (status, _) = request(&addr, "GET", "/v1/models", Some("wrong"), b"");
    assert_eq!(status, 401);

    let cases: &[(&str, u16)] = &[
        ("", 400),
        ("{", 400),
        ("null", 400),
        ("[]", 400),
        (r#"{"model": "bonsai-demo"}"#, 400),
        (r#"{"model": "bonsai-demo", "messages": [{"role": "user", "content": "x"}], "max_tokens": "ten"}"#, 400),
        (r#"{"model": "bonsai-demo", "messages": [{"role": "user", "content": "x"}], "temperature": 1e400}"#, 400),
        (r#"{"model": "other", "messages": [{"role": "user", "content": "x"}]}"#, 404),
    ];
    for (body, want_status) in cases {
        let (status, reply) = post(&addr, "/v1/chat/completions", body);
        assert_eq!(status, *want_status, "{body}: {reply}");
        error_of(&reply);
    }
    // Nesting deeper than the JSON parser's limit, and fuzzed bytes: 400, no crash.
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    assert_eq!(post(&addr, "/v1/completions", &deep).0, 400);
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let seed_body = chat_body("fuzz", r#", "max_tokens": 2, "stop": ["x"], "logprobs": true"#).into_bytes();
    for _ in 0..200 {
        let mut body = seed_body.clone();
        for _ in 0..4 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let at = (rng % body.len() as u64) as usize;
            body[at] = (rng >> 32) as u8;
        }
        let (status, reply) = request(&addr, "POST", "/v1/chat/completions", Some(KEY), &body);
        assert!([200, 400, 404].contains(&status), "status {status} for {:?}: {reply}", String::from_utf8_lossy(&body));
    }
    // Too large a body: 413; a prompt longer than the context: 400 with OpenAI's code.
    let (status, reply) = request(&addr, "POST", "/v1/completions", Some(KEY), &vec![b' '; 5 << 20]);
    assert_eq!(status, 413, "{reply}");
    let long = format!(r#"{{"model": "{MODEL}", "prompt": "{}"}}"#, "word ".repeat(300));
    let (status, reply) = post(&addr, "/v1/completions", &long);
    assert_eq!((status, error_of(&reply)["code"].as_str()), (400, Some("context_length_exceeded")), "{reply}");
    let (status, _) = request(&addr, "GET", "/no/such/route", Some(KEY), b"");
    assert_eq!(status, 404);

    // A client that disconnects in the middle of a stream frees its sequence.
    let mut s = connect(&addr);
    send(&mut s, "POST", "/v1/chat/completions", Some(KEY), chat_body("leaving early", r#", "stream": true, "max_tokens": 4000"#).as_bytes());
    let mut first = [0u8; 512];
    assert!(s.read(&mut first).unwrap() > 0);
    drop(s);

    assert_eq!(background.join().unwrap(), want, "the background stream's text changed");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while metric(&addr, "bonsai_running_sequences") != 0 {
        assert!(std::time::Instant::now() < deadline, "the abandoned stream still holds its sequence");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (status, body) = post(&addr, "/v1/chat/completions", &chat_body("still alive?", r#", "max_tokens": 3"#));
    assert_eq!(status, 200, "{body}");
    assert_eq!(metric(&addr, "bonsai_requests_failed_total"), 0);
}

#[test]
fn a_full_queue_answers_503_with_retry_after() {
    let server = start(&["-np", "1", "--queue", "1"]);
    let addr = server.addr.clone();
    // One long stream holds the only sequence (it ignores the stop token, which the random model
    // samples every few hundred tokens); one request may wait; the next is turned away.
    let mut holder = connect(&addr);
    send(&mut holder, "POST", "/v1/completions", Some(KEY), format!(r#"{{"model": "{MODEL}", "prompt": "hold", "stream": true, "max_tokens": 100000, "ignore_eos": true}}"#).as_bytes());
    let mut first = [0u8; 256];
    assert!(holder.read(&mut first).unwrap() > 0);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while metric(&addr, "bonsai_running_sequences") != 1 {
        assert!(std::time::Instant::now() < deadline, "the first request never got the sequence");
        std::thread::sleep(Duration::from_millis(20));
    }
    let waiter = {
        let addr = addr.clone();
        std::thread::spawn(move || post(&addr, "/v1/completions", &format!(r#"{{"model": "{MODEL}", "prompt": "wait", "max_tokens": 2}}"#)))
    };
    while metric(&addr, "bonsai_queue_depth") != 1 {
        assert!(std::time::Instant::now() < deadline, "the second request never queued");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut s = connect(&addr);
    send(&mut s, "POST", "/v1/completions", Some(KEY), format!(r#"{{"model": "{MODEL}", "prompt": "no room"}}"#).as_bytes());
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    assert!(raw.starts_with("HTTP/1.1 503"), "{raw}");
    assert!(raw.to_ascii_lowercase().contains("retry-after: 1"), "{raw}");
    // The holder leaves: the waiting request gets the sequence and completes.
    drop(holder);
    let (status, body) = waiter.join().unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(metric(&addr, "bonsai_requests_rejected_total"), 1);
}

/// `bench serve -p 9 -n 5 BENCH_ARGS --json` starting a CPU server with SERVER_ARGS on the demo
/// model: its report.
fn bench_serve(bench_args: &[&str], server_args: &[&str]) -> serde_json::Value {
    let cache = cache_dir();
    let model = demo_model_file(&cache);
    let out = Command::new(env!("CARGO_BIN_EXE_bonsai"))
        .args(["bench", "serve", "-p", "9", "-n", "5", "--json"])
        .args(bench_args)
        .args(["--", "--cpu"])
        .args(server_args)
        .arg("-m")
        .arg(&model)
        .env("BONSAI_CACHE_DIR", &cache)
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{bench_args:?} {server_args:?} stdout: {stdout}\nstderr: {stderr}");
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[test]
fn bench_serve_starts_a_server_and_counts_every_token() {
    let bench = |args: &[&str]| bench_serve(args, &["-np", "3"]);
    let v = bench(&["--streams", "4", "--requests", "6"]);
    assert_eq!((v["requests"].as_u64(), v["output_tokens"].as_u64(), v["errors"].as_u64()), (Some(6), Some(30), Some(0)), "{v}");
    assert!(v["output_tok_per_s"].as_f64().is_some_and(|r| r > 0.0) && v["ttft_p99_s"].as_f64().is_some(), "{v}");
    // Sampled load: every request at temperature 0.8 (the server's top-k, top-p, min-p) or with
    // a top-k of its own.
    for extra in [&["--streams", "3", "--temperature", "0.8"][..], &["--streams", "3", "--temperature", "0.8", "--top-k", "5", "--min-p", "0"]] {
        let v = bench(extra);
        assert_eq!((v["output_tokens"].as_u64(), v["errors"].as_u64(), v["temperature"].as_f64()), (Some(15), Some(0), Some(0.8f32 as f64)), "{v}");
    }
}

/// 256 concurrent streams on 256 sequences whose shared KV cache holds 64 blocks (each request
/// sets aside 2, so about 32 run at once and the rest wait): every request completes with all its
/// tokens and no error.
#[test]
fn two_hundred_fifty_six_streams_complete_through_a_small_kv_cache() {
    let v = bench_serve(&["--streams", "256"], &["-np", "256", "--kv-tokens", "4096"]);
    assert_eq!((v["requests"].as_u64(), v["output_tokens"].as_u64(), v["errors"].as_u64()), (Some(256), Some(1280), Some(0)), "{v}");
}

/// Where a greedy stream batched on the CPU may part from the same request alone: the batch runs
/// its rows through the panel GEMM, one row alone through the GEMV, so logits differ by rounding
/// only: within ~K·u·Σ|w·x| per logit, K = 512 inputs at most here, a few 1e-5 on this model's
/// logits of magnitude ~10; a gap 10x that is a tie the arithmetic may break either way.
const CPU_NEAR_TIE: f64 = 1e-3;

/// A hybrid qwen35 model (recurrent DeltaNet states) served: concurrent greedy streams give the
/// tokens each gives alone, and a second round on the same slots (whose recurrent states cannot
/// keep a partial prefix, so they restart) gives them again.
#[test]
fn a_hybrid_qwen35_model_serves_concurrent_streams_as_each_alone() {
    let cache = cache_dir();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_bonsai"));
    cmd.args(["serve", "--cpu", "--synthetic", "qwen35-tiny", "-np", "3", "-a", "bonsai-demo"]).env("BONSAI_CACHE_DIR", &cache);
    let server = start_server(cmd);
    let prompts: Vec<Vec<u32>> = (0..3u32).map(|s| (0..12 + 5 * s).map(|i| (i * 31 + s * 7) % 250 + 1).collect()).collect();
    let steps = 8;
    let extra = r#", "ignore_eos": true"#;
    let alone: Vec<serde_json::Value> =
        prompts.iter().map(|p| support::completion(&server.addr, p, steps, r#", "logprobs": 2, "ignore_eos": true"#)).collect();
    for _round in 0..2 {
        let together: Vec<serde_json::Value> = std::thread::scope(|scope| {
            let handles: Vec<_> = prompts.iter().map(|p| scope.spawn(|| support::completion(&server.addr, p, steps, extra))).collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        support::assert_greedy_equal_or_near_tie(&alone, &together, steps, CPU_NEAR_TIE);
    }
}

/// A KV cache smaller than every slot's context makes requests wait, never fail: with
/// `--kv-tokens 256` (5 blocks of 64, one kept for a shared block's copy), four concurrent requests
/// of 70-token prompts and 20 tokens each (3 blocks set aside apiece) run one or two at a time and
/// each gives the tokens it gives alone; a prompt longer than the cache is refused at once, and
/// the cache's blocks show in /metrics.
#[test]
fn a_small_kv_cache_makes_requests_wait_not_fail() {
    let server = start(&["-np", "4", "--kv-tokens", "256"]);
    let addr = server.addr.clone();
    assert_eq!(metric(&addr, "bonsai_kv_blocks_total"), 5);
    let prompts: Vec<Vec<u32>> = (0..4u32).map(|s| (0..70).map(|i| (i * 29 + s * 13) % 250 + 1).collect()).collect();
    let steps = 20;
    let extra = r#", "ignore_eos": true"#;
    let alone: Vec<serde_json::Value> = prompts.iter().map(|p| support::completion(&addr, p, steps, r#", "logprobs": 2, "ignore_eos": true"#)).collect();
    let together: Vec<serde_json::Value> = std::thread::scope(|scope| {
        let handles: Vec<_> = prompts.iter().map(|p| scope.spawn(|| support::completion(&addr, p, steps, extra))).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for reply in &together {
        assert_eq!(reply["usage"]["completion_tokens"], steps, "{reply}");
    }
    support::assert_greedy_equal_or_near_tie(&alone, &together, steps, CPU_NEAR_TIE);
    let long: Vec<u32> = (0..300).map(|i| i % 250 + 1).collect();
    let body = serde_json::json!({"model": MODEL, "prompt": long, "max_tokens": 1}).to_string();
    let (status, body) = post(&addr, "/v1/completions", &body);
    assert_eq!(status, 400, "{body}");
    assert_eq!(error_of(&body)["code"], "context_length_exceeded", "{body}");
    assert!(metric(&addr, "bonsai_kv_blocks_in_use") <= 5);
}

/// A shared prompt prefix is copied from another sequence's cache instead of recomputed: while one
/// stream holds sequence 0 with prompt P + a, a request P + b lands on the empty sequence 1, takes
/// P's cache rows from sequence 0 (`usage.prompt_tokens_details.cached_tokens`, the copied-tokens
/// counter), and generates the tokens it generates alone on a fresh server.
#[test]
fn a_shared_prefix_is_copied_from_a_running_stream() {
    let server = start(&["-np", "2"]);
    let addr = server.addr.clone();
    let shared: Vec<u32> = (0..40u32).map(|i| (i * 37) % 250 + 1).collect();
    let (with_a, with_b) = ([shared.clone(), vec![7, 8]].concat(), [shared.clone(), vec![9, 10, 11]].concat());
    let holder = support::hold_sequence(&addr, &with_a);
    let steps = 6;
    let got = support::completion(&addr, &with_b, steps, r#", "ignore_eos": true"#);
    assert_eq!(got["usage"]["prompt_tokens_details"]["cached_tokens"], shared.len(), "{got}");
    assert_eq!(metric(&addr, "bonsai_prompt_tokens_copied_total"), shared.len() as u64);
    drop(holder);
    let fresh = start(&["-np", "1"]);
    let alone = support::completion(&fresh.addr, &with_b, steps, r#", "logprobs": 2, "ignore_eos": true"#);
    assert_eq!(alone["usage"]["prompt_tokens_details"]["cached_tokens"], 0, "{alone}");
    support::assert_greedy_equal_or_near_tie(&[alone], &[got], steps, CPU_NEAR_TIE);
}

/// Sampled requests (temperature 0.8 and the server's top-k 40, top-p 0.95, min-p 0.05: settings
/// the backend sampler takes) pick on the backend with each sequence's own generator: with a
/// fixed seed, three concurrent streams each give exactly the tokens the request gives alone, a
/// seeded request gives them again on another run, and none of those tokens came to the host.
/// A mixed batch (greedy, sampled, and sampled with logprobs, which picks on the host) completes
/// with each stream as it is alone: the logprobs stream's host draws continue the same seeded
/// stream of draws, so it gives the sampled stream's tokens where the prompt and seed match.
///
/// Exact equality across batch compositions holds unless a draw lands within the rounding by
/// which the batch's panel GEMM and the lone row's GEMV differ (a few 1e-5 on these logits, see
/// CPU_NEAR_TIE) of a boundary of the cumulative weights: a chance of ~1e-4 per token, fixed by
/// the seeds below.
#[test]
fn sampled_streams_pick_on_the_backend_and_give_each_request_alone() {
    let server = start(&["-np", "3"]);
    let prompts: Vec<Vec<u32>> = (0..3u32).map(|s| (0..14 + 4 * s).map(|i| (i * 37 + s * 11) % 250 + 1).collect()).collect();
    let steps = 10;
    let alone: Vec<String> = prompts.iter().enumerate().map(|(s, p)| support::text_of(&support::sampled_completion(&server.addr, p, steps, 40 + s as u64, ""))).collect();
    assert_eq!(metric(&server.addr, "bonsai_host_picked_tokens_total"), 0, "sampled picks went to the host");
    let again = support::text_of(&support::sampled_completion(&server.addr, &prompts[1], steps, 41, ""));
    assert_eq!(again, alone[1], "a seeded request reproduces");
    let reseeded = support::text_of(&support::sampled_completion(&server.addr, &prompts[1], steps, 7, ""));
    assert_ne!(reseeded, alone[1], "another seed draws other tokens (else the test shows nothing about seeds)");
    let together: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = prompts
            .iter()
            .enumerate()
            .map(|(s, p)| {
                let addr = server.addr.as_str();
                scope.spawn(move || support::text_of(&support::sampled_completion(addr, p, steps, 40 + s as u64, "")))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(together, alone, "concurrent sampled streams");
    assert_eq!(metric(&server.addr, "bonsai_host_picked_tokens_total"), 0, "batched sampled picks went to the host");

    // Greedy next to sampled: the backend picks both, the greedy one (in a slot whose last request
    // sampled) by the argmax.
    let greedy_alone = support::text_of(&support::completion(&server.addr, &prompts[0], steps, r#", "ignore_eos": true"#));
    let side_by_side: Vec<String> = std::thread::scope(|scope| {
        let addr = server.addr.as_str();
        let (p0, p1) = (&prompts[0], &prompts[1]);
        let handles = [
            scope.spawn(move || support::text_of(&support::completion(addr, p0, steps, r#", "ignore_eos": true"#))),
            scope.spawn(move || support::text_of(&support::sampled_completion(addr, p1, steps, 41, ""))),
        ];
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(side_by_side, [greedy_alone.clone(), alone[1].clone()], "greedy and sampled streams side by side");
    assert_eq!(metric(&server.addr, "bonsai_host_picked_tokens_total"), 0, "greedy and sampled picks went to the host");

    // Mixed: stream 0 greedy, stream 1 sampled, stream 2 sampled with logprobs (the host picks
    // for the whole batch while it runs).
    let logprobs_alone = support::sampled_completion(&server.addr, &prompts[2], steps, 42, r#", "logprobs": 1"#);
    assert_eq!(support::text_of(&logprobs_alone), alone[2], "the host's draws equal the backend's for one seed");
    let mixed: Vec<serde_json::Value> = std::thread::scope(|scope| {
        let addr = server.addr.as_str();
        let (p0, p1, p2) = (&prompts[0], &prompts[1], &prompts[2]);
        let handles = [
            scope.spawn(move || support::completion(addr, p0, steps, r#", "ignore_eos": true"#)),
            scope.spawn(move || support::sampled_completion(addr, p1, steps, 41, "")),
            scope.spawn(move || support::sampled_completion(addr, p2, steps, 42, r#", "logprobs": 1"#)),
        ];
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(support::text_of(&mixed[0]), greedy_alone, "greedy stream in the mixed batch");
    assert_eq!(support::text_of(&mixed[1]), alone[1], "sampled stream in the mixed batch");
    assert_eq!(support::text_of(&mixed[2]), alone[2], "logprobs stream in the mixed batch");
    assert_eq!(mixed[2]["choices"][0]["logprobs"]["tokens"].as_array().map(Vec::len), Some(steps), "{}", mixed[2]);
    assert!(metric(&server.addr, "bonsai_host_picked_tokens_total") >= steps as u64, "the logprobs stream picks on the host");
}

/// A chat template whose generation prompt opens a `<think>` block (as Qwen3.5's does): the
/// reply is reasoning until `</think>`, so it goes to `reasoning_content` (non-streaming and
/// streaming alike) unless the request asks for `reasoning_format: none`.
#[test]
fn a_reply_inside_an_opened_think_block_is_reasoning_content() {
    let template = "{%- for m in messages %}{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{%- endfor %}\
                    {%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n<think>\\n' }}{%- endif %}";
    let server = start_with_template("thinking", template);
    let greedy = r#", "max_tokens": 12, "temperature": 0"#;
    let message = |extra: &str| {
        let (status, body) = post(&server.addr, "/v1/chat/completions", &chat_body("hello", &format!("{greedy}{extra}")));
        assert_eq!(status, 200, "{body}");
        serde_json::from_str::<serde_json::Value>(&body).unwrap()["choices"][0]["message"].clone()
    };
    let split = message("");
    let reasoning = split["reasoning_content"].as_str().unwrap_or_else(|| panic!("{split}")).to_string();
    assert!(!reasoning.is_empty());
    assert_eq!(split["content"], "", "{split}");
    let raw = message(r#", "reasoning_format": "none""#);
    assert!(raw.get("reasoning_content").is_none(), "{raw}");
    assert_eq!(raw["content"].as_str().unwrap().trim(), reasoning);

    let (status, body) = post(&server.addr, "/v1/chat/completions", &chat_body("hello", &format!(r#"{greedy}, "stream": true"#)));
    assert_eq!(status, 200, "{body}");
    let deltas: Vec<serde_json::Value> = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str::<serde_json::Value>(d).unwrap()["choices"][0]["delta"].clone())
        .collect();
    let joined = |field: &str| deltas.iter().filter_map(|d| d[field].as_str()).collect::<String>();
    assert_eq!((joined("reasoning_content"), joined("content")), (reasoning, String::new()));
}

/// A request's `tools` reach the chat template (`tool_choice: none` keeps them out), and a reply
/// that makes no call comes back as text with its usual finish reason.
#[test]
fn tools_reach_the_template_and_a_reply_without_calls_is_text() {
    let template = "{%- if tools %}{{- '<|im_start|>system\\n' }}{%- for t in tools %}{{- t | tojson }}{%- endfor %}{{- '<|im_end|>\\n' }}{%- endif %}\
                    {%- for m in messages %}{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{%- endfor %}\
                    {%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";
    let server = start_with_template("tools", template);
    let tools = r#", "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]"#;
    let reply = |extra: &str| {
        let (status, body) = post(&server.addr, "/v1/chat/completions", &chat_body("hello", &format!(r#", "max_tokens": 6, "temperature": 0{extra}"#)));
        assert_eq!(status, 200, "{body}");
        serde_json::from_str::<serde_json::Value>(&body).unwrap()
    };
    let plain = reply("");
    let with_tools = reply(tools);
    let declined = reply(&format!(r#"{tools}, "tool_choice": "none""#));
    let prompt = |r: &serde_json::Value| r["usage"]["prompt_tokens"].as_u64().unwrap();
    assert!(prompt(&with_tools) > prompt(&plain) + 20, "{with_tools}");
    assert_eq!(prompt(&declined), prompt(&plain));
    for r in [&with_tools, &declined] {
        assert_eq!(r["choices"][0]["finish_reason"], "length", "{r}");
        assert!(r["choices"][0]["message"]["content"].is_string() && r["choices"][0]["message"].get("tool_calls").is_none(), "{r}");
    }
    let (status, body) = post(&server.addr, "/v1/chat/completions", &chat_body("hello", &format!(r#"{tools}, "tool_choice": "required""#)));
    assert_eq!((status, error_of(&body)["param"].as_str()), (400, Some("tool_choice")));
}

/// `logit_bias`: +100 on one token makes it every pick (the demo vocabulary's id 65 is the byte
/// "A"), on the host; an id outside the vocabulary is a 400 naming the field.
#[test]
fn logit_bias_moves_the_picks() {
    let server = start(&["-np", "2"]);
    let body = |bias: &str| format!(r#"{{"model": "{MODEL}", "prompt": "Once", "max_tokens": 4, "temperature": 0, "logit_bias": {bias}}}"#);
    let (status, reply) = post(&server.addr, "/v1/completions", &body(r#"{"65": 100}"#));
    assert_eq!(status, 200, "{reply}");
    let v: serde_json::Value = serde_json::from_str(&reply).unwrap();
    assert_eq!(v["choices"][0]["text"], "AAAA", "{reply}");
    let (status, reply) = post(&server.addr, "/v1/completions", &body(r#"{"999999": 1}"#));
    assert_eq!((status, error_of(&reply)["param"].as_str()), (400, Some("logit_bias")));
}

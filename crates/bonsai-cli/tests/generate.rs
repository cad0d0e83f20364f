//! Runs the built `bonsai` binary: generate / chat / perplexity on the built-in default model, and
//! one-line errors with exit code 1 on bad input.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use bonsai_gguf::{keys, GgufFile, GgufWriter, MetaValue, Qwen3Config};

static NEXT_DIR: AtomicUsize = AtomicUsize::new(0);

/// A fresh scratch directory for this test (removed by nobody; it lives under the temp dir).
fn scratch() -> PathBuf {
    let n = NEXT_DIR.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("bonsai-cli-test-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn bonsai(cache: &PathBuf, args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_bonsai"))
        .args(args)
        .env("BONSAI_CACHE_DIR", cache)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stdin.take().unwrap();
    pipe.write_all(stdin.unwrap_or("").as_bytes()).unwrap();
    drop(pipe);
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Exit 1 and exactly one stderr line, "error: ..." containing `needle`.
fn assert_one_line_error(out: &Output, needle: &str) {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(lines.len(), 1, "stderr: {err}");
    assert!(lines[0].contains(needle), "expected '{needle}' in: {err}");
}

/// The built-in default model's vocabulary size, read from the file it embeds.
fn default_vocab() -> usize {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/bonsai-tiny-stories-q1_0.gguf");
    Qwen3Config::from_gguf(&GgufFile::open(&path).unwrap()).unwrap().vocab
}

#[test]
fn generate_on_the_default_model_streams_text_and_reports_speed() {
    let cache = scratch();
    let args = ["generate", "-p", "Once upon a time", "-n", "12", "--temp", "0.8", "--seed", "7"];
    let out = bonsai(&cache, &args, None);
    let err = text(&out.stderr);
    assert!(out.status.success(), "stderr: {err}");
    assert!(err.contains("using the built-in default model"), "{err}");
    assert!(err.contains("backend: cpu ("), "{err}");
    // "Once", " upon", " a", " time": one token per word in the story vocabulary.
    assert!(err.contains("prefill: 4 tokens") && err.contains("tok/s"), "{err}");
    // Same seed, same text (the cached file is reused the second time).
    let again = bonsai(&cache, &args, None);
    assert_eq!(text(&out.stdout), text(&again.stdout));
    // --chat goes through the file's template; greedy default.
    let chat = bonsai(&cache, &["generate", "-p", "hi", "-n", "4", "--chat", "-v"], None);
    assert!(chat.status.success(), "{}", text(&chat.stderr));
}

#[test]
fn dump_logits_writes_one_vocab_row_per_step() {
    let cache = scratch();
    let dump = cache.join("logits.f32");
    let out = bonsai(&cache, &["generate", "-p", "abc", "-n", "3", "--dump-logits", dump.to_str().unwrap()], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let bytes = std::fs::read(&dump).unwrap();
    let vocab = default_vocab();
    let steps = bytes.len() / (vocab * 4);
    assert_eq!(bytes.len() % (vocab * 4), 0);
    assert!((1..=3).contains(&steps), "{steps} steps");
    let first: Vec<f32> = bytes[..vocab * 4].chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    assert!(first.iter().all(|v| v.is_finite()) && first.iter().any(|&v| v != first[0]));
}

#[test]
fn perplexity_scores_a_file_and_dumps_every_position() {
    let cache = scratch();
    let file = cache.join("text.txt");
    let story = "Once upon a time, there was a little fox named Pip. Pip had a red ball that he loved very much. One day, Pip took his ball to the park.";
    std::fs::write(&file, story).unwrap();
    let dump = cache.join("ppl.f32");
    let out = bonsai(
        &cache,
        &["perplexity", "-f", file.to_str().unwrap(), "--ctx", "16", "--dump-logits", dump.to_str().unwrap()],
        None,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with("perplexity: "), "{stdout}");
    // 35 tokens in windows of 16: 16 + 16 + 3 positions, 15 + 15 + 2 predictions.
    assert!(stdout.contains("over 32 predicted tokens"), "{stdout}");
    assert_eq!(std::fs::metadata(&dump).unwrap().len(), (35 * default_vocab() * 4) as u64);
}

#[test]
fn chat_repl_runs_turns_resets_and_exits_on_eof() {
    let cache = scratch();
    let out = bonsai(&cache, &["chat", "-n", "6"], Some("hello\nhow are you\n/reset\nhi again\n"));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert_eq!(stdout.matches("> ").count(), 5, "{stdout}");
    assert!(text(&out.stderr).contains("conversation cleared"));
}

#[test]
fn bad_input_fails_with_one_line() {
    let cache = scratch();
    let missing = cache.join("nope.gguf");
    assert_one_line_error(&bonsai(&cache, &["generate", "-m", missing.to_str().unwrap(), "-p", "x"], None), "nope.gguf");

    let not_gguf = cache.join("notes.txt");
    std::fs::write(&not_gguf, "just some text, definitely not a model").unwrap();
    assert_one_line_error(&bonsai(&cache, &["generate", "-m", not_gguf.to_str().unwrap(), "-p", "x"], None), "not a GGUF");

    let llama = cache.join("llama.gguf");
    let mut w = GgufWriter::new();
    w.add_metadata(keys::GENERAL_ARCHITECTURE, MetaValue::String("llama".into()));
    w.write_file(&llama).unwrap();
    assert_one_line_error(
        &bonsai(&cache, &["generate", "-m", llama.to_str().unwrap(), "-p", "x"], None),
        "unsupported architecture",
    );

    let long_prompt = "y".repeat(40);
    assert_one_line_error(&bonsai(&cache, &["generate", "--ctx", "16", "-p", &long_prompt], None), "context full");
    assert_one_line_error(&bonsai(&cache, &["generate", "--temp=-1", "-p", "x"], None), "temperature");
}

/// The default model with recommended sampling (`general.sampling.*`) and a chat template that
/// shows `reasoning_effort`: the file's settings apply where no flag is given, and the effort
/// reaches the template.
#[test]
fn the_files_sampling_defaults_and_the_reasoning_effort_apply() {
    let cache = scratch();
    let default = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/bonsai-tiny-stories-q1_0.gguf");
    let mut w = GgufWriter::from_file(&GgufFile::open(&default).unwrap()).unwrap();
    w.add_metadata(keys::sampling::TEMP, MetaValue::F32(0.5));
    w.add_metadata(keys::sampling::TOP_K, MetaValue::I32(7));
    let template = "{{ reasoning_effort if reasoning_effort is defined else '' }}{{ messages[0].content }}";
    w.add_metadata(keys::TOKENIZER_CHAT_TEMPLATE, MetaValue::String(template.into()));
    let model = cache.join("recommended.gguf");
    w.write_file(&model).unwrap();
    let m = model.to_str().unwrap();

    let info = bonsai(&cache, &["info", m], None);
    assert!(text(&info.stdout).contains("sampling:      temp 0.5, top-k 7"), "{}", text(&info.stdout));

    let prompt_tokens = |extra: &[&str]| {
        let mut args = vec!["generate", "-m", m, "-p", "Once", "-n", "2", "--chat", "-v", "--temp", "0"];
        args.extend_from_slice(extra);
        let out = bonsai(&cache, &args, None);
        let err = text(&out.stderr);
        assert!(out.status.success(), "{err}");
        assert!(err.contains("sampling: the model file's top-k 7 (flags override)"), "{err}");
        let line = err.lines().find(|l| l.starts_with("prompt: ")).unwrap_or_else(|| panic!("{err}")).to_string();
        line.split_whitespace().nth(1).unwrap().parse::<usize>().unwrap()
    };
    let plain = prompt_tokens(&[]);
    let with_effort = prompt_tokens(&["--reasoning-effort", "a long and careful effort"]);
    assert!(with_effort > plain, "{with_effort} <= {plain}");
    let none = prompt_tokens(&["--reasoning-effort", "none"]);
    assert_eq!(none, plain);
}

//! The built-in default model (models/bonsai-tiny-stories-q1_0.gguf, compiled into the binary):
//! the file is the one recorded in models/bonsai-tiny-stories.expect, the binary uses exactly
//! it when no `-m` is given, its perplexity on its held-out text stays under the recorded bound
//! (the emulated GPU's is checked in emulated_gpu.rs), and it writes stories and answers a chat.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sha2::{Digest, Sha256};

fn repo_file(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(rel)
}

/// `bonsai ARGS` with its own cache directory (the default model is written there).
fn bonsai(test: &str, args: &[&str]) -> Output {
    let cache =
        std::env::temp_dir().join(format!("bonsai-default-model-{test}-{}", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_bonsai"))
        .args(args)
        .env("BONSAI_CACHE_DIR", &cache)
        .output()
        .expect("run bonsai");
    let (stdout, stderr) =
        (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "bonsai {args:?}\nstdout: {stdout}\nstderr: {stderr}");
    out
}

#[test]
fn the_model_file_has_the_recorded_sha256() {
    let bytes = std::fs::read(repo_file("models/bonsai-tiny-stories-q1_0.gguf"))
        .expect("read the default model");
    let sha: String = Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(
        sha,
        support::default_model_expect("sha256"),
        "models/bonsai-tiny-stories-q1_0.gguf changed: run scripts/default-model/install.sh"
    );
}

#[test]
fn without_a_model_the_binary_uses_the_file_and_holds_its_held_out_perplexity() {
    let heldout = repo_file("models/bonsai-tiny-stories.heldout.txt");
    let out =
        bonsai("perplexity", &["perplexity", "--cpu", "-f", heldout.to_str().expect("utf-8 path")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let cached = stderr
        .split("using the built-in default model (")
        .nth(1)
        .and_then(|rest| rest.split("),").next())
        .unwrap_or_else(|| panic!("no default model path in: {stderr}"));
    let embedded = std::fs::read(cached).expect("read the cached default model");
    assert!(
        embedded == std::fs::read(repo_file("models/bonsai-tiny-stories-q1_0.gguf")).unwrap(),
        "the binary embeds another model: rebuild it"
    );

    let stdout = String::from_utf8_lossy(&out.stdout);
    let ppl: f64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("perplexity: ")?.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no perplexity in: {stdout}"));
    let bound: f64 =
        support::default_model_expect("heldout_perplexity_bound").parse().expect("a number");
    assert!(ppl <= bound, "held-out perplexity {ppl} is above the recorded bound {bound}");
    println!("held-out perplexity {ppl} (bound {bound})");
}

/// Greedy continuation of the README's first command: sentences of plain words.
#[test]
fn once_upon_a_time_continues_as_a_story() {
    let out = bonsai("generate", &["generate", "--cpu", "-p", "Once upon a time", "-n", "64"]);
    let story = String::from_utf8_lossy(&out.stdout);
    println!("{story}");
    assert!(story.starts_with(", "), "{story:?}");
    assert!(story.is_ascii() && story.contains(". "), "{story:?}");
    let words: Vec<&str> = story.split_whitespace().collect();
    assert!(words.len() >= 30, "{story:?}");
    let plain = |w: &&str| {
        w.trim_matches(|c: char| c.is_ascii_punctuation()).chars().all(|c| c.is_ascii_alphabetic())
    };
    assert!(words.iter().all(plain), "{story:?}");
}

/// The chat template renders the request, and the answer is about what was asked for.
#[test]
fn a_chat_request_gets_a_story_about_it() {
    let out = bonsai(
        "chat",
        &["generate", "--cpu", "--chat", "-p", "Tell me a story about a fox.", "-n", "48"],
    );
    let answer = String::from_utf8_lossy(&out.stdout);
    println!("{answer}");
    assert!(answer.contains("fox"), "{answer:?}");
}

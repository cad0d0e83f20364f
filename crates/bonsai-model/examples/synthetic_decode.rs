//! CPU decode speed at a real Bonsai geometry with random weights (no file needed).
//!
//! `cargo run --release -p bonsai-model --example synthetic_decode -- [1.7b|8b|demo] [q1|q2] [steps]`

use std::time::Instant;

use bonsai_model::synthetic::{random_host_weights, Geometry, WeightKind};
use bonsai_model::{Backend, CpuBackend, Qwen3};

const PROMPT_TOKENS: usize = 16;
const SEED: u64 = 1;
const CTX: usize = 512;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let geometry = match args.first().map(String::as_str).unwrap_or("1.7b") {
        "8b" => Geometry::bonsai_8b(),
        "demo" => Geometry::demo(),
        _ => Geometry::bonsai_1_7b(),
    };
    let kind = if args.get(1).map(String::as_str) == Some("q2") { WeightKind::Ternary } else { WeightKind::OneBit };
    let steps: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(32);

    let start = Instant::now();
    let host = random_host_weights(&geometry, kind, SEED)?;
    let bytes_per_token = host.decode_bytes_per_token();
    let model = Qwen3::new(CpuBackend, geometry.config(), host, CTX)?;
    println!("{geometry:?} {kind:?}: built in {:.1} s, {:.1} MB weights read per token", start.elapsed().as_secs_f64(), bytes_per_token as f64 / 1e6);
    println!("backend: {}", model.backend().describe());

    let prompt: Vec<u32> = (0..PROMPT_TOKENS as u32).map(|i| i * 7 % geometry.vocab as u32).collect();
    let mut state = model.new_state(PROMPT_TOKENS, false)?;
    let t = Instant::now();
    model.prefill(&mut state, &prompt)?;
    let prefill = t.elapsed().as_secs_f64();

    let t = Instant::now();
    for _ in 0..steps {
        model.argmax_to_next_token(&mut state)?;
        model.forward_decode(&mut state)?;
    }
    let decode = t.elapsed().as_secs_f64();
    let tok_s = steps as f64 / decode;
    println!(
        "prefill {PROMPT_TOKENS} tokens: {:.1} tok/s | decode {steps} tokens: {tok_s:.2} tok/s ({:.1} GB/s of weights)",
        PROMPT_TOKENS as f64 / prefill,
        tok_s * bytes_per_token as f64 / 1e9
    );
    Ok(())
}

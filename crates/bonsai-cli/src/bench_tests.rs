use clap::Parser;

use super::*;
use crate::bench_run::{BenchReport, Rates, TestResult};

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    bench: BenchArgs,
}

fn parse(args: &[&str]) -> Result<BenchArgs, clap::Error> {
    Cli::try_parse_from(std::iter::once("bench").chain(args.iter().copied())).map(|c| c.bench)
}

#[test]
fn defaults_follow_llama_bench() {
    let a = parse(&["--synthetic", "bonsai-8b"]).expect("parses");
    assert_eq!((a.n_prompt, a.n_gen, a.repetitions, a.ctx_depth.clone()), (512, 128, 5, vec![0]));
    assert_eq!(a.source.synthetic, Some(SyntheticModel::Bonsai8b));
    assert!(!a.cpu && !a.json && a.source.model.is_none());
    let plan = a.plan().expect("plan");
    assert_eq!(plan.ctx, 512, "default context: large enough for pp512 and tg128 at depth 0");
}

#[test]
fn every_geometry_name_parses() {
    for (name, want) in [
        ("bonsai-8b", SyntheticModel::Bonsai8b),
        ("bonsai-4b", SyntheticModel::Bonsai4b),
        ("bonsai-1.7b", SyntheticModel::Bonsai1_7b),
        ("ternary-8b", SyntheticModel::Ternary8b),
        ("ternary-1.7b", SyntheticModel::Ternary1_7b),
        ("ternary-8b-g64", SyntheticModel::Ternary8bG64),
        ("tiny", SyntheticModel::Tiny),
        ("tiny-q2", SyntheticModel::TinyQ2),
        ("bonsai2-27b", SyntheticModel::Bonsai2_27b),
        ("qwen35-tiny", SyntheticModel::Qwen35Tiny),
    ] {
        assert_eq!(parse(&["--synthetic", name]).expect(name).source.synthetic, Some(want));
        assert_eq!(want.name(), name);
    }
    let g = SyntheticModel::Bonsai4b.geometry().expect("qwen3");
    assert_eq!((g.n_layers, g.hidden, g.ffn, g.n_q_heads, g.n_kv_heads, g.head_dim, g.vocab), (36, 2560, 9728, 32, 8, 128, 151_669));
    assert!(g.tied_embeddings);
    assert_eq!(SyntheticModel::Ternary8b.kind(), WeightKind::Ternary);
    assert_eq!(SyntheticModel::TinyQ2.kind(), WeightKind::TwoBit);
}

#[test]
fn bonsai2_27b_has_the_published_geometry() {
    // bonsai2.md §3.1-§3.3, §4.1.
    assert!(SyntheticModel::Bonsai2_27b.geometry().is_none());
    let c = SyntheticModel::Bonsai2_27b.qwen35(1).expect("qwen35");
    assert_eq!((c.n_layers, c.hidden, c.ffn, c.n_q_heads, c.n_kv_heads, c.head_dim, c.vocab), (64, 5120, 17_408, 24, 4, 256, 248_320));
    assert_eq!((c.rot_dims, c.rope_sections, c.ssm_head_dim, c.ssm_k_heads, c.ssm_v_heads), (64, [11, 11, 10, 0], 128, 16, 48));
    let full: Vec<usize> = (0..64).filter(|&i| c.layers[i] == bonsai_gguf::LayerKind::FullAttention).collect();
    assert_eq!(full, (0..16).map(|i| 4 * i + 3).collect::<Vec<_>>());
    let h = c.hadamard.expect("fold");
    assert_eq!(h.block, 1024);
    // 1 output + 16·4 attention + 48·3 DeltaNet + 64·3 FFN = 401 folded weights.
    assert_eq!(h.weight_names.len(), 401);
    for width in [5120, 6144, 17_408] {
        assert_eq!(h.sign_vector(width).map(|s| s.len()), Some(width));
    }
}

#[test]
fn depths_ctx_and_flags_parse() {
    let a = parse(&["-m", "x.gguf", "-p", "64", "-n", "32", "-r", "3", "--ctx-depth", "0,1024,4096", "--cpu", "--json"]).expect("parses");
    assert_eq!((a.n_prompt, a.n_gen, a.repetitions), (64, 32, 3));
    assert_eq!(a.ctx_depth, vec![0, 1024, 4096]);
    assert!(a.cpu && a.json);
    // The deepest decode test needs depth + n slots.
    assert_eq!(a.plan().expect("plan").ctx, 4096 + 32);
}

#[test]
fn bad_arguments_are_rejected() {
    assert!(parse(&[]).is_err(), "a model or --synthetic is required");
    assert!(parse(&["-m", "x.gguf", "--synthetic", "tiny"]).is_err(), "file and synthetic conflict");
    assert!(parse(&["--synthetic", "bonsai-70b"]).is_err(), "unknown geometry");
    assert!(parse(&["--synthetic", "tiny", "-r", "0"]).is_err(), "zero repetitions");
    assert!(parse(&["--synthetic", "tiny", "--ctx-depth", "a"]).is_err(), "depth must be a number");
}

#[test]
fn a_test_beyond_ctx_is_a_clear_error() {
    let a = parse(&["--synthetic", "tiny", "-p", "16", "-n", "8", "--ctx-depth", "100", "--ctx", "64"]).expect("parses");
    let err = a.plan().expect_err("depth 100 + 8 does not fit 64").to_string();
    assert!(err.contains("108") && err.contains("--ctx is 64"), "{err}");
    let a = parse(&["--synthetic", "tiny", "-p", "0", "-n", "0"]).expect("parses");
    assert!(a.plan().is_err(), "nothing to measure");
}

fn sample_report() -> BenchReport {
    let rates = Rates { median: 100.0, min: 90.0, max: 110.0 };
    BenchReport {
        model: "tiny (synthetic)".into(),
        backend: "cpu (2 threads, avx2)".into(),
        ctx: 64,
        repetitions: 3,
        weight_bytes_per_token: 1_000_000,
        bandwidth: 1e9,
        bandwidth_method: "copy bandwidth (read + write)".into(),
        memory: Some((5, 10)),
        allocated: Some(4),
        results: vec![
            TestResult { kind: "pp", tokens: 16, depth: 0, batch: None, rates },
            TestResult { kind: "tg", tokens: 8, depth: 32, batch: None, rates },
        ],
    }
}

#[test]
fn report_percent_of_the_bandwidth_limit() {
    let r = sample_report();
    // 1 GB/s over 1 MB per token: 1000 tok/s; 100 tok/s is 10 %.
    assert!((r.bandwidth_limit_tok_per_s() - 1000.0).abs() < 1e-9);
    assert_eq!(r.percent_of_limit(&r.results[0]), None);
    assert!((r.percent_of_limit(&r.results[1]).expect("tg has a percentage") - 10.0).abs() < 1e-9);
    assert_eq!(r.results[1].label(), "tg8 @ d32");
    let table = r.to_table();
    assert!(table.contains("pp16") && table.contains("tg8 @ d32") && table.contains("10.0 %"), "{table}");
}

#[test]
fn json_has_every_field() {
    let v = sample_report().to_json();
    for key in ["model", "backend", "ctx", "repetitions", "weight_bytes_per_token", "bandwidth_bytes_per_s", "bandwidth_method", "bandwidth_limit_tok_per_s", "memory_used_bytes", "memory_total_bytes", "allocated_bytes"] {
        assert!(v.get(key).is_some(), "missing {key}: {v}");
    }
    let rows = v["results"].as_array().expect("results array");
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1]["test"], "tg8 @ d32");
    assert_eq!(rows[1]["depth"], 32);
    assert!(rows[0]["percent_of_bandwidth_limit"].is_null());
    assert_eq!(rows[1]["tok_per_s_min"], 90.0);
}

#[test]
fn rates_take_median_and_spread() {
    let r = Rates::of(vec![5.0, 1.0, 3.0, 4.0]);
    assert_eq!((r.median, r.min, r.max), (3.5, 1.0, 5.0));
}

#[test]
fn a_model_run_from_its_file_is_benchmarked_and_the_file_removed() {
    // tiny-q2 has two-bit weights: written as upstream Q2_0 g64 blocks, read back through the
    // id-42 resolution and the paired-scale transcode, as ternary-8b-g64 is.
    let args = parse(&["--synthetic", "tiny-q2", "-p", "8", "-n", "4", "-r", "1"]).expect("args");
    let plan = args.plan().expect("plan");
    let report = bench_through_file(AnyBackend::Cpu(bonsai_model::CpuBackend), SyntheticModel::TinyQ2, &plan).expect("bench");
    let table = report.to_table();
    assert!(table.contains("pp8") && table.contains("tg4") && table.contains("tiny-q2 (synthetic, from"), "{table}");
    let leftover = std::env::temp_dir().join(format!("bonsai-bench-tiny-q2-{}.gguf", std::process::id()));
    assert!(!leftover.exists(), "the temporary file is removed");
}

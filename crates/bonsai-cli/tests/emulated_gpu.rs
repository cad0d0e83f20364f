//! The real GPU stack (cudarc -> bonsai's launchers -> the CUDA kernel sources) on the CPU
//! emulator of the driver and device (crates/bonsai-kernels/emu/, built by scripts/emu.sh):
//! `kernels info`, `kernels verify --shapes small` and `check` on the random-weight demo model, on the tiny
//! geometry (the fused decode path) and on a tiny model with +2d weights must pass with no GPU, and the built-in default
//! model's perplexity on its held-out text through the emulated GPU prefill must equal the CPU's within 0.1%, both
//! under the bound recorded in models/bonsai-tiny-stories.expect. Any FAIL here is a kernel bug (or an emulator bug): every kernel also passes on the H200.
//! The emulator poses as an H200 (sm_90) unless told otherwise; `verify` and the tiny `check`
//! also run posing as an A100 (BONSAI_EMU_ARCH=80: 108 SMs, 163 KB of shared memory per CTA, no
//! wgmma), so the launchers' choices for other architectures run too.
//!
//! Needs g++ (to build the emulator) and NVRTC (the kernel loader still compiles a real cubin,
//! from which the emulator reads only each kernel's registers and static shared memory). Without g++ the tests print why and pass; without NVRTC likewise,
//! unless BONSAI_REQUIRE_NVRTC=1 (CI), where that is a failure.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use bonsai_kernels::cuda::compile::Nvrtc;

const BIN: &str = env!("CARGO_BIN_EXE_bonsai");
const REQUIRE_NVRTC_ENV: &str = "BONSAI_REQUIRE_NVRTC";
/// Seed of the verify run (any seed must pass; a fixed one keeps failures reproducible).
const VERIFY_SEED: &str = "7";
/// Greedy steps `check` compares.
const CHECK_STEPS: &str = "16";
/// Fiber schedule of the emulated `check` (see emu_sched.cpp): a different interleaving than verify's.
const CHECK_SCHEDULE: &str = "shuffle:7";
/// The architecture the emulator poses as besides its default sm_90 (emu/emu_device.h): the
/// A100, the pre-Hopper path (mma.sync GEMMs, no wgmma) with the f16 GEMM's tiles fitting.
const OTHER_ARCH: &str = "80";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Emulator build, bonsai cache (kernel cubin) and the demo model live under the target dir, so a
/// second run reuses both and the user's own cache is untouched.
fn work_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(name)
}

fn emulated(args: &[&str]) -> Command {
    let mut cmd = Command::new("bash");
    cmd.arg(repo_root().join("scripts/emu.sh"))
        .arg(BIN)
        .args(args)
        .env("BONSAI_EMU_DIR", work_dir("emu"))
        .env("BONSAI_CACHE_DIR", work_dir("emu-cache"))
        .env_remove("BONSAI_EMU_ARCH");
    cmd
}

/// [`emulated`] posing as `sm_<arch>` (the same emulator build; the kernel cache holds one
/// cubin per architecture).
fn emulated_as(arch: &str, args: &[&str]) -> Command {
    let mut cmd = emulated(args);
    cmd.env("BONSAI_EMU_ARCH", arch);
    cmd
}

fn text(out: &Output) -> String {
    format!(
        "status {}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// What the shared setup found: the output of the emulated `kernels info`, or why nothing runs.
enum Setup {
    Ready { info: Output },
    Skipped(String),
}

/// Builds the emulator and loads the kernel library once (the first load compiles the cubin
/// with NVRTC; the later commands read it from the cache instead of compiling concurrently).
fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        if Command::new("g++").arg("--version").output().is_err() {
            return Setup::Skipped("g++ not found: the CPU emulator of the GPU cannot be built".into());
        }
        if !Nvrtc::is_present() {
            let why = "NVRTC (libnvrtc.so.13) not found: the kernel loader cannot produce its cubin";
            assert!(std::env::var(REQUIRE_NVRTC_ENV).as_deref() != Ok("1"), "{why} ({REQUIRE_NVRTC_ENV}=1)");
            return Setup::Skipped(why.into());
        }
        let build = emulated(&[]).arg("--version").output().expect("run scripts/emu.sh");
        assert!(build.status.success(), "building the emulator failed:\n{}", text(&build));
        let info = emulated(&["kernels", "info"]).output().expect("run scripts/emu.sh");
        Setup::Ready { info }
    })
}

/// The setup's `kernels info` output, or None (reason printed) when the tests cannot run here.
fn ready() -> Option<&'static Output> {
    match setup() {
        Setup::Ready { info } => Some(info),
        Setup::Skipped(why) => {
            println!("SKIPPED: {why}");
            None
        }
    }
}

/// [`ready`], then `kernels info` posing as [`OTHER_ARCH`] once: its first load compiles that
/// architecture's cubin (which gives the emulator each kernel's registers and static shared
/// memory), so the later commands read it from the cache instead of compiling concurrently.
fn ready_as_other_arch() -> bool {
    if ready().is_none() {
        return false;
    }
    static INFO: OnceLock<Output> = OnceLock::new();
    let info = INFO.get_or_init(|| {
        emulated_as(OTHER_ARCH, &["kernels", "info"]).output().expect("run scripts/emu.sh")
    });
    let stdout = String::from_utf8_lossy(&info.stdout);
    let posed = format!("bonsai CPU emulator (sm_{OTHER_ARCH}");
    assert!(info.status.success() && stdout.contains(&posed), "{}", text(info));
    true
}

/// The emulator's own execution-model test (shuffles, votes, barriers with exited threads,
/// CTA-private shared memory on several OS threads, deadlock and misuse reports). Needs g++ only.
#[test]
fn emulator_execution_model_selftest_passes() {
    if Command::new("g++").arg("--version").output().is_err() {
        println!("SKIPPED: g++ not found: the CPU emulator of the GPU cannot be built");
        return;
    }
    let out = Command::new("bash")
        .arg(repo_root().join("scripts/emu.sh"))
        .arg("--selftest")
        .env("BONSAI_EMU_DIR", work_dir("emu-selftest"))
        // More OS threads than this machine may have cores: CTAs really interleave.
        .env("BONSAI_EMU_THREADS", "3")
        .output()
        .expect("run scripts/emu.sh --selftest");
    assert!(out.status.success(), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("emu selftest: ok"), "{}", text(&out));
    // The same binary under the other fiber schedules (a racy case there expects each outcome).
    for schedule in ["reverse", "shuffle:7"] {
        let out = Command::new(work_dir("emu-selftest").join("emu_selftest"))
            .env("BONSAI_EMU_SCHEDULE", schedule)
            .env("BONSAI_EMU_THREADS", "3")
            .output()
            .expect("run emu_selftest");
        assert!(out.status.success(), "BONSAI_EMU_SCHEDULE={schedule}:\n{}", text(&out));
    }
}

#[test]
fn kernels_info_loads_the_library_and_runs_the_selftest_emulated() {
    let Some(info) = ready() else { return };
    let stdout = String::from_utf8_lossy(&info.stdout);
    assert!(info.status.success(), "{}", text(info));
    assert!(stdout.contains("bonsai CPU emulator (sm_90"), "{}", text(info));
    assert!(stdout.contains("selftest    bonsai_selftest_fill wrote") && stdout.contains(": ok ("), "{}", text(info));
}

const VERIFY_SMALL: [&str; 6] = ["kernels", "verify", "--shapes", "small", "--seed", VERIFY_SEED];

/// Every row of a `kernels verify` run passed, and there were many.
fn assert_verify_passed(out: &Output) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<&str> = stdout.lines().filter(|l| l.ends_with("PASS") || l.contains("FAIL")).collect();
    let failed: Vec<&&str> = rows.iter().filter(|l| !l.ends_with("PASS")).collect();
    assert!(out.status.success() && failed.is_empty(), "failed rows: {failed:#?}\n{}", text(out));
    assert!(rows.len() >= 50, "only {} verify rows:\n{}", rows.len(), text(out));
    assert!(stdout.contains(&format!("{} checks, 0 failed", rows.len())), "{}", text(out));
}

#[test]
fn every_kernel_passes_verify_on_small_shapes_emulated() {
    if ready().is_none() {
        return;
    }
    assert_verify_passed(&emulated(&VERIFY_SMALL).output().expect("run scripts/emu.sh"));
}

/// Posing as an A100: every kernel the launchers run there (no wgmma rows; the mma.sync f16
/// GEMM and the large-head joint attention on their sm_80 tiles) passes.
#[test]
fn every_kernel_passes_verify_on_small_shapes_emulated_as_an_a100() {
    if !ready_as_other_arch() {
        return;
    }
    let out = emulated_as(OTHER_ARCH, &VERIFY_SMALL).output().expect("run scripts/emu.sh");
    assert_verify_passed(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("wgmma"), "a wgmma row on a device without wgmma:\n{}", text(&out));
}

#[test]
fn check_on_the_demo_model_agrees_with_the_cpu_emulated() {
    if ready().is_none() {
        return;
    }
    let path = demo_model_path();
    let path = path.as_str();
    // Verify runs the default schedule (thread 0 first); this one runs warps in a shuffled order.
    let out = emulated(&["check", "-m", path, "-n", CHECK_STEPS])
        .env("BONSAI_EMU_SCHEDULE", CHECK_SCHEDULE)
        .output()
        .expect("run scripts/emu.sh");
    assert_check_passed_in(&out, CHECK_STEPS, &format!("BONSAI_EMU_SCHEDULE={CHECK_SCHEDULE}:\n"));
}

/// The tiny geometry (head dim 128, Q1) takes the fused one-token path the real models take:
/// every layer's tail in `planes` mode, the first layer's qkv projection with its rope epilogue,
/// and the LM head on the planes the last down projection wrote.
#[test]
fn check_on_the_fused_decode_path_agrees_with_the_cpu_emulated() {
    if ready().is_none() {
        return;
    }
    let out = emulated(&["check", "--synthetic", "tiny", "-n", CHECK_STEPS]).output().expect("run scripts/emu.sh");
    assert_check_passed(&out);
}

/// The fused decode path posing as an A100 (108 SMs: the planes epilogues' one-wave test
/// against another SM count).
#[test]
fn check_on_the_fused_decode_path_agrees_with_the_cpu_emulated_as_an_a100() {
    if !ready_as_other_arch() {
        return;
    }
    let out = emulated_as(OTHER_ARCH, &["check", "--synthetic", "tiny", "-n", CHECK_STEPS])
        .output()
        .expect("run scripts/emu.sh");
    let stdout = assert_check_passed(&out);
    assert!(stdout.contains(&format!("(sm_{OTHER_ARCH}, 108 SMs)")), "not posing as an A100:\n{}", text(&out));
}

/// A model whose Q2 matrices hold +2d weights (code 3) never reaches the binary GEMV (its Q2
/// arithmetic takes ternary codes only): one-token GEMVs run gemv_tc and every layer op by op,
/// and the GPU still agrees with the CPU.
#[test]
fn check_on_a_model_with_plus_two_weights_agrees_with_the_cpu_emulated() {
    if ready().is_none() {
        return;
    }
    let out = emulated(&["check", "--synthetic", "tiny-q2", "-n", CHECK_STEPS]).output().expect("run scripts/emu.sh");
    let stdout = assert_check_passed(&out);
    // Every one of the tiny model's 10 matrices (2 layers x 4, embedding, LM head) has a code 3.
    assert!(stdout.contains("10 Q2 matrices with +2d weights on gemv_tc"), "the backend does not say so:\n{}", text(&out));
}

/// Asserts a `check -n CHECK_STEPS` run passed with greedy decoding identical for every step;
/// returns stdout.
fn assert_check_passed(out: &Output) -> String {
    assert_check_passed_in(out, CHECK_STEPS, "")
}

/// [`assert_check_passed`] for a run of `steps` steps, failures prefixed with `context`.
fn assert_check_passed_in(out: &Output, steps: &str, context: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success() && stdout.contains("check passed"), "{context}{}", text(out));
    assert!(stdout.contains(&format!("greedy: identical for {steps} steps")), "{context}{}", text(out));
    stdout
}

/// The random-weight demo model's file (support::demo_model_file): `check` and the server
/// compare the GPU with the CPU on it, which needs no trained weights.
fn demo_model_path() -> String {
    support::demo_model_file(&work_dir("emu-models")).to_str().expect("utf-8 path").to_string()
}

/// Issue #5: GPU perplexity equals CPU perplexity within 0.1%. The f16 GEMMs round activations
/// to 11 significant bits (relative 2^-11 per element, independent errors averaging out over the
/// scored tokens); measured 4e-5 on this model, 1e-5..6e-5 on the golden checkpoints (H200).
const PERPLEXITY_MAX_RELATIVE_DIFF: f64 = 1e-3;

fn perplexity_of(out: &Output) -> f64 {
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("perplexity: ")?.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no perplexity in the output:\n{}", text(out)))
}

/// The built-in default model on its held-out text (two windows of hundreds of tokens: one
/// forward call of m >= 64 each, so the prefill GEMMs are the f16 ones, on the emulated sm_90 the
/// wgmma GEMM): the GPU agrees with the CPU, and both stay under the recorded bound.
#[test]
fn perplexity_through_the_emulated_gpu_prefill_matches_the_cpu() {
    if ready().is_none() {
        return;
    }
    let path = repo_root().join("models/bonsai-tiny-stories-q1_0.gguf");
    let path = path.to_str().expect("utf-8 path");
    let heldout = repo_root().join("models/bonsai-tiny-stories.heldout.txt");
    let text_arg = heldout.to_str().expect("utf-8 path");
    let gpu = emulated(&["perplexity", "-m", path, "-f", text_arg, "-v"]).output().expect("run scripts/emu.sh");
    assert!(gpu.status.success(), "{}", text(&gpu));
    assert!(String::from_utf8_lossy(&gpu.stderr).contains("backend: cuda"), "not on the (emulated) GPU:\n{}", text(&gpu));
    let cpu = Command::new(BIN)
        .args(["perplexity", "--cpu", "-m", path, "-f", text_arg])
        .env("BONSAI_CACHE_DIR", work_dir("emu-cache"))
        .output()
        .expect("run bonsai perplexity --cpu");
    assert!(cpu.status.success(), "{}", text(&cpu));
    let (g, c) = (perplexity_of(&gpu), perplexity_of(&cpu));
    let relative = (g - c).abs() / c;
    assert!(relative <= PERPLEXITY_MAX_RELATIVE_DIFF, "GPU {g} vs CPU {c}: relative difference {relative:e}");
    let bound = support::default_model_expect("heldout_perplexity_bound").parse::<f64>().expect("a number");
    assert!(g <= bound && c <= bound, "held-out perplexity GPU {g}, CPU {c}: above the recorded bound {bound}");
}

/// The geometries the GPU must run as the CPU does (GQA groups 1, 3, 4, 5, 8; head_dim 64, 128,
/// 256; hidden sizes, FFN widths and vocabularies of no Bonsai model), checked against the CPU
/// posing as an H200 (`arch` None) and as an A100.
fn check_test_geometries(arch: Option<&str>) {
    const GEOMETRIES: [&str; 5] = ["g1-hd64", "g3-hd128", "g4-hd256", "g5-hd128", "g8-hd64"];
    const STEPS: &str = "4";
    for g in GEOMETRIES {
        let args = ["check", "--synthetic", g, "-n", STEPS];
        let out = match arch {
            Some(arch) => emulated_as(arch, &args),
            None => emulated(&args),
        }
        .output()
        .expect("run scripts/emu.sh");
        assert_check_passed_in(&out, STEPS, &format!("{g}:\n"));
    }
}

#[test]
fn every_test_geometry_agrees_with_the_cpu_emulated() {
    if ready().is_none() {
        return;
    }
    check_test_geometries(None);
}

#[test]
fn every_test_geometry_agrees_with_the_cpu_emulated_as_an_a100() {
    if !ready_as_other_arch() {
        return;
    }
    check_test_geometries(Some(OTHER_ARCH));
}

mod support;

/// Where a greedy stream batched on the GPU may part from the CPU running it alone: only at a
/// step whose top two CPU logits are within twice `bonsai check`'s logit bound for this geometry
/// after an f16 prefill (1.4e-2 on the demo model), i.e. a tie within the arithmetic's reach.
const NEAR_TIE: f64 = 2.0 * 1.4e-2;

/// `bonsai serve` on the emulated GPU: three concurrent greedy streams, batched (one prefill call
/// of all prompts, then decode steps of all three, picks on the device), each give the tokens
/// the CPU server gives that request alone; a repeated prompt reuses its cached prefix.
#[test]
fn the_server_batches_streams_on_the_emulated_gpu_as_the_cpu_runs_them_alone() {
    if ready().is_none() {
        return;
    }
    let demo = demo_model_path();
    let gpu = support::start_server(emulated(&["serve", "-m", &demo, "-np", "3", "-a", "bonsai-demo"]));
    let mut cpu_cmd = Command::new(BIN);
    cpu_cmd.args(["serve", "--cpu", "-m", &demo, "-np", "1", "-a", "bonsai-demo"]).env("BONSAI_CACHE_DIR", work_dir("emu-cache"));
    let cpu = support::start_server(cpu_cmd);
    let prompts: Vec<Vec<u32>> = (0..3u32).map(|s| (0..20 + 5 * s).map(|i| (i * 31 + s * 7) % 250 + 1).collect()).collect();
    let steps = 6;
    let alone: Vec<serde_json::Value> = prompts.iter().map(|p| support::completion(&cpu.addr, p, steps, r#", "logprobs": 2, "ignore_eos": true"#)).collect();
    let batched: Vec<serde_json::Value> = std::thread::scope(|scope| {
        let handles: Vec<_> = prompts.iter().map(|p| scope.spawn(|| support::completion(&gpu.addr, p, steps, r#", "ignore_eos": true"#))).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    support::assert_greedy_equal_or_near_tie(&alone, &batched, steps, NEAR_TIE);
    // Stream 1 again, ending on a stop string (its 4th and 5th tokens' text) while the others
    // run on: the host runs a step behind the device, so the step after the stop was already
    // launched for it; its text must end before the stop string, and the others are unchanged.
    let pieces: Vec<&str> = alone[1]["choices"][0]["logprobs"]["tokens"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    let stop = format!("{}{}", pieces[3], pieces[4]);
    let before: String = pieces[..3].concat();
    assert!(!stop.is_empty() && !before.contains(&stop), "pick another stop string: {stop:?} in {before:?}");
    let stop_field = format!(r#", "ignore_eos": true, "stop": [{}]"#, serde_json::Value::String(stop.clone()));
    let gpu_addr = gpu.addr.as_str();
    let mixed: Vec<serde_json::Value> = std::thread::scope(|scope| {
        let handles: Vec<_> = prompts
            .iter()
            .enumerate()
            .map(|(s, p)| {
                let extra = if s == 1 { stop_field.clone() } else { r#", "ignore_eos": true"#.to_string() };
                scope.spawn(move || support::completion(gpu_addr, p, steps, &extra))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    // (Only where the batched stream did not part from the CPU at a near tie before the stop.)
    if batched[1]["choices"][0]["text"].as_str().unwrap().starts_with(&format!("{before}{stop}")) {
        assert_eq!(mixed[1]["choices"][0]["finish_reason"], "stop", "{}", mixed[1]);
        assert_eq!(mixed[1]["choices"][0]["text"], before.as_str(), "{}", mixed[1]);
    } else {
        println!("stream 1 parted from the CPU before its stop string: the stop check did not run");
    }
    for s in [0, 2] {
        assert_eq!(mixed[s]["choices"][0]["text"], batched[s]["choices"][0]["text"], "stream {s}: {}", mixed[s]);
    }
    // The same prompt again: its prefix (all but the last token) comes from the cache.
    let again = support::completion(&gpu.addr, &prompts[0], steps, r#", "ignore_eos": true"#);
    assert_eq!(again["usage"]["prompt_tokens_details"]["cached_tokens"], prompts[0].len() - 1, "{again}");
    assert_eq!(again["choices"][0]["text"], batched[0]["choices"][0]["text"], "{again}");
    // A prefix shared with a running stream is copied from its device cache: Q + b, while a
    // stream holds Q + a, takes Q's rows (cached_tokens) and generates what the CPU generates alone.
    let shared: Vec<u32> = (0..40u32).map(|i| (i * 37) % 250 + 1).collect();
    let (with_a, with_b) = ([shared.clone(), vec![7]].concat(), [shared.clone(), vec![9, 10]].concat());
    let holder = support::hold_sequence(&gpu.addr, &with_a);
    let copied = support::completion(&gpu.addr, &with_b, steps, r#", "ignore_eos": true"#);
    drop(holder);
    assert_eq!(copied["usage"]["prompt_tokens_details"]["cached_tokens"], shared.len(), "{copied}");
    let alone = support::completion(&cpu.addr, &with_b, steps, r#", "logprobs": 2, "ignore_eos": true"#);
    support::assert_greedy_equal_or_near_tie(&[alone], &[copied], steps, NEAR_TIE);
}

/// `bonsai serve` on the emulated GPU with sampled requests (temperature 0.8, the server's top-k
/// 40, top-p 0.95, min-p 0.05): each sequence draws on the device with its own generator
/// (`sample_rows` in the batched step, with the host a step behind), so with fixed seeds three
/// concurrent streams give exactly the tokens each gives alone and none comes to the host, a
/// greedy stream beside a sampled one too; the same request with logprobs (picked on the host from the downloaded logits, the same draws)
/// gives the same tokens. Exact unless a draw lands within the rounding by which the batched and
/// the one-sequence decode paths differ of a cumulative-weight boundary (~1e-4 per token; the
/// seeds are fixed).
#[test]
fn sampled_streams_draw_on_the_emulated_gpu_as_each_alone() {
    if ready().is_none() {
        return;
    }
    let demo = demo_model_path();
    let gpu = support::start_server(emulated(&["serve", "-m", &demo, "-np", "3", "-a", "bonsai-demo"]));
    let host_picked = || support::metric(&gpu.addr, "bonsai_host_picked_tokens_total");
    let prompts: Vec<Vec<u32>> = (0..3u32).map(|s| (0..12 + 5 * s).map(|i| (i * 29 + s * 13) % 250 + 1).collect()).collect();
    let steps = 6;
    let alone: Vec<String> = prompts.iter().enumerate().map(|(s, p)| support::text_of(&support::sampled_completion(&gpu.addr, p, steps, 50 + s as u64, ""))).collect();
    assert_eq!(host_picked(), 0, "sampled picks went to the host");
    let together: Vec<String> = std::thread::scope(|scope| {
        let addr = gpu.addr.as_str();
        let handles: Vec<_> =
            prompts.iter().enumerate().map(|(s, p)| scope.spawn(move || support::text_of(&support::sampled_completion(addr, p, steps, 50 + s as u64, "")))).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(together, alone, "concurrent sampled streams on the GPU");
    assert_eq!(host_picked(), 0, "batched sampled picks went to the host");
    // A greedy stream next to a sampled one, in a slot whose last request sampled: the device
    // picks both, the greedy row by the argmax.
    let greedy_alone = support::text_of(&support::completion(&gpu.addr, &prompts[0], steps, r#", "ignore_eos": true"#));
    let side_by_side: Vec<String> = std::thread::scope(|scope| {
        let addr = gpu.addr.as_str();
        let (p0, p2) = (&prompts[0], &prompts[2]);
        let handles = [
            scope.spawn(move || support::text_of(&support::completion(addr, p0, steps, r#", "ignore_eos": true"#))),
            scope.spawn(move || support::text_of(&support::sampled_completion(addr, p2, steps, 52, ""))),
        ];
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(side_by_side, [greedy_alone, alone[2].clone()], "greedy and sampled streams side by side on the GPU");
    assert_eq!(host_picked(), 0, "greedy and sampled picks went to the host");
    let on_host = support::sampled_completion(&gpu.addr, &prompts[1], steps, 51, r#", "logprobs": 1"#);
    assert_eq!(support::text_of(&on_host), alone[1], "host draws from downloaded logits equal the device's");
    assert_eq!(host_picked(), steps as u64);
}

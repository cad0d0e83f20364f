//! `bonsai kernels`: inspect, build and clear the CUDA kernel library and its cache.
//!
//! `info` loads the library the way every GPU command does (embedded SASS, disk cache, nvcc,
//! NVRTC; first hit wins), launches its selftest kernel, and prints which tier served, the cache
//! location, each step's time and the cold-start time. `build` forces a compile for this device
//! and stores it in the cache. `clear` removes cache entries (no GPU needed).

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bonsai_kernels::cuda::{
    cache, embedded, registry, selftest, CompilerChoice, GpuContext, KernelLibrary, LoadOptions,
};

/// Cold-start goal from process start to a loaded library, with embedded SASS or a cache hit.
const COLD_START_TARGET: Duration = Duration::from_millis(300);
/// Linux reports process start in clock ticks of USER_HZ, which the kernel ABI fixes at 100.
const USER_HZ: f64 = 100.0;
const MIB: f64 = 1024.0 * 1024.0;
const GIB: f64 = 1024.0 * MIB;

#[derive(clap::Args)]
pub struct KernelsArgs {
    #[command(subcommand)]
    command: KernelsCommand,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum CompilerArg {
    Auto,
    Nvcc,
    Nvrtc,
}

#[derive(clap::Subcommand)]
enum KernelsCommand {
    /// Load the kernel library, run its selftest, and show device, load tier, cache and timings
    Info,
    /// Compile the kernel library for this device (ignoring embedded code and the cache) and store it in the cache
    Build {
        /// Which compiler to use: nvcc (BONSAI_NVCC or PATH) if present then NVRTC, or only one
        #[arg(long, value_enum, default_value_t = CompilerArg::Auto)]
        compiler: CompilerArg,
    },
    /// Remove every cached kernel build (works without a GPU)
    Clear,
}

pub fn run(args: KernelsArgs) -> anyhow::Result<()> {
    let entered = Instant::now();
    let age_at_entry = process_age();
    match args.command {
        KernelsCommand::Info => info(entered, age_at_entry),
        KernelsCommand::Build { compiler } => build(match compiler {
            CompilerArg::Auto => CompilerChoice::Auto,
            CompilerArg::Nvcc => CompilerChoice::Nvcc,
            CompilerArg::Nvrtc => CompilerChoice::Nvrtc,
        }),
        KernelsCommand::Clear => clear(),
    }
}

fn info(entered: Instant, age_at_entry: Option<Duration>) -> anyhow::Result<()> {
    let gpu = GpuContext::new()?;
    // BONSAI_SKIP_EMBEDDED=1 switches the embedded tier off to exercise the others.
    let library = gpu.load_library(&LoadOptions::from_env())?;
    let since_entry = entered.elapsed();
    print_device(&gpu);
    print_library(&library);
    let test = selftest::run(&library, gpu.stream())?;
    println!(
        "selftest    bonsai_selftest_fill wrote {} elements = {:#010x}: ok ({})",
        test.elements,
        test.value,
        ms(test.duration)
    );
    let verdict = |d: Duration| if d < COLD_START_TARGET { "within" } else { "OVER" };
    match age_at_entry {
        Some(age) => {
            let since_start = age + since_entry;
            println!(
                "cold start  process start -> library loaded: {} ({} the {} target; process start read \
                 from /proc with 10 ms resolution)",
                ms(since_start),
                verdict(since_start),
                ms(COLD_START_TARGET)
            );
        }
        None => println!(
            "cold start  command entry -> library loaded: {} ({} the {} target; process start unknown)",
            ms(since_entry),
            verdict(since_entry),
            ms(COLD_START_TARGET)
        ),
    }
    Ok(())
}

fn build(compiler: CompilerChoice) -> anyhow::Result<()> {
    let gpu = GpuContext::new()?;
    print_device(&gpu);
    let library = gpu.load_library(&LoadOptions::rebuild(compiler))?;
    print_library(&library);
    let report = library.report();
    if !report.cache_written {
        bail!("the library compiled but was not stored in the cache: {}", report.notes.join("; "));
    }
    Ok(())
}

fn clear() -> anyhow::Result<()> {
    let dir = cache::cache_dir()?;
    let removed = cache::KernelCache::new(dir.clone())
        .clear()
        .with_context(|| format!("clearing {}", dir.display()))?;
    println!(
        "removed {} cache file(s), {} bytes ({:.1} MiB), from {}",
        removed.files,
        removed.len_bytes,
        removed.len_bytes as f64 / MIB,
        dir.display()
    );
    Ok(())
}

fn print_device(gpu: &GpuContext) {
    let d = gpu.info();
    println!(
        "device      {}: {} (sm_{}, {} SMs, {:.1} GiB, L2 {:.1} MiB)",
        d.ordinal,
        d.name,
        d.arch,
        d.sm_count,
        d.total_memory_bytes as f64 / GIB,
        d.l2_cache_bytes as f64 / MIB
    );
}

fn print_library(library: &KernelLibrary) {
    let r = library.report();
    println!(
        "served by   {} (sm_{} code for this sm_{} device, {})",
        r.tier, r.code_arch, r.device_arch, r.compiler
    );
    let entry_count = registry::entry_points().count();
    println!(
        "library     {} source file(s), {entry_count} entry point(s), cubin {} bytes, source sha256 {}",
        registry::SOURCES.len(),
        r.cubin_len_bytes,
        r.source_sha256
    );
    let archs: Vec<String> = embedded::archs().iter().map(|a| format!("sm_{a}")).collect();
    if archs.is_empty() {
        println!("embedded    none (built without a CUDA compiler)");
    } else {
        println!("embedded    {} by {}", archs.join(" "), embedded::compiler());
    }
    match &r.cache_dir {
        Some(dir) => println!("cache       {}", dir.display()),
        None => println!("cache       unavailable"),
    }
    if let Some(entry) = &r.cache_entry {
        let how = if r.cache_written { "written" } else { "read" };
        println!("cache entry {} ({how})", entry.display());
    }
    let steps: Vec<String> =
        r.steps.iter().map(|s| format!("{} {}", s.name, ms(s.duration))).collect();
    println!("steps       {}", steps.join(", "));
    for note in &r.notes {
        println!("note        {note}");
    }
    if !r.compiler_log.is_empty() {
        println!("compiler log:\n{}", r.compiler_log);
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

/// Time since this process started, from /proc (Linux); None elsewhere or if unreadable.
fn process_age() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name start at field 3; starttime is field 22.
    let after_name = &stat[stat.rfind(')')? + 1..];
    let start_ticks: f64 = after_name.split_whitespace().nth(22 - 3)?.parse().ok()?;
    let uptime = std::fs::read_to_string("/proc/uptime").ok()?;
    let uptime_s: f64 = uptime.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_secs_f64((uptime_s - start_ticks / USER_HZ).max(0.0)))
}

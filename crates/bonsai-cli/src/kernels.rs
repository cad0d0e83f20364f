//! `bonsai kernels`: inspect, build and clear the CUDA kernel library and its cache.
//!
//! `info` loads the library the way every GPU command does (embedded SASS, disk cache, nvcc,
//! NVRTC; first hit wins), launches its selftest kernel, and prints which tier served, the cache
//! location, each step's time and the cold-start time. `build` forces a compile for this device
//! and stores it in the cache. `clear` removes cache entries (no GPU needed).

#[path = "image_compare.rs"]
mod image_compare;

use bonsai_kernels::Config;
use std::io::Write;
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
    /// Check every CUDA kernel against its CPU reference on seeded random inputs (exit 1 on any FAIL)
    Verify {
        /// Also time every kernel against the measured copy bandwidth
        #[arg(long)]
        bench: bool,
        /// Only time the kernels (no correctness checks)
        #[arg(long)]
        bench_only: bool,
        /// Every model shape, or only the small and odd ones
        #[arg(long, value_enum, default_value_t = ShapesArg::All)]
        shapes: ShapesArg,
        /// Seed of the random inputs (default: from the clock; printed either way)
        #[arg(long)]
        seed: Option<u64>,
        /// Run only these check / bench groups, comma-separated (e.g. matmul,planes_out)
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
    },
    /// Run the Bonsai-Image ops at the real shapes and dump inputs, outputs and timings for scripts/reference/image_torch.py
    ImageCompare(image_compare::ImageCompareArgs),
    /// Print the library's combined CUDA source, or its entry points (input of scripts/emu.sh)
    #[command(hide = true)]
    Source {
        /// Print the entry-point names, one per line, instead of the source
        #[arg(long)]
        entry_points: bool,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ShapesArg {
    All,
    Small,
}

pub fn run(args: KernelsArgs, config: &Config) -> anyhow::Result<()> {
    let entered = Instant::now();
    let age_at_entry = process_age();
    match args.command {
        KernelsCommand::Info => info(config, entered, age_at_entry),
        KernelsCommand::Build { compiler } => build(
            config,
            match compiler {
                CompilerArg::Auto => CompilerChoice::Auto,
                CompilerArg::Nvcc => CompilerChoice::Nvcc,
                CompilerArg::Nvrtc => CompilerChoice::Nvrtc,
            },
        ),
        KernelsCommand::Clear => clear(config),
        KernelsCommand::Verify { bench, bench_only, shapes, seed, only } => {
            verify(config, bench || bench_only, bench_only, shapes, seed, only)
        }
        KernelsCommand::ImageCompare(args) => image_compare::run_command(args, config),
        KernelsCommand::Source { entry_points } => source(entry_points),
    }
}

fn verify(config: &Config, bench: bool, skip_checks: bool, shapes: ShapesArg, seed: Option<u64>, only: Vec<String>) -> anyhow::Result<()> {
    use bonsai_kernels::verify::{run, ShapeSet, VerifyOptions};
    let shapes = match shapes {
        ShapesArg::All => ShapeSet::All,
        ShapesArg::Small => ShapeSet::Small,
    };
    let report = run(&VerifyOptions { bench, skip_checks, shapes, seed, config: config.clone(), only })?;
    if !report.all_passed() {
        bail!("{} of {} kernel checks failed (rerun with --seed {})", report.failures(), report.checks.len(), report.seed);
    }
    Ok(())
}

/// Prints what the CPU emulator compiles: the exact source every tier compiles, or its entry points.
fn source(entry_points: bool) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    if entry_points {
        for name in registry::entry_points() {
            writeln!(out, "{name}")?;
        }
    } else {
        out.write_all(registry::combined_source().as_bytes())?;
    }
    Ok(())
}

fn info(config: &Config, entered: Instant, age_at_entry: Option<Duration>) -> anyhow::Result<()> {
    let gpu = GpuContext::on_device(config.device)?;
    // embedded=off switches the embedded tier off to exercise the others.
    let library = gpu.load_library(config, &LoadOptions::from_config(config))?;
    let since_entry = entered.elapsed();
    // Written with `?`: a closed stdout is a BrokenPipe error, which main treats as success.
    let mut out = std::io::stdout().lock();
    print_device(&mut out, &gpu)?;
    print_library(&mut out, &library)?;
    let test = selftest::run(&library, gpu.stream())?;
    writeln!(out,
        "selftest    bonsai_selftest_fill wrote {} elements = {:#010x}: ok ({})",
        test.elements,
        test.value,
        ms(test.duration)
    )?;
    let verdict = |d: Duration| if d < COLD_START_TARGET { "within" } else { "OVER" };
    match age_at_entry {
        Some(age) => {
            let since_start = age + since_entry;
            writeln!(out,
                "cold start  process start -> library loaded: {} ({} the {} target; process start read \
                 from /proc with 10 ms resolution)",
                ms(since_start),
                verdict(since_start),
                ms(COLD_START_TARGET)
            )?;
        }
        None => writeln!(out,
            "cold start  command entry -> library loaded: {} ({} the {} target; process start unknown)",
            ms(since_entry),
            verdict(since_entry),
            ms(COLD_START_TARGET)
        )?,
    }
    Ok(())
}

fn build(config: &Config, compiler: CompilerChoice) -> anyhow::Result<()> {
    let gpu = GpuContext::on_device(config.device)?;
    // Not locked: the library load below may print from other threads.
    let mut out = std::io::stdout();
    print_device(&mut out, &gpu)?;
    let library = gpu.load_library(config, &LoadOptions::rebuild(compiler))?;
    print_library(&mut out, &library)?;
    let report = library.report();
    if !report.cache_written {
        bail!("the library compiled but was not stored in the cache: {}", report.notes.join("; "));
    }
    Ok(())
}

fn clear(config: &Config) -> anyhow::Result<()> {
    let dir = cache::kernels_dir(config.cache_dir.as_deref())?;
    let removed = cache::KernelCache::new(dir.clone())
        .clear()
        .with_context(|| format!("clearing {}", dir.display()))?;
    writeln!(
        std::io::stdout().lock(),
        "removed {} cache file(s), {} bytes ({:.1} MiB), from {}",
        removed.files,
        removed.len_bytes,
        removed.len_bytes as f64 / MIB,
        dir.display()
    )?;
    Ok(())
}

fn print_device(out: &mut impl Write, gpu: &GpuContext) -> std::io::Result<()> {
    let d = gpu.info();
    writeln!(out,
        "device      {}: {} (sm_{}, {} SMs, {:.1} GiB, L2 {:.1} MiB)",
        d.ordinal,
        d.name,
        d.arch,
        d.sm_count,
        d.total_memory_bytes as f64 / GIB,
        d.l2_cache_bytes as f64 / MIB
    )?;
    Ok(())
}

fn print_library(out: &mut impl Write, library: &KernelLibrary) -> std::io::Result<()> {
    let r = library.report();
    writeln!(out,
        "served by   {} (sm_{} code for this sm_{} device, {})",
        r.tier, r.code_arch, r.device_arch, r.compiler
    )?;
    let entry_count = registry::entry_points().count();
    writeln!(out,
        "library     {} source file(s), {entry_count} entry point(s), cubin {} bytes, source sha256 {}",
        registry::SOURCES.len(),
        r.cubin_len_bytes,
        r.source_sha256
    )?;
    let archs: Vec<String> = embedded::archs().iter().map(|a| format!("sm_{a}")).collect();
    if archs.is_empty() {
        writeln!(out, "embedded    none (built without a CUDA compiler)")?;
    } else {
        writeln!(out, "embedded    {} by {}", archs.join(" "), embedded::compiler())?;
    }
    match &r.cache_dir {
        Some(dir) => writeln!(out, "cache       {}", dir.display())?,
        None => writeln!(out, "cache       unavailable")?,
    }
    if let Some(entry) = &r.cache_entry {
        let how = if r.cache_written { "written" } else { "read" };
        writeln!(out, "cache entry {} ({how})", entry.display())?;
    }
    let steps: Vec<String> =
        r.steps.iter().map(|s| format!("{} {}", s.name, ms(s.duration))).collect();
    writeln!(out, "steps       {}", steps.join(", "))?;
    for note in &r.notes {
        writeln!(out, "note        {note}")?;
    }
    if !r.compiler_log.is_empty() {
        writeln!(out, "compiler log:\n{}", r.compiler_log)?;
    }
    Ok(())
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

/// Time since this process started, from /proc (Linux); None elsewhere or if unreadable.
fn process_age() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let uptime = std::fs::read_to_string("/proc/uptime").ok()?;
    process_age_from(&stat, &uptime)
}

/// Process age from the texts of /proc/self/stat and /proc/uptime.
fn process_age_from(stat: &str, uptime: &str) -> Option<Duration> {
    // The command name is parenthesised and may contain spaces or ')': split after the last ')'.
    // The fields after it start at field 3 (state); starttime is field 22.
    let after_name = &stat[stat.rfind(')')? + 1..];
    let start_ticks: f64 = after_name.split_whitespace().nth(22 - 3)?.parse().ok()?;
    let uptime_s: f64 = uptime.split_whitespace().next()?.parse().ok()?;
    let age_s = uptime_s - start_ticks / USER_HZ;
    // A start after "now" means the texts disagree; report unknown rather than a made-up age.
    (age_s >= 0.0).then(|| Duration::from_secs_f64(age_s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_age_parses_starttime_after_an_awkward_name() {
        // Fields 3..=21 are filler here; field 22 (starttime) is 123456 ticks = 1234.56 s.
        let filler: Vec<String> = (3..22).map(|f| f.to_string()).collect();
        let stat = format!("4242 (a b) c) {} 123456 999 0\n", filler.join(" "));
        let age = process_age_from(&stat, "1300.06 2000.00\n").expect("parses");
        assert!((age.as_secs_f64() - 65.5).abs() < 1e-6, "{age:?}");
        assert_eq!(process_age_from(&stat, "1000.00 1.0\n"), None, "start after now");
        assert_eq!(process_age_from("4242 (x) S 1 2", "1.0 1.0"), None, "too few fields");
    }

    /// This test process exists, so its live age must read (Linux only).
    #[test]
    fn process_age_is_read_on_linux() {
        if cfg!(target_os = "linux") {
            assert!(process_age().is_some(), "/proc/self/stat or /proc/uptime unreadable");
        }
    }
}

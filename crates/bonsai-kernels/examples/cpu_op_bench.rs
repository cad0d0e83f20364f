//! CPU timing of the quantized matmuls: decode GEMV (M = 1) in GB/s of weight bytes and prefill
//! (M = 8, 64 and 512) in GFLOP/s (2·M·N·K), at every SIMD level this machine runs.
//!
//! `cargo run --release -p bonsai-kernels --example cpu_op_bench`
//! (`RAYON_NUM_THREADS` sets the thread count; an argument `scalar`, `avx2` or `avx512` picks one
//! level.)

use bonsai_kernels::cpu::{available_levels, SimdLevel};
use bonsai_kernels::ops::{matmul_q1, matmul_q2, Store};
use bonsai_kernels::{Q1Matrix, Q2Matrix, GROUP};
use half::f16;
use std::time::{Duration, Instant};

/// Decode shapes (N, K): the 1.7B-class gate|up-like and down-like matrices.
const GEMV_SHAPES: [(usize, usize); 2] = [(6144, 2048), (2048, 6144)];
/// Tokens in the prefill measurements: a speculative verify batch, a short prompt, a pp512 batch.
const PREFILL_MS: [usize; 3] = [8, 64, 512];
/// Each measurement repeats until this much time has passed, then reports the median.
const MIN_MEASURE: Duration = Duration::from_millis(400);

/// Deterministic filler (xorshift) so the bench needs no test utilities.
struct Filler(u64);
impl Filler {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn f32(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    }
}

fn q1(n: usize, k: usize, fill: &mut Filler) -> Q1Matrix {
    let blocks = n * k / GROUP;
    let scales = (0..blocks).map(|_| f16::from_f32(0.01 + fill.f32().abs() * 0.05)).collect();
    let bits = (0..blocks * 4).map(|_| fill.next() as u32).collect();
    Q1Matrix::new(n, k, scales, bits).expect("bench shape")
}

fn q2(n: usize, k: usize, fill: &mut Filler) -> Q2Matrix {
    let blocks = n * k / GROUP;
    let scales = (0..blocks).map(|_| f16::from_f32(0.01 + fill.f32().abs() * 0.05)).collect();
    let codes = (0..blocks * 8).map(|_| fill.next() as u32).collect();
    Q2Matrix::new(n, k, scales, codes).expect("bench shape")
}

/// Process CPU seconds (user + system, all threads) from `/proc/self/stat`, Linux only. On a
/// shared machine wall time includes waiting for a core; CPU time per call does not.
fn process_cpu_seconds() -> Option<f64> {
    /// Kernel clock ticks per second (USER_HZ), 100 on every mainstream Linux build.
    const USER_HZ: f64 = 100.0;
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / USER_HZ)
}

/// (median wall seconds per call, CPU seconds per call summed over threads) of `f`.
fn time(mut f: impl FnMut()) -> (f64, Option<f64>) {
    f();
    let mut samples = Vec::new();
    let cpu0 = process_cpu_seconds();
    let start = Instant::now();
    while start.elapsed() < MIN_MEASURE || samples.len() < 5 {
        let t = Instant::now();
        f();
        samples.push(t.elapsed().as_secs_f64());
    }
    let cpu = match (cpu0, process_cpu_seconds()) {
        (Some(a), Some(b)) => Some((b - a) / samples.len() as f64),
        _ => None,
    };
    samples.sort_by(f64::total_cmp);
    (samples[samples.len() / 2], cpu)
}

/// `iters` rounds of 24 independent AVX-512 FMA chains (the panel GEMM's accumulator count):
/// the f32 FMA throughput the prefill GFLOP/s compare against. Returns a lane sum so that the
/// work is not dead.
///
/// # Safety
/// The CPU must support AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn fma_chains(iters: u64) -> f32 {
    use std::arch::x86_64::*;
    let mut acc = [_mm512_set1_ps(1.0); 24];
    let (a, b) = (_mm512_set1_ps(0.999_999), _mm512_set1_ps(1e-7));
    for _ in 0..iters {
        for c in acc.iter_mut() {
            *c = _mm512_fmadd_ps(*c, a, b);
        }
    }
    let sum = acc.iter().fold(_mm512_setzero_ps(), |s, &c| _mm512_add_ps(s, c));
    _mm512_reduce_add_ps(sum)
}

/// Prints the AVX-512 FMA peak on one thread and on all threads at once, in GFLOP/s of wall
/// time. On a machine whose threads share cores (SMT siblings share the FMA units), the
/// all-thread figure is well below threads x the one-thread figure, and so is any per-thread
/// GEMM figure.
#[cfg(target_arch = "x86_64")]
fn report_fma_peak() {
    use rayon::prelude::*;
    if !is_x86_feature_detected!("avx512f") {
        return;
    }
    const ITERS: u64 = 20_000_000;
    let flop_per_thread = ITERS as f64 * 24.0 * 2.0 * 16.0;
    let run = |threads: usize| {
        let start = Instant::now();
        let sums: Vec<f32> = (0..threads)
            .into_par_iter()
            // SAFETY: AVX-512F was detected above.
            .map(|_| unsafe { fma_chains(std::hint::black_box(ITERS)) })
            .collect();
        std::hint::black_box(sums);
        flop_per_thread * threads as f64 / start.elapsed().as_secs_f64() / 1e9
    };
    let threads = rayon::current_num_threads();
    let (one, all) = (run(1), run(threads));
    println!(
        "AVX-512 FMA peak: 1 thread {one:.1} GFLOP/s; {threads} threads {all:.1} GFLOP/s ({:.1} per thread)",
        all / threads as f64
    );
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut fill = Filler(0x9e37_79b9_7f4a_7c15);
    println!("threads: {}", rayon::current_num_threads());
    #[cfg(target_arch = "x86_64")]
    report_fma_peak();
    let only = std::env::args().nth(1);
    let wanted = |level: SimdLevel| only.as_deref().is_none_or(|name| name == level.name());
    for level in available_levels().into_iter().filter(|&l| wanted(l)) {
        for &(n, k) in &GEMV_SHAPES {
            let w1 = q1(n, k, &mut fill);
            let w2 = q2(n, k, &mut fill);
            for m in std::iter::once(1).chain(PREFILL_MS) {
                let x: Vec<f32> = (0..m * k).map(|_| fill.f32()).collect();
                let mut y = vec![0.0f32; m * n];
                let t1 = time(|| {
                    matmul_q1::cpu_at(level, &w1, &x, m, &mut y, Store::Overwrite).expect("shape")
                });
                let t2 = time(|| {
                    matmul_q2::cpu_at(level, &w2, &x, m, &mut y, Store::Overwrite).expect("shape")
                });
                let report = |name: &str, bytes: usize, (t, cpu): (f64, Option<f64>)| {
                    let flop = 2.0 * (m * n * k) as f64;
                    print!(
                        "{name} {level:?} N={n} K={k} M={m}: wall {:9.1} us {:7.2} GB/s {:7.2} GFLOP/s",
                        t * 1e6,
                        bytes as f64 / t / 1e9,
                        flop / t / 1e9
                    );
                    match cpu {
                        Some(c) => println!(
                            " | per core-second: {:7.2} GB/s {:7.2} GFLOP/s",
                            bytes as f64 / c / 1e9,
                            flop / c / 1e9
                        ),
                        None => println!(),
                    }
                };
                report("matmul_q1", w1.len_bytes(), t1);
                report("matmul_q2", w2.len_bytes(), t2);
            }
        }
    }
    Ok(())
}

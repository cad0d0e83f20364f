//! Shared CPU machinery: run-time SIMD selection, the tiled quantized matmul engine that
//! `matmul_*` and `gate_up_swiglu_*` share, the worker pool they run on, and a writer for
//! disjoint parallel output.
//!
//! The ops of a model forward (GEMV/GEMM, norms, attention, ...) run on the persistent pool of
//! [`pool`] (as many threads as rayon's global pool); the image ops still use rayon. SIMD is
//! chosen once per process with `is_x86_feature_detected!` (AVX-512, else AVX2 + FMA); every SIMD
//! path has a scalar twin, and tests run every level the machine has ([`available_levels`]).

#[cfg(target_arch = "x86_64")]
mod avx512;
pub mod bandwidth;
mod panel_gemm;
#[cfg(target_arch = "x86_64")]
mod q1_lut;
mod q1_tile;
mod q2_tile;
pub mod pool;
pub(crate) mod qgemm;
#[cfg(test)]
mod dispatch_bench;

use std::sync::OnceLock;

/// Instruction-set level a CPU kernel runs at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimdLevel {
    /// Portable Rust, any target.
    Scalar,
    /// x86-64 AVX2 with FMA (256-bit lanes).
    Avx2Fma,
    /// x86-64 AVX-512 F/BW with AVX2, FMA, F16C and BMI2: the Q2 GEMV reads weight bits as lane
    /// masks and the panel GEMM packs and runs 512-bit tiles (`cpu/avx512.rs`); every other kernel
    /// (the Q1 lookup among them) runs its AVX2 copy.
    Avx512,
}

impl SimdLevel {
    /// Whether the level includes AVX2 + FMA (the AVX2 kernels may run).
    pub fn has_avx2(self) -> bool {
        matches!(self, SimdLevel::Avx2Fma | SimdLevel::Avx512)
    }

    /// Short name (`bench` and the backend description print it).
    pub fn name(self) -> &'static str {
        match self {
            SimdLevel::Scalar => "scalar",
            SimdLevel::Avx2Fma => "avx2",
            SimdLevel::Avx512 => "avx512",
        }
    }
}

/// The best level this machine supports, detected once (a fact of the hardware, not a setting;
/// tests run every level through [`available_levels`]).
pub fn simd_level() -> SimdLevel {
    static LEVEL: OnceLock<SimdLevel> = OnceLock::new();
    *LEVEL.get_or_init(detect)
}

/// Every level runnable on this machine (tests compare each against the reference).
pub fn available_levels() -> Vec<SimdLevel> {
    let mut levels = vec![SimdLevel::Scalar];
    let best = detect();
    if best.has_avx2() {
        levels.push(SimdLevel::Avx2Fma);
    }
    if best == SimdLevel::Avx512 {
        levels.push(SimdLevel::Avx512);
    }
    levels
}

fn detect() -> SimdLevel {
    #[cfg(target_arch = "x86_64")]
    {
        let avx2 = is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma");
        let avx512 = is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("f16c")
            && is_x86_feature_detected!("bmi2");
        match (avx2, avx512) {
            (true, true) => return SimdLevel::Avx512,
            (true, false) => return SimdLevel::Avx2Fma,
            _ => {}
        }
    }
    SimdLevel::Scalar
}

/// A mutable f32 buffer that parallel tasks write at provably disjoint indices (each task owns a
/// set of output columns of a row-major matrix, which no slice split can express).
#[derive(Clone, Copy)]
pub(crate) struct DisjointWriter {
    ptr: *mut f32,
    len: usize,
}

// SAFETY: the writer is only a pointer + length; every user guarantees that concurrent tasks
// touch disjoint indices (documented at each call site), so sharing it across threads is sound.
unsafe impl Send for DisjointWriter {}
// SAFETY: as above; no two threads access the same element.
unsafe impl Sync for DisjointWriter {}

impl DisjointWriter {
    pub(crate) fn new(out: &mut [f32]) -> Self {
        Self { ptr: out.as_mut_ptr(), len: out.len() }
    }

    /// Mutable access to element `i`.
    ///
    /// # Safety
    /// No other thread may access element `i` while the returned reference lives, and the buffer
    /// passed to [`DisjointWriter::new`] must outlive it.
    #[inline(always)]
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn slot(&self, i: usize) -> &mut f32 {
        assert!(i < self.len, "DisjointWriter index {i} out of {}", self.len);
        // SAFETY: i is in bounds (checked above); exclusivity is the caller's contract.
        unsafe { &mut *self.ptr.add(i) }
    }

    /// Mutable access to elements `start .. start + len`.
    ///
    /// # Safety
    /// As [`DisjointWriter::slot`], for every element of the range.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn range(&self, start: usize, len: usize) -> &mut [f32] {
        assert!(start <= self.len && len <= self.len - start, "DisjointWriter range {start}+{len} out of {}", self.len);
        // SAFETY: in bounds (checked above); exclusivity is the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(start), len) }
    }
}

/// Lanes the portable kernels are written in: 8 independent f32 accumulators, which LLVM maps
/// onto one AVX2 register in the `simd_variants!` AVX2 copy (and onto SSE pairs elsewhere).
pub(crate) const LANES: usize = 8;

/// Runs `f` on `len` floats of this thread's scratch buffer (contents unspecified: `f` writes
/// before it reads). The buffer grows to the largest `len` a thread has asked for and is kept,
/// so the ops of a decode step allocate nothing once every thread has seen its sizes. A nested
/// call on the same thread gets a buffer of its own.
pub(crate) fn with_scratch<R>(len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
    thread_local! {
        static SCRATCH: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buf) => {
            if buf.len() < len {
                buf.resize(len, 0.0);
            }
            f(&mut buf[..len])
        }
        Err(_) => f(&mut vec![0.0; len]),
    })
}

/// Σ a_i·b_i in f32 over [`LANES`] interleaved accumulators (then a lane sum). Error: a summation
/// tree of height <= len/LANES + LANES + 1, so within γ_len·Σ|a_i·b_i| for len >= 16.
#[inline(always)]
pub(crate) fn dot_lanes(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; LANES];
    let (a_body, a_tail) = a.split_at(a.len() - a.len() % LANES);
    let (b_body, b_tail) = b.split_at(a_body.len());
    for (ca, cb) in a_body.chunks_exact(LANES).zip(b_body.chunks_exact(LANES)) {
        for l in 0..LANES {
            acc[l] += ca[l] * cb[l];
        }
    }
    for (l, (x, y)) in a_tail.iter().zip(b_tail).enumerate() {
        acc[l] += x * y;
    }
    acc.iter().sum()
}

/// Defines `fn $name(level: SimdLevel, args..)` that runs the portable `#[inline(always)]`
/// function `$generic` either as-is or compiled with AVX2 + FMA enabled (LLVM then vectorises
/// its [`LANES`]-wide loops at 256 bits; the AVX-512 level runs that copy too). One source, two
/// instruction sets, chosen at run time.
/// Given a body instead of `= $generic`, the portable function is that body (written once, with
/// its signature), nested in the dispatcher.
macro_rules! simd_variants {
    ($(#[$attr:meta])* $vis:vis fn $name:ident($($arg:ident : $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block) => {
        $(#[$attr])*
        $vis fn $name(level: $crate::cpu::SimdLevel, $($arg: $ty),*) $(-> $ret)? {
            #[inline(always)]
            fn generic($($arg: $ty),*) $(-> $ret)? $body
            $crate::cpu::simd_variants!(@dispatch level, generic, ($($arg: $ty),*) $(-> $ret)?)
        }
    };
    ($vis:vis fn $name:ident($($arg:ident : $ty:ty),* $(,)?) $(-> $ret:ty)? = $generic:path;) => {
        $vis fn $name(level: $crate::cpu::SimdLevel, $($arg: $ty),*) $(-> $ret)? {
            $crate::cpu::simd_variants!(@dispatch level, $generic, ($($arg: $ty),*) $(-> $ret)?)
        }
    };
    (@dispatch $level:ident, $generic:path, ($($arg:ident : $ty:ty),*) $(-> $ret:ty)?) => {{
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2($($arg: $ty),*) $(-> $ret)? {
            $generic($($arg),*)
        }
        match $level {
            #[cfg(target_arch = "x86_64")]
            $crate::cpu::SimdLevel::Avx2Fma | $crate::cpu::SimdLevel::Avx512 => {
                // SAFETY: both levels are only produced by run-time detection of AVX2 + FMA.
                unsafe { avx2($($arg),*) }
            }
            _ => $generic($($arg),*),
        }
    }};
}
pub(crate) use simd_variants;

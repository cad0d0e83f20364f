//! The one list of CUDA sources and their entry points.
//!
//! Every active `.cu` file is listed here once, in the order it is concatenated into the single
//! module (after `prelude.cuh`). `build.rs` reads this same file (via `include!`), so the embedded
//! precompiled code and the run-time build always see identical source text.
//!
//! To add a kernel: put `<op>.cu` in its op folder, add a `KernelSource` row here naming every
//! `extern "C" __global__` entry point it defines. The library resolves every name at load and
//! fails with the missing name otherwise.

/// One `.cu` file of the library.
pub struct KernelSource {
    /// Path relative to the crate's `src/`, for messages and for `build.rs`.
    pub path: &'static str,
    /// The file's text.
    pub text: &'static str,
    /// Every `extern "C"` entry point the file defines.
    pub entry_points: &'static [&'static str],
}

/// The shared header every kernel file relies on (types, warp reductions, f16 helpers).
pub const PRELUDE: KernelSource = KernelSource {
    path: "cuda/prelude.cuh",
    text: include_str!("prelude.cuh"),
    entry_points: &[],
};

/// Every kernel file, in concatenation order.
pub const SOURCES: &[KernelSource] = &[];

// The one list of CUDA sources and their entry points.
//
// Every active `.cu` file is listed here once, in the order it is concatenated into the single
// module (after `prelude.cuh`). `build.rs` reads this same file (via `include!`), so the embedded
// precompiled code and the run-time build always see identical source text.
//
// To add a kernel: put `<op>.cu` in its op folder, add a `KernelSource` row here naming every
// `extern "C" __global__` entry point it defines. The library resolves every name at load and
// fails with the missing name otherwise. (`include_str!` paths are relative to this file.)
//
// Plain `//` comments, not `//!`: `include!` rejects inner doc comments. Nothing here may name
// other crate items, since the file must also compile inside `build.rs`.

/// One `.cu` file of the library.
pub struct KernelSource {
    /// Path relative to the crate's `src/`, for messages and for `build.rs`.
    pub path: &'static str,
    /// The file's text.
    pub text: &'static str,
    /// Every `extern "C"` entry point the file defines.
    pub entry_points: &'static [&'static str],
}

/// Architectures `build.rs` embeds SASS for (`sm_XX` as the number XX). A cubin runs on devices of
/// the same major version and an equal or higher minor one, so these cover Ampere through
/// Blackwell; any other device compiles at run time.
pub const EMBED_ARCHS: &[u32] = &[80, 86, 89, 90, 100, 120];

/// nvcc flags for every offline compile (build.rs and the run-time nvcc tier), before
/// `-arch=sm_XX`. `-lineinfo` costs nothing at run time and lets profilers map SASS to source.
pub const NVCC_FLAGS: &[&str] =
    &["-cubin", "-O3", "-std=c++17", "-lineinfo", "-Werror", "all-warnings"];

/// NVRTC options for every run-time compile, before `--gpu-architecture=sm_XX`.
/// NVRTC ships no CUDA headers; the prelude supplies everything the kernels use.
pub const NVRTC_OPTIONS: &[&str] = &["-default-device", "-std=c++17", "--generate-line-info"];

/// Every file of the library in concatenation order: prelude, machinery, then `SOURCES`.
pub fn all_sources() -> impl Iterator<Item = &'static KernelSource> {
    std::iter::once(&PRELUDE).chain(MACHINERY_SOURCES.iter()).chain(SOURCES.iter())
}

/// The single source text of the library, each file behind a marker line naming it (compiler
/// messages then point at the right file).
pub fn combined_source() -> String {
    let mut text = String::new();
    for src in all_sources() {
        text.push_str("// ---- ");
        text.push_str(src.path);
        text.push_str(" ----\n");
        text.push_str(src.text);
        text.push('\n');
    }
    text
}

/// Every entry point the registry promises, in registry order.
pub fn entry_points() -> impl Iterator<Item = &'static str> {
    all_sources().flat_map(|s| s.entry_points.iter().copied())
}

/// The shared header every kernel file relies on (types, warp reductions, f16 helpers).
pub const PRELUDE: KernelSource = KernelSource {
    path: "cuda/prelude.cuh",
    text: include_str!("prelude.cuh"),
    entry_points: &[],
};

/// The library machinery's own kernels, concatenated right after the prelude. The selftest
/// kernel proves a loaded module runs (`bonsai kernels info` launches it).
pub const MACHINERY_SOURCES: &[KernelSource] = &[KernelSource {
    path: "cuda/selftest.cu",
    text: include_str!("selftest.cu"),
    entry_points: &["bonsai_selftest_fill"],
}];

/// Every kernel file, in concatenation order.
pub const SOURCES: &[KernelSource] = &[];

//! Why the GPU side could not be made ready: one typed error for the context, the kernel library
//! and its cache, each variant a one-line message naming what failed and what to do.

use std::path::PathBuf;

/// Every way the CUDA side can fail before or while loading the kernel library.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    #[error(
        "no CUDA driver found (libcuda.so): install the NVIDIA driver, or run on the CPU backend"
    )]
    NoDriver,
    #[error("no CUDA device {ordinal}: the driver reports {count} device(s)")]
    NoDevice { ordinal: usize, count: usize },
    #[error("NVRTC (libnvrtc.so.13) could not be loaded: install the CUDA 13 runtime compiler or put nvcc on PATH")]
    NoNvrtc,
    #[error("nvcc not found: set BONSAI_NVCC=/path/to/nvcc or put nvcc on PATH")]
    NoNvcc,
    #[error("CUDA driver call failed while {what}: {source}")]
    Driver { what: &'static str, source: cudarc::driver::DriverError },
    #[error("NVRTC call failed while {what}: {source}")]
    Nvrtc { what: &'static str, source: cudarc::nvrtc::result::NvrtcError },
    #[error("kernel compile with {compiler} for sm_{arch} failed:\n{log}")]
    Compile { compiler: String, arch: u32, log: String },
    #[error("could not run the CUDA compiler {}: {source}", program.display())]
    CompilerIo { program: PathBuf, source: std::io::Error },
    #[error("kernel entry point '{name}' is missing from the compiled module")]
    MissingEntryPoint { name: String },
    #[error("cannot locate the kernel cache: set BONSAI_CACHE_DIR, XDG_CACHE_HOME or HOME")]
    NoCacheDir,
    #[error("kernel cache I/O on {}: {source}", path.display())]
    CacheIo { path: PathBuf, source: std::io::Error },
    #[error("kernel selftest failed: {detail}")]
    Selftest { detail: String },
}

impl KernelError {
    /// A `map_err` adapter naming the driver step that failed.
    pub(crate) fn driver(what: &'static str) -> impl FnOnce(cudarc::driver::DriverError) -> Self {
        move |source| KernelError::Driver { what, source }
    }

    /// A `map_err` adapter naming the NVRTC step that failed.
    pub(crate) fn nvrtc(
        what: &'static str,
    ) -> impl FnOnce(cudarc::nvrtc::result::NvrtcError) -> Self {
        move |source| KernelError::Nvrtc { what, source }
    }

    /// A `map_err` adapter naming the cache file an I/O error happened on.
    pub(crate) fn cache_io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> Self + '_ {
        move |source| KernelError::CacheIo { path: path.to_path_buf(), source }
    }
}

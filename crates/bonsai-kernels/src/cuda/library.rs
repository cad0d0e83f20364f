//! The kernel library: every registered source compiled into one module, every entry point
//! resolved by name at load.
//!
//! This first version compiles with NVRTC to PTX on every load; the tiered loader (embedded SASS,
//! disk cache, nvcc, NVRTC cubin) replaces the body of `KernelLibrary::load` and keeps its API.

use std::collections::HashMap;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaFunction, CudaModule};

use super::registry::{PRELUDE, SOURCES};

/// Why the kernel library could not be made ready.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    #[error("no CUDA driver found (libcuda.so could not be loaded): install the NVIDIA driver or run with --cpu")]
    NoDriver,
    #[error("NVRTC (libnvrtc.so) could not be loaded: install the CUDA 13 runtime compiler")]
    NoNvrtc,
    #[error("CUDA driver call failed: {0}")]
    Driver(#[from] cudarc::driver::DriverError),
    #[error("kernel compile failed:\n{log}")]
    Compile { log: String },
    #[error("kernel entry point '{name}' is missing from the compiled module")]
    MissingEntryPoint { name: String },
}

/// The single source text of the library: the prelude, then every registered file in order.
pub fn combined_source() -> String {
    let mut text = String::new();
    for src in std::iter::once(&PRELUDE).chain(SOURCES.iter()) {
        text.push_str(&format!("// ---- {} ----\n", src.path));
        text.push_str(src.text);
        text.push('\n');
    }
    text
}

/// Every entry point the registry promises, in registry order.
pub fn entry_points() -> impl Iterator<Item = &'static str> {
    SOURCES.iter().flat_map(|s| s.entry_points.iter().copied())
}

/// The loaded module and a handle per entry point.
pub struct KernelLibrary {
    context: Arc<CudaContext>,
    _module: Arc<CudaModule>,
    functions: HashMap<&'static str, CudaFunction>,
}

impl KernelLibrary {
    /// Compiles (or fetches) the library for `context`'s device and resolves every entry point.
    pub fn load(context: &Arc<CudaContext>) -> Result<Self, KernelError> {
        // SAFETY: only probes whether the shared library can be opened; no CUDA call is made.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            return Err(KernelError::NoNvrtc);
        }
        let (major, minor) = context.compute_capability()?;
        let opts = cudarc::nvrtc::CompileOptions {
            arch: None,
            options: vec![format!("--gpu-architecture=compute_{major}{minor}"), "-std=c++17".into()],
            ..Default::default()
        };
        let ptx = cudarc::nvrtc::compile_ptx_with_opts(combined_source(), opts)
            .map_err(|e| KernelError::Compile { log: format!("{e:?}") })?;
        let module = context.load_module(ptx)?;
        let mut functions = HashMap::new();
        for name in entry_points() {
            let f = module
                .load_function(name)
                .map_err(|_| KernelError::MissingEntryPoint { name: name.to_string() })?;
            functions.insert(name, f);
        }
        Ok(Self { context: context.clone(), _module: module, functions })
    }

    /// The handle of entry point `name`.
    pub fn function(&self, name: &str) -> Result<&CudaFunction, KernelError> {
        self.functions.get(name).ok_or_else(|| KernelError::MissingEntryPoint { name: name.into() })
    }

    pub fn context(&self) -> &Arc<CudaContext> {
        &self.context
    }
}

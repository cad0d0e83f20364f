//! The kernel library: every registered source compiled into one module, every entry point
//! resolved by name at load.
//!
//! Load order, first hit wins (SPEC §4):
//! 1. `Embedded`: SASS `build.rs` embedded, if built from this binary's source and compatible;
//! 2. `DiskCache`: a verified cubin in the user's cache, keyed by (source, options, arch,
//!    compiler identity) for each compiler this machine has, in tier order;
//! 3. `Nvcc`: nvcc from `$BONSAI_NVCC` or PATH compiles a cubin for the device's exact arch;
//! 4. `Nvrtc`: NVRTC compiles a cubin for the device's exact arch.
//!
//! Tiers 3 and 4 store their result in the cache. Every skipped or failed tier leaves a note in
//! the `LoadReport` (never a silent fallback); only when no tier can serve is it an error.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cudarc::driver::sys::CUresult;
use cudarc::driver::{CudaContext, CudaFunction, CudaModule};

use super::cache::{self, KernelCache};
use super::context::arch_number;
pub use super::error::KernelError;
use super::loader::{load_cubin, timed, Loader};
pub use super::registry::{combined_source, entry_points};
use crate::config::{Config, Trace};

/// Which compilers tiers 2-4 may use (cache entries are keyed by compiler, so this also limits
/// which entries are looked up).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompilerChoice {
    /// nvcc if present, then NVRTC.
    Auto,
    Nvcc,
    Nvrtc,
}

/// What the loader may use; the default allows every tier.
#[derive(Clone, Copy, Debug)]
pub struct LoadOptions {
    /// Consider SASS embedded at build time (tier 1).
    pub use_embedded: bool,
    /// Consider cache entries (tier 2); compiled results are stored either way.
    pub read_cache: bool,
    pub compiler: CompilerChoice,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self { use_embedded: true, read_cache: true, compiler: CompilerChoice::Auto }
    }
}

impl LoadOptions {
    /// Every tier, except the embedded one when the configuration turns it off.
    pub fn from_config(config: &Config) -> Self {
        Self { use_embedded: config.embedded, ..Self::default() }
    }

    /// Force a compile for this device and refresh its cache entry (`bonsai kernels build`).
    pub fn rebuild(compiler: CompilerChoice) -> Self {
        Self { use_embedded: false, read_cache: false, compiler }
    }
}

/// Which tier served the loaded code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadTier {
    Embedded,
    DiskCache,
    Nvcc,
    Nvrtc,
}

impl std::fmt::Display for LoadTier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LoadTier::Embedded => "embedded SASS",
            LoadTier::DiskCache => "disk cache",
            LoadTier::Nvcc => "nvcc compile",
            LoadTier::Nvrtc => "NVRTC compile",
        })
    }
}

/// One timed step of the load.
#[derive(Clone, Debug)]
pub struct LoadStep {
    pub name: &'static str,
    pub duration: Duration,
}

/// How the library came to be loaded.
#[derive(Clone, Debug)]
pub struct LoadReport {
    pub tier: LoadTier,
    /// The device's architecture (`sm_XX` as XX).
    pub device_arch: u32,
    /// The architecture the loaded SASS was built for (an embedded cubin may be an older minor).
    pub code_arch: u32,
    /// Identity of the compiler that produced the loaded code.
    pub compiler: String,
    /// The compiler's messages for a compile done in this load; empty otherwise or when clean.
    pub compiler_log: String,
    pub cache_dir: Option<PathBuf>,
    /// The cache file that served the code or was written with it.
    pub cache_entry: Option<PathBuf>,
    /// Whether this load wrote `cache_entry`.
    pub cache_written: bool,
    /// SHA-256 of the library source this binary carries.
    pub source_sha256: String,
    pub cubin_len_bytes: usize,
    pub steps: Vec<LoadStep>,
    /// Tiers skipped or failed on the way, and why.
    pub notes: Vec<String>,
}

/// The loaded module, a handle per entry point, and how launches from it run.
pub struct KernelLibrary {
    context: Arc<CudaContext>,
    module: Arc<CudaModule>,
    functions: HashMap<&'static str, CudaFunction>,
    report: LoadReport,
    /// Every launch carries programmatic dependent launch (`Config::pdl`).
    pdl: bool,
    /// The decode timeline's level (`Config::trace`) and replays.
    trace: Trace,
    trace_replays: usize,
    /// Launches recorded since `record_launches` (the decode trace names a captured graph's
    /// kernels with them).
    recorded: Mutex<Option<Vec<crate::trace::LaunchRecord>>>,
    /// CTAs per SM by (entry point handle, threads, dynamic shared memory): see `occupancy`.
    occupancy: Mutex<HashMap<(usize, u32, usize), usize>>,
}

impl KernelLibrary {
    /// Loads (embedded, cached or freshly compiled) under `config`, restricted by `options`, and
    /// resolves every entry point.
    pub fn load_with(
        context: &Arc<CudaContext>,
        config: &Config,
        options: &LoadOptions,
    ) -> Result<Self, KernelError> {
        let (major, minor) = context
            .compute_capability()
            .map_err(KernelError::driver("reading the compute capability"))?;
        let arch = arch_number(major, minor);
        // The decode timeline's hooks are compiled in only for it (a source of its own, so the
        // embedded SASS is never used then and the cache keeps both).
        let mut source = String::new();
        if config.trace != Trace::Off {
            source.push_str("#define BONSAI_TRACE 1\n");
        }
        if config.trace == Trace::Ctas {
            source.push_str("#define BONSAI_TRACE_CTA_ENDS 1\n");
        }
        source.push_str(&combined_source());
        let mut steps = Vec::new();
        let mut notes = Vec::new();
        let source_sha256 =
            timed(&mut steps, "source hash", || cache::hex(&cache::sha256(source.as_bytes())));
        let cache = match cache::kernels_dir(config.cache_dir.as_deref()) {
            Ok(dir) => Some(KernelCache::new(dir)),
            Err(e) => {
                notes.push(format!("disk cache unavailable: {e}"));
                None
            }
        };
        let mut loader = Loader {
            context,
            arch,
            source: &source,
            choice: options.compiler,
            nvcc: &config.nvcc,
            steps,
            notes,
            compilers: Vec::new(),
            probed: false,
        };

        let mut loaded = None;
        if options.use_embedded {
            loaded = loader.try_embedded(&source_sha256);
        } else {
            loader.notes.push(
                "embedded SASS: skipped (rebuild asked for, or embedded=off)".into(),
            );
        }
        let mut cache_entry = None;
        if loaded.is_none() {
            match (&cache, options.read_cache) {
                (Some(cache), true) => {
                    if let Some((module, candidate, path)) = loader.try_cache(cache) {
                        cache_entry = Some(path);
                        loaded = Some((module, candidate));
                    }
                }
                (Some(_), false) => {
                    loader.notes.push("disk cache: not read (a rebuild was asked for)".into())
                }
                (None, _) => {}
            }
        }
        let mut compiler_log = String::new();
        let mut cache_written = false;
        let (module, candidate) = match loaded {
            Some(found) => found,
            None => {
                let (candidate, key, log) = loader.compile()?;
                compiler_log = log;
                // Load before storing, so code the driver refuses never reaches the cache.
                let module = timed(&mut loader.steps, "module load", || {
                    load_cubin(context, &candidate.cubin)
                })
                .map_err(KernelError::driver("loading the freshly compiled module"))?;
                if let Some(cache) = &cache {
                    match timed(&mut loader.steps, "cache write", || {
                        cache.write(&key, &candidate.cubin)
                    }) {
                        Ok(path) => {
                            cache_entry = Some(path);
                            cache_written = true;
                        }
                        Err(e) => loader
                            .notes
                            .push(format!("disk cache: could not store the compile: {e}")),
                    }
                }
                (module, candidate)
            }
        };

        let functions = timed(&mut loader.steps, "symbol resolution", || resolve_all(&module))?;
        for note in &loader.notes {
            tracing::info!(target: "bonsai::kernels", "{note}");
        }
        let report = LoadReport {
            tier: candidate.tier,
            device_arch: arch,
            code_arch: candidate.code_arch,
            compiler: candidate.compiler,
            compiler_log,
            cache_dir: cache.map(|c| c.dir().to_path_buf()),
            cache_entry,
            cache_written,
            source_sha256,
            cubin_len_bytes: candidate.cubin.len(),
            steps: loader.steps,
            notes: loader.notes,
        };
        Ok(Self {
            context: context.clone(),
            module,
            functions,
            report,
            pdl: config.pdl,
            trace: config.trace,
            trace_replays: config.trace_replays,
            recorded: Mutex::new(None),
            occupancy: Mutex::new(HashMap::new()),
        })
    }

    /// `ask()`'s answer for entry point `f` of this library at `threads` threads and `smem` bytes
    /// of dynamic shared memory: CTAs one SM holds at once, a property of the compiled entry
    /// point, so asked once per library. A launcher that weighs grids by it (gemv_b1's) would
    /// otherwise call the driver for every candidate on every launch.
    pub fn occupancy<E>(&self, f: &CudaFunction, threads: u32, smem: usize, ask: impl FnOnce() -> Result<usize, E>) -> Result<usize, E> {
        // The module stays loaded while the library lives, so a handle names one entry point.
        let key = (f.cu_function() as usize, threads, smem);
        if let Some(&ctas) = self.occupancy.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return Ok(ctas);
        }
        let ctas = ask()?;
        self.occupancy.lock().unwrap_or_else(|e| e.into_inner()).insert(key, ctas);
        Ok(ctas)
    }

    /// The handle of entry point `name`.
    pub fn function(&self, name: &str) -> Result<&CudaFunction, KernelError> {
        self.functions.get(name).ok_or_else(|| KernelError::MissingEntryPoint { name: name.into() })
    }

    /// Whether launches carry programmatic dependent launch.
    pub fn pdl(&self) -> bool {
        self.pdl
    }

    /// The decode timeline's level.
    pub fn trace(&self) -> Trace {
        self.trace
    }

    /// Decode replays one trace covers.
    pub fn trace_replays(&self) -> usize {
        self.trace_replays
    }

    /// Records every launch from this library until [`Self::take_launches`] (a graph capture).
    pub fn record_launches(&self) {
        *self.recorded.lock().unwrap_or_else(|e| e.into_inner()) = Some(Vec::new());
    }

    /// The launches recorded since [`Self::record_launches`], and recording off.
    pub fn take_launches(&self) -> Vec<crate::trace::LaunchRecord> {
        self.recorded.lock().unwrap_or_else(|e| e.into_inner()).take().unwrap_or_default()
    }

    /// Appends a launch of `func` (an entry point of this library) while recording.
    pub(crate) fn note_launch(&self, func: &CudaFunction, cfg: &cudarc::driver::LaunchConfig) {
        if let Some(list) = self.recorded.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            let handle = func.cu_function();
            let name = self.functions.iter().find(|(_, f)| f.cu_function() == handle).map_or("?", |(name, _)| *name);
            list.push(crate::trace::launch_record(name, cfg));
        }
    }

    pub fn context(&self) -> &Arc<CudaContext> {
        &self.context
    }

    /// The loaded module (its globals: the decode trace buffer, crate::trace).
    pub fn module(&self) -> &Arc<CudaModule> {
        &self.module
    }

    /// How this library was loaded.
    pub fn report(&self) -> &LoadReport {
        &self.report
    }

    pub(crate) fn report_mut(&mut self) -> &mut LoadReport {
        &mut self.report
    }
}

/// Resolves every registered entry point; the first absent one is named in the error.
fn resolve_all(
    module: &Arc<CudaModule>,
) -> Result<HashMap<&'static str, CudaFunction>, KernelError> {
    let mut functions = HashMap::new();
    for name in entry_points() {
        let function = module.load_function(name).map_err(|e| {
            if e.0 == CUresult::CUDA_ERROR_NOT_FOUND {
                KernelError::MissingEntryPoint { name: name.to_string() }
            } else {
                KernelError::Driver { what: "resolving a kernel entry point", source: e }
            }
        })?;
        functions.insert(name, function);
    }
    Ok(functions)
}

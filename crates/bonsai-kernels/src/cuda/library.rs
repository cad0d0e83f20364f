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
use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::sys::CUresult;
use cudarc::driver::{CudaContext, CudaFunction, CudaModule};
use cudarc::nvrtc::Ptx;

use super::cache::{self, CacheKey, CacheRead, KernelCache};
use super::compile::{CompileOutput, Nvcc, Nvrtc};
use super::context::arch_number;
use super::embedded;
pub use super::error::KernelError;
pub use super::registry::{combined_source, entry_points};

/// What the loader may use; the default allows every tier.
#[derive(Clone, Copy, Debug)]
pub struct LoadOptions {
    /// Consider SASS embedded at build time (tier 1).
    pub use_embedded: bool,
    /// Consider cache entries (tier 2); compiled results are stored either way.
    pub read_cache: bool,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self { use_embedded: true, read_cache: true }
    }
}

impl LoadOptions {
    /// Force a compile for this device and refresh its cache entry (`bonsai kernels build`).
    pub fn rebuild() -> Self {
        Self { use_embedded: false, read_cache: false }
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

/// The loaded module and a handle per entry point.
pub struct KernelLibrary {
    context: Arc<CudaContext>,
    _module: Arc<CudaModule>,
    functions: HashMap<&'static str, CudaFunction>,
    report: LoadReport,
}

/// A compiler this machine has, in tier order.
enum Compiler {
    Nvcc(Nvcc),
    Nvrtc(Nvrtc),
}

impl Compiler {
    fn identity(&self) -> String {
        match self {
            Compiler::Nvcc(c) => c.identity(),
            Compiler::Nvrtc(c) => c.identity(),
        }
    }
    fn options(&self, arch: u32) -> Vec<String> {
        match self {
            Compiler::Nvcc(_) => Nvcc::options(arch),
            Compiler::Nvrtc(_) => Nvrtc::options(arch),
        }
    }
    fn compile(&self, source: &str, arch: u32) -> Result<CompileOutput, KernelError> {
        match self {
            Compiler::Nvcc(c) => c.compile(source, arch),
            Compiler::Nvrtc(c) => c.compile(source, arch),
        }
    }
    fn tier(&self) -> LoadTier {
        match self {
            Compiler::Nvcc(_) => LoadTier::Nvcc,
            Compiler::Nvrtc(_) => LoadTier::Nvrtc,
        }
    }
}

/// Code ready to load, and where it came from.
struct Candidate {
    cubin: Vec<u8>,
    tier: LoadTier,
    code_arch: u32,
    compiler: String,
}

/// Runs `f`, appending its duration to `steps` under `name`.
fn timed<T>(steps: &mut Vec<LoadStep>, name: &'static str, f: impl FnOnce() -> T) -> T {
    let started = Instant::now();
    let value = f();
    steps.push(LoadStep { name, duration: started.elapsed() });
    value
}

impl KernelLibrary {
    /// Loads (embedded, cached or freshly compiled) and resolves every entry point.
    pub fn load(context: &Arc<CudaContext>) -> Result<Self, KernelError> {
        Self::load_with(context, &LoadOptions::default())
    }

    /// As `load`, restricted by `options`.
    pub fn load_with(context: &Arc<CudaContext>, options: &LoadOptions) -> Result<Self, KernelError> {
        let (major, minor) =
            context.compute_capability().map_err(KernelError::driver("reading the compute capability"))?;
        let arch = arch_number(major, minor);
        let source = combined_source();
        let mut steps = Vec::new();
        let mut notes = Vec::new();
        let source_sha256 = timed(&mut steps, "source hash", || cache::hex(&cache::sha256(source.as_bytes())));
        let cache = match cache::cache_dir() {
            Ok(dir) => Some(KernelCache::new(dir)),
            Err(e) => {
                notes.push(format!("disk cache unavailable: {e}"));
                None
            }
        };
        let mut loader = Loader { context, arch, source: &source, steps, notes, compilers: Vec::new(), probed: false };

        let mut loaded = None;
        if options.use_embedded {
            loaded = loader.try_embedded(&source_sha256);
        } else {
            loader.notes.push("embedded SASS: skipped (a rebuild was asked for)".into());
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
                (Some(_), false) => loader.notes.push("disk cache: not read (a rebuild was asked for)".into()),
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
                if let Some(cache) = &cache {
                    match timed(&mut loader.steps, "cache write", || cache.write(&key, &candidate.cubin)) {
                        Ok(path) => {
                            cache_entry = Some(path);
                            cache_written = true;
                        }
                        Err(e) => loader.notes.push(format!("disk cache: could not store the compile: {e}")),
                    }
                }
                let module = timed(&mut loader.steps, "module load", || load_cubin(context, &candidate.cubin))
                    .map_err(KernelError::driver("loading the freshly compiled module"))?;
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
        Ok(Self { context: context.clone(), _module: module, functions, report })
    }

    /// The handle of entry point `name`.
    pub fn function(&self, name: &str) -> Result<&CudaFunction, KernelError> {
        self.functions.get(name).ok_or_else(|| KernelError::MissingEntryPoint { name: name.into() })
    }

    pub fn context(&self) -> &Arc<CudaContext> {
        &self.context
    }

    /// How this library was loaded.
    pub fn report(&self) -> &LoadReport {
        &self.report
    }

    pub(crate) fn report_mut(&mut self) -> &mut LoadReport {
        &mut self.report
    }
}

fn load_cubin(context: &Arc<CudaContext>, cubin: &[u8]) -> Result<Arc<CudaModule>, cudarc::driver::DriverError> {
    context.load_module(Ptx::from_binary(cubin.to_vec()))
}

/// Resolves every registered entry point; the first absent one is named in the error.
fn resolve_all(module: &Arc<CudaModule>) -> Result<HashMap<&'static str, CudaFunction>, KernelError> {
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

/// The state of one load while it walks the tiers.
struct Loader<'a> {
    context: &'a Arc<CudaContext>,
    arch: u32,
    source: &'a str,
    steps: Vec<LoadStep>,
    notes: Vec<String>,
    compilers: Vec<Compiler>,
    probed: bool,
}

impl Loader<'_> {
    fn try_embedded(&mut self, source_sha256: &str) -> Option<(Arc<CudaModule>, Candidate)> {
        let picked = timed(&mut self.steps, "embedded lookup", || embedded::select(self.arch, source_sha256));
        let embedded = match picked {
            Ok(embedded) => embedded,
            Err(why) => {
                self.notes.push(format!("embedded SASS: {why}"));
                return None;
            }
        };
        match timed(&mut self.steps, "module load", || load_cubin(self.context, embedded.cubin)) {
            Ok(module) => Some((
                module,
                Candidate {
                    cubin: embedded.cubin.to_vec(),
                    tier: LoadTier::Embedded,
                    code_arch: embedded.arch,
                    compiler: embedded::compiler().to_string(),
                },
            )),
            Err(e) => {
                self.notes.push(format!("embedded SASS for sm_{}: the driver refused it: {e}", embedded.arch));
                None
            }
        }
    }

    /// Opens the compilers this machine has, once, in tier order.
    fn compilers(&mut self) -> &[Compiler] {
        if !self.probed {
            self.probed = true;
            let started = Instant::now();
            match Nvcc::find().map(|program| Nvcc::open(&program)) {
                Some(Ok(nvcc)) => self.compilers.push(Compiler::Nvcc(nvcc)),
                Some(Err(e)) => self.notes.push(format!("nvcc: unusable: {e}")),
                None => self.notes.push("nvcc: not found (BONSAI_NVCC unset or off, none on PATH)".into()),
            }
            match Nvrtc::open() {
                Ok(nvrtc) => self.compilers.push(Compiler::Nvrtc(nvrtc)),
                Err(e) => self.notes.push(format!("NVRTC: {e}")),
            }
            self.steps.push(LoadStep { name: "compiler probe", duration: started.elapsed() });
        }
        &self.compilers
    }

    fn try_cache(&mut self, cache: &KernelCache) -> Option<(Arc<CudaModule>, Candidate, PathBuf)> {
        let keys: Vec<(CacheKey, String)> = {
            let (arch, source) = (self.arch, self.source);
            self.compilers()
                .iter()
                .map(|c| (CacheKey::new(source, &c.options(arch), arch, &c.identity()), c.identity()))
                .collect()
        };
        if keys.is_empty() {
            self.notes.push("disk cache: no compiler to key entries by".into());
        }
        for (key, identity) in keys {
            let path = cache.entry_path(&key);
            match timed(&mut self.steps, "cache read", || cache.read(&key)) {
                Ok(CacheRead::Hit(cubin)) => {
                    match timed(&mut self.steps, "module load", || load_cubin(self.context, &cubin)) {
                        Ok(module) => {
                            let candidate =
                                Candidate { cubin, tier: LoadTier::DiskCache, code_arch: self.arch, compiler: identity };
                            return Some((module, candidate, path));
                        }
                        Err(e) => self.notes.push(format!("disk cache: {} refused by the driver: {e}", path.display())),
                    }
                }
                Ok(CacheRead::Miss) => self.notes.push(format!("disk cache: no entry for {identity}")),
                Ok(CacheRead::Rejected { reason, removed }) => self.notes.push(format!(
                    "disk cache: rejected {} ({reason}){}",
                    path.display(),
                    if removed { ", removed" } else { ", could not remove it" }
                )),
                Err(e) => self.notes.push(format!("disk cache: {e}")),
            }
        }
        None
    }

    /// Compiles with the first compiler that succeeds; returns the code, its cache key and log.
    fn compile(&mut self) -> Result<(Candidate, CacheKey, String), KernelError> {
        let (arch, source) = (self.arch, self.source);
        self.compilers();
        let mut first_error = None;
        let mut compile_steps = Vec::new();
        let mut failures = Vec::new();
        let mut result = None;
        for compiler in &self.compilers {
            match timed(&mut compile_steps, "compile", || compiler.compile(source, arch)) {
                Ok(out) => {
                    let key = CacheKey::new(source, &compiler.options(arch), arch, &compiler.identity());
                    let candidate =
                        Candidate { cubin: out.cubin, tier: compiler.tier(), code_arch: arch, compiler: compiler.identity() };
                    result = Some((candidate, key, out.log));
                    break;
                }
                Err(e) => {
                    failures.push(format!("{}: compile failed, trying the next tier: {e}", compiler.identity()));
                    first_error.get_or_insert(e);
                }
            }
        }
        self.steps.extend(compile_steps);
        for failure in failures {
            tracing::warn!(target: "bonsai::kernels", "{failure}");
            self.notes.push(failure);
        }
        match (result, first_error) {
            (Some(found), _) => Ok(found),
            (None, Some(error)) => Err(error),
            (None, None) => Err(KernelError::NoNvrtc),
        }
    }
}

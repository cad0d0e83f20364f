//! The tier walk behind `KernelLibrary::load_with`: embedded SASS, the disk cache (one key per
//! compiler present), then a compile; every skip or failure becomes a note for the report.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{CudaContext, CudaModule};
use cudarc::nvrtc::Ptx;

use super::cache::{CacheKey, CacheRead, KernelCache};
use super::compile::{CompileOutput, Nvcc, Nvrtc};
use super::embedded;
use super::error::KernelError;
use super::library::{CompilerChoice, LoadStep, LoadTier};
use crate::config::NvccChoice;

/// A compiler this machine has, in tier order.
pub(super) enum Compiler {
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
pub(super) struct Candidate {
    pub(super) cubin: Vec<u8>,
    pub(super) tier: LoadTier,
    pub(super) code_arch: u32,
    pub(super) compiler: String,
}

/// Runs `f`, appending its duration to `steps` under `name`.
pub(super) fn timed<T>(steps: &mut Vec<LoadStep>, name: &'static str, f: impl FnOnce() -> T) -> T {
    let started = Instant::now();
    let value = f();
    steps.push(LoadStep { name, duration: started.elapsed() });
    value
}

pub(super) fn load_cubin(
    context: &Arc<CudaContext>,
    cubin: &[u8],
) -> Result<Arc<CudaModule>, cudarc::driver::DriverError> {
    context.load_module(Ptx::from_binary(cubin.to_vec()))
}

/// The state of one load while it walks the tiers.
pub(super) struct Loader<'a> {
    pub(super) context: &'a Arc<CudaContext>,
    pub(super) arch: u32,
    pub(super) source: &'a str,
    pub(super) choice: CompilerChoice,
    pub(super) nvcc: &'a NvccChoice,
    pub(super) steps: Vec<LoadStep>,
    pub(super) notes: Vec<String>,
    pub(super) compilers: Vec<Compiler>,
    pub(super) probed: bool,
}

impl Loader<'_> {
    pub(super) fn try_embedded(
        &mut self,
        source_sha256: &str,
    ) -> Option<(Arc<CudaModule>, Candidate)> {
        let picked = timed(&mut self.steps, "embedded lookup", || {
            embedded::select(self.arch, source_sha256)
        });
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
                self.notes.push(format!(
                    "embedded SASS for sm_{}: the driver refused it: {e}",
                    embedded.arch
                ));
                None
            }
        }
    }

    /// Opens the compilers this machine has, once, in tier order.
    fn compilers(&mut self) -> &[Compiler] {
        if !self.probed {
            self.probed = true;
            let started = Instant::now();
            if self.choice != CompilerChoice::Nvrtc {
                match Nvcc::find(self.nvcc).map(|program| Nvcc::open(&program)) {
                    Some(Ok(nvcc)) => self.compilers.push(Compiler::Nvcc(nvcc)),
                    Some(Err(e)) => self.notes.push(format!("nvcc: unusable: {e}")),
                    None => self
                        .notes
                        .push("nvcc: not found (BONSAI_NVCC unset or off, none on PATH)".into()),
                }
            }
            if self.choice != CompilerChoice::Nvcc {
                match Nvrtc::open() {
                    Ok(nvrtc) => self.compilers.push(Compiler::Nvrtc(nvrtc)),
                    Err(e) => self.notes.push(format!("NVRTC: {e}")),
                }
            }
            self.steps.push(LoadStep { name: "compiler probe", duration: started.elapsed() });
        }
        &self.compilers
    }

    pub(super) fn try_cache(
        &mut self,
        cache: &KernelCache,
    ) -> Option<(Arc<CudaModule>, Candidate, PathBuf)> {
        let keys: Vec<(CacheKey, String)> = {
            let (arch, source) = (self.arch, self.source);
            self.compilers()
                .iter()
                .map(|c| {
                    (CacheKey::new(source, &c.options(arch), arch, &c.identity()), c.identity())
                })
                .collect()
        };
        if keys.is_empty() {
            self.notes.push("disk cache: no compiler to key entries by".into());
        }
        for (key, identity) in keys {
            let path = cache.entry_path(&key);
            match timed(&mut self.steps, "cache read", || cache.read(&key)) {
                Ok(CacheRead::Hit(cubin)) => {
                    match timed(&mut self.steps, "module load", || load_cubin(self.context, &cubin))
                    {
                        Ok(module) => {
                            let candidate = Candidate {
                                cubin,
                                tier: LoadTier::DiskCache,
                                code_arch: self.arch,
                                compiler: identity,
                            };
                            return Some((module, candidate, path));
                        }
                        Err(e) => self.notes.push(format!(
                            "disk cache: {} refused by the driver: {e}",
                            path.display()
                        )),
                    }
                }
                Ok(CacheRead::Miss) => {
                    self.notes.push(format!("disk cache: no entry for {identity}"))
                }
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
    pub(super) fn compile(&mut self) -> Result<(Candidate, CacheKey, String), KernelError> {
        let (arch, source) = (self.arch, self.source);
        self.compilers();
        let mut first_error = None;
        let mut compile_steps = Vec::new();
        let mut failures = Vec::new();
        let mut result = None;
        for compiler in &self.compilers {
            match timed(&mut compile_steps, "compile", || compiler.compile(source, arch)) {
                Ok(out) => {
                    let key =
                        CacheKey::new(source, &compiler.options(arch), arch, &compiler.identity());
                    let candidate = Candidate {
                        cubin: out.cubin,
                        tier: compiler.tier(),
                        code_arch: arch,
                        compiler: compiler.identity(),
                    };
                    result = Some((candidate, key, out.log));
                    break;
                }
                Err(e) => {
                    failures.push(format!(
                        "{}: compile failed, trying the next tier: {e}",
                        compiler.identity()
                    ));
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
            (None, None) if self.choice == CompilerChoice::Nvcc => Err(KernelError::NoNvcc),
            (None, None) => Err(KernelError::NoNvrtc),
        }
    }
}

//! The two compilers the library can build itself with, both producing a cubin (SASS) for one
//! exact architecture so the driver never JIT-compiles PTX: `nvcc` (offline, when installed) and
//! NVRTC (the runtime compiler library, loaded dynamically).

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::process::Command;

use cudarc::nvrtc::{result as nvrtc_result, sys as nvrtc_sys};

use super::error::KernelError;
use crate::config::NvccChoice;
use super::registry::{compile_target, NVCC_FLAGS, NVRTC_OPTIONS};

/// Name the compiled program carries in compiler messages.
const PROGRAM_NAME: &str = "bonsai_kernels.cu";

/// A compiled library for one architecture.
#[derive(Clone, Debug)]
pub struct CompileOutput {
    pub cubin: Vec<u8>,
    /// The compiler's messages; empty for a clean compile.
    pub log: String,
}

/// NVRTC, once its library is known to load.
#[derive(Clone, Debug)]
pub struct Nvrtc {
    version: (i32, i32),
}

impl Nvrtc {
    /// Whether libnvrtc can be loaded; cudarc panics on first use otherwise.
    pub fn is_present() -> bool {
        // SAFETY: only tries to dlopen the library by its candidate names; no NVRTC call is made.
        unsafe { nvrtc_sys::is_culib_present() }
    }

    /// Loads NVRTC and reads its version, or says it is absent.
    pub fn open() -> Result<Self, KernelError> {
        if !Self::is_present() {
            return Err(KernelError::NoNvrtc);
        }
        let (mut major, mut minor) = (0, 0);
        // SAFETY: the library is present (checked above); both pointers are valid for writes.
        unsafe { nvrtc_sys::nvrtcVersion(&mut major, &mut minor) }
            .result()
            .map_err(KernelError::nvrtc("reading the NVRTC version"))?;
        Ok(Self { version: (major, minor) })
    }

    /// The compiler identity that goes into cache keys and reports.
    pub fn identity(&self) -> String {
        format!("nvrtc {}.{}", self.version.0, self.version.1)
    }

    /// Every option passed for `arch`.
    pub fn options(arch: u32) -> Vec<String> {
        let mut options = vec![format!("--gpu-architecture={}", compile_target(arch))];
        options.extend(NVRTC_OPTIONS.iter().map(|s| s.to_string()));
        options
    }

    /// Compiles `source` to a cubin for `sm_{arch}`; a failed compile carries NVRTC's log.
    pub fn compile(&self, source: &str, arch: u32) -> Result<CompileOutput, KernelError> {
        let fail = |log: String| KernelError::Compile { compiler: self.identity(), arch, log };
        let c_source =
            CString::new(source).map_err(|_| fail("source text contains a NUL byte".into()))?;
        let c_name = CString::new(PROGRAM_NAME).map_err(|_| fail("bad program name".into()))?;
        let program = nvrtc_result::create_program(&c_source, Some(&c_name))
            .map_err(KernelError::nvrtc("creating the program"))?;
        // SAFETY: `program` was just created and is destroyed exactly once, below, after every
        // use; `c_source`/`c_name` outlive it.
        let result = unsafe { compile_and_extract(program, &Self::options(arch)) };
        // SAFETY: as above; this is the single destroy of `program`.
        let destroyed = unsafe { nvrtc_result::destroy_program(program) };
        let (compiled, log) = result?;
        destroyed.map_err(KernelError::nvrtc("destroying the program"))?;
        match compiled {
            Some(cubin) => Ok(CompileOutput { cubin, log }),
            None => Err(fail(log)),
        }
    }
}

/// Compiles `program`, returns (cubin if the compile succeeded, log).
///
/// # Safety
/// `program` must be a live NVRTC program.
unsafe fn compile_and_extract(
    program: nvrtc_sys::nvrtcProgram,
    options: &[String],
) -> Result<(Option<Vec<u8>>, String), KernelError> {
    // SAFETY: the caller guarantees `program` is live.
    let compiled = unsafe { nvrtc_result::compile_program(program, options) };
    // SAFETY: as above; the log exists after any compile attempt.
    let raw_log = unsafe { nvrtc_result::get_program_log(program) }
        .map_err(KernelError::nvrtc("reading the compile log"))?;
    let log_bytes: Vec<u8> = raw_log.iter().map(|&c| c as u8).take_while(|&b| b != 0).collect();
    let log = String::from_utf8_lossy(&log_bytes).trim().to_string();
    if compiled.is_err() {
        return Ok((None, log));
    }
    let mut len = 0usize;
    // SAFETY: live program, valid out-pointer.
    unsafe { nvrtc_sys::nvrtcGetCUBINSize(program, &mut len) }
        .result()
        .map_err(KernelError::nvrtc("reading the cubin size"))?;
    let mut cubin = vec![0u8; len];
    // SAFETY: `cubin` has exactly the `len` bytes NVRTC just reported for this program.
    unsafe { nvrtc_sys::nvrtcGetCUBIN(program, cubin.as_mut_ptr().cast()) }
        .result()
        .map_err(KernelError::nvrtc("copying the cubin"))?;
    Ok((Some(cubin), log))
}

/// An offline nvcc, once it has answered `--version`.
#[derive(Clone, Debug)]
pub struct Nvcc {
    program: PathBuf,
    version: String,
}

impl Nvcc {
    /// The nvcc to use at run time ([`NvccChoice`], from `BONSAI_NVCC`).
    pub fn find(choice: &NvccChoice) -> Option<PathBuf> {
        match choice {
            NvccChoice::At(program) => Some(program.clone()),
            NvccChoice::Off => None,
            NvccChoice::OnPath => find_on_path("nvcc"),
        }
    }

    /// Runs `program --version`; the answer becomes the compiler identity.
    pub fn open(program: &Path) -> Result<Self, KernelError> {
        let io_err = |source| KernelError::CompilerIo { program: program.to_path_buf(), source };
        let output = Command::new(program).arg("--version").output().map_err(io_err)?;
        if !output.status.success() {
            return Err(KernelError::Compile {
                compiler: program.display().to_string(),
                arch: 0,
                log: format!("`--version` failed: {}", String::from_utf8_lossy(&output.stderr)),
            });
        }
        let text = String::from_utf8_lossy(&output.stdout).to_string();
        Ok(Self { program: program.to_path_buf(), version: version_identity(&text) })
    }

    /// The compiler identity that goes into cache keys and reports.
    pub fn identity(&self) -> String {
        format!("nvcc {}", self.version)
    }

    pub fn program(&self) -> &Path {
        &self.program
    }

    /// Every flag passed for `arch` (besides input and output names).
    pub fn options(arch: u32) -> Vec<String> {
        let mut options: Vec<String> = NVCC_FLAGS.iter().map(|s| s.to_string()).collect();
        options.push(format!("-arch={}", compile_target(arch)));
        options
    }

    /// Compiles `source` to a cubin for `sm_{arch}` in a private scratch folder.
    pub fn compile(&self, source: &str, arch: u32) -> Result<CompileOutput, KernelError> {
        let scratch = ScratchDir::new()?;
        let input = scratch.0.join(PROGRAM_NAME);
        let output = scratch.0.join("bonsai_kernels.cubin");
        std::fs::write(&input, source).map_err(KernelError::cache_io(&input))?;
        let run = Command::new(&self.program)
            .args(Self::options(arch))
            .arg("-o")
            .arg(&output)
            .arg(&input)
            .output()
            .map_err(|source| KernelError::CompilerIo { program: self.program.clone(), source })?;
        let log = format!(
            "{}{}",
            String::from_utf8_lossy(&run.stdout),
            String::from_utf8_lossy(&run.stderr)
        )
        .trim()
        .to_string();
        if !run.status.success() {
            return Err(KernelError::Compile { compiler: self.identity(), arch, log });
        }
        let cubin = std::fs::read(&output).map_err(KernelError::cache_io(&output))?;
        Ok(CompileOutput { cubin, log })
    }
}

/// The lines of `nvcc --version` that name the release and build, joined on one line.
fn version_identity(text: &str) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("Cuda compilation tools") || l.starts_with("Build "))
        .collect();
    if lines.is_empty() {
        text.trim().replace('\n', "; ")
    } else {
        lines.join("; ")
    }
}

/// The first executable file called `name` in a PATH directory.
fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    let Ok(meta) = std::fs::metadata(path) else { return false };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        meta.is_file() && meta.permissions().mode() & 0o111 != 0
    }
    #[cfg(not(unix))]
    meta.is_file()
}

/// A private temporary folder for one nvcc run, removed on drop.
struct ScratchDir(PathBuf);

impl ScratchDir {
    fn new() -> Result<Self, KernelError> {
        // Unique per process and per call, so concurrent compiles never share a folder.
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let serial = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = std::env::temp_dir()
            .join(format!("bonsai-nvcc-{}-{serial}-{nanos}", std::process::id()));
        let mut builder = std::fs::DirBuilder::new();
        #[cfg(unix)]
        {
            use std::os::unix::fs::DirBuilderExt;
            builder.mode(0o700);
        }
        builder.create(&dir).map_err(KernelError::cache_io(&dir))?;
        Ok(Self(dir))
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvcc_identity_keeps_release_and_build_lines() {
        let text = "nvcc: NVIDIA (R) Cuda compiler driver\nCopyright (c) 2005-2025 NVIDIA Corporation\n\
                    Built on Wed_Aug_20_01:58:59_PM_PDT_2025\n\
                    Cuda compilation tools, release 13.0, V13.0.88\nBuild cuda_13.0.r13.0/compiler.36424714_0\n";
        assert_eq!(
            version_identity(text),
            "Cuda compilation tools, release 13.0, V13.0.88; Build cuda_13.0.r13.0/compiler.36424714_0"
        );
        assert_eq!(version_identity("odd\ncompiler\n"), "odd; compiler");
    }

    #[test]
    fn options_name_the_exact_architecture() {
        assert_eq!(Nvrtc::options(90)[0], "--gpu-architecture=sm_90a");
        assert_eq!(Nvrtc::options(80)[0], "--gpu-architecture=sm_80");
        // Only Hopper's wgmma needs an arch-specific target; Blackwell takes the plain one.
        assert_eq!(Nvrtc::options(100)[0], "--gpu-architecture=sm_100");
        assert_eq!(Nvrtc::options(120)[0], "--gpu-architecture=sm_120");
        assert_eq!(Nvcc::options(86).last().map(String::as_str), Some("-arch=sm_86"));
        assert!(Nvcc::options(80).iter().any(|o| o == "-Werror"));
    }
}

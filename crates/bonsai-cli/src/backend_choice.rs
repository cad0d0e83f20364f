//! Which backend a model-running command uses: the GPU when a CUDA driver and device are present,
//! the CPU with `--cpu` or (announced on stderr) when there is no GPU. A GPU that is present but
//! fails to open is an error, never a silent switch to the CPU.

use std::path::Path;

use anyhow::Context;
use bonsai_kernels::Config;
use bonsai_model::backend::cuda::is_absent_device;
use bonsai_model::loader::{open_model, LoadedModel};
use bonsai_model::{CpuBackend, CudaBackend};
use indicatif::{ProgressBar, ProgressStyle};

/// A backend chosen at run time.
#[allow(clippy::large_enum_variant)] // one per process, never moved in a loop
pub enum AnyBackend {
    Cpu(CpuBackend),
    Cuda(CudaBackend),
}

/// A model loaded on the chosen backend.
#[allow(clippy::large_enum_variant)] // one per process
pub enum AnyLoaded {
    Cpu(LoadedModel<CpuBackend>),
    Cuda(LoadedModel<CudaBackend>),
}

/// Message printed when no GPU is there and the CPU takes over.
pub const NO_GPU_NOTICE: &str = "no CUDA device found, using the CPU";

/// The GPU unless `force_cpu`; the CPU, announced, when no driver or device exists.
pub fn choose(force_cpu: bool, config: &Config) -> anyhow::Result<AnyBackend> {
    if force_cpu {
        return Ok(AnyBackend::Cpu(CpuBackend));
    }
    match CudaBackend::open(config) {
        Ok(backend) => Ok(AnyBackend::Cuda(backend)),
        Err(e) if is_absent_device(&e) => {
            eprintln!("{NO_GPU_NOTICE} ({e})");
            Ok(AnyBackend::Cpu(CpuBackend))
        }
        Err(e) => Err(anyhow::Error::new(e).context("opening the GPU (use --cpu to run on the CPU)")),
    }
}

/// A byte progress bar over the weight upload (hidden when stderr is not a terminal).
fn upload_bar() -> ProgressBar {
    let bar = ProgressBar::new(0);
    if let Ok(style) = ProgressStyle::with_template("uploading weights {bar:40} {bytes}/{total_bytes} ({bytes_per_sec})") {
        bar.set_style(style);
    }
    bar
}

/// Loads `path` onto `backend` (a progress bar over bytes while the GPU receives the weights).
pub fn load(path: &Path, backend: AnyBackend, ctx: Option<usize>) -> anyhow::Result<AnyLoaded> {
    let what = || format!("loading {}", path.display());
    Ok(match backend {
        AnyBackend::Cpu(b) => AnyLoaded::Cpu(open_model(path, b, ctx).with_context(what)?),
        AnyBackend::Cuda(b) => {
            let bar = upload_bar();
            let progress = bar.clone();
            b.on_upload(Box::new(move |done, total| {
                progress.set_length(total as u64);
                progress.set_position(done as u64);
            }));
            let loaded = open_model(path, b, ctx).with_context(what);
            bar.finish_and_clear();
            AnyLoaded::Cuda(loaded?)
        }
    })
}

/// Runs `$body` with `$loaded` bound to the `LoadedModel` of whichever backend was chosen.
#[macro_export]
macro_rules! on_any_backend {
    ($any:expr, |$loaded:ident| $body:expr) => {
        match $any {
            $crate::backend_choice::AnyLoaded::Cpu(ref $loaded) => $body,
            $crate::backend_choice::AnyLoaded::Cuda(ref $loaded) => $body,
        }
    };
}

//! Launches the library's own `bonsai_selftest_fill` kernel and checks every element it wrote:
//! proof that the loaded module runs on this device, not just that it loaded.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::{CudaStream, LaunchConfig, PushKernelArg};

use super::error::KernelError;
use super::library::KernelLibrary;

/// Elements filled: odd and larger than one grid pass, so the grid-stride loop and the tail
/// are both exercised.
const SELFTEST_LEN: u32 = 4099;
/// A deliberately small grid (2 x 256 threads) for the same reason.
const SELFTEST_GRID: u32 = 2;
const SELFTEST_BLOCK: u32 = 256;

/// What the selftest did.
#[derive(Clone, Debug)]
pub struct SelftestReport {
    pub elements: u32,
    pub value: u32,
    /// Upload of the poison, launch, download and synchronisation.
    pub duration: Duration,
}

/// Fills a poisoned device buffer with a fresh value and checks every element changed to it.
pub fn run(
    library: &KernelLibrary,
    stream: &Arc<CudaStream>,
) -> Result<SelftestReport, KernelError> {
    let started = Instant::now();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0x5eed_f00d, |d| d.subsec_nanos());
    // Fresh each run, never zero, and never equal to its own poison (its bitwise complement).
    let value = nanos | 1;
    let poison = vec![!value; SELFTEST_LEN as usize];
    let mut out =
        stream.clone_htod(&poison).map_err(KernelError::driver("uploading the selftest buffer"))?;
    let function = library.function("bonsai_selftest_fill")?;
    let config = LaunchConfig {
        grid_dim: (SELFTEST_GRID, 1, 1),
        block_dim: (SELFTEST_BLOCK, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut launch = stream.launch_builder(function);
    launch.arg(&mut out).arg(&SELFTEST_LEN).arg(&value);
    // SAFETY: the arguments match the kernel's signature (u32* out, u32 n, u32 value) in order
    // and type; `out` holds exactly SELFTEST_LEN u32s, the bound the kernel checks.
    unsafe { launch.launch(config) }
        .map_err(KernelError::driver("launching the selftest kernel"))?;
    let host =
        stream.clone_dtoh(&out).map_err(KernelError::driver("downloading the selftest buffer"))?;
    stream.synchronize().map_err(KernelError::driver("synchronising after the selftest"))?;
    if let Some(index) = host.iter().position(|&v| v != value) {
        return Err(KernelError::Selftest {
            detail: format!("element {index} is {:#x}, expected {value:#x}", host[index]),
        });
    }
    Ok(SelftestReport { elements: SELFTEST_LEN, value, duration: started.elapsed() })
}

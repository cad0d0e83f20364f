//! The CUDA context bonsai runs in: device 0 (or `$BONSAI_DEVICE`), one non-default stream (CUDA
//! graph capture needs one), and the device facts the kernels and reports need.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::sys::{CUdevice_attribute as Attr, CUresult};
use cudarc::driver::{CudaContext, CudaStream};

use super::error::KernelError;
use super::library::{KernelLibrary, LoadOptions, LoadStep};
use crate::config::Config;

/// Whether the CUDA driver library can be loaded; cudarc panics on first use otherwise, so every
/// entry into the driver goes through this check first.
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen libcuda by its candidate names; no driver call is made.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// What the device is.
#[derive(Clone, Debug)]
pub struct DeviceInfo {
    pub ordinal: usize,
    pub name: String,
    /// Compute capability as `sm_XX`'s number, e.g. 90 for an H100/H200.
    pub arch: u32,
    pub sm_count: u32,
    pub total_memory_bytes: usize,
    pub l2_cache_bytes: usize,
}

/// A context on one device with a stream of its own.
pub struct GpuContext {
    context: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    info: DeviceInfo,
    created_in: Duration,
}

impl GpuContext {
    /// Opens device `ordinal`.
    pub fn on_device(ordinal: usize) -> Result<Self, KernelError> {
        if !driver_present() {
            return Err(KernelError::NoDriver);
        }
        let started = Instant::now();
        let count = match CudaContext::device_count() {
            Ok(count) => usize::try_from(count).unwrap_or(0),
            // cuInit itself fails this way when the driver is installed but sees no GPU.
            Err(e) if e.0 == CUresult::CUDA_ERROR_NO_DEVICE => 0,
            Err(e) => return Err(KernelError::Driver { what: "counting devices", source: e }),
        };
        if ordinal >= count {
            return Err(KernelError::NoDevice { ordinal, count });
        }
        let context =
            CudaContext::new(ordinal).map_err(KernelError::driver("creating the context"))?;
        let stream = context.new_stream().map_err(KernelError::driver("creating a stream"))?;
        let info = device_info(&context)?;
        Ok(Self { context, stream, info, created_in: started.elapsed() })
    }

    pub fn context(&self) -> &Arc<CudaContext> {
        &self.context
    }

    /// The non-default stream every bonsai launch and copy goes on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// How long driver initialisation, context and stream creation took.
    pub fn created_in(&self) -> Duration {
        self.created_in
    }

    /// Loads the kernel library for this device; its report starts with the context step.
    pub fn load_library(&self, config: &Config, options: &LoadOptions) -> Result<KernelLibrary, KernelError> {
        let mut library = KernelLibrary::load_with(&self.context, config, options)?;
        library
            .report_mut()
            .steps
            .insert(0, LoadStep { name: "context", duration: self.created_in });
        Ok(library)
    }
}

fn device_info(context: &Arc<CudaContext>) -> Result<DeviceInfo, KernelError> {
    let attribute = |attr: Attr, what: &'static str| -> Result<u32, KernelError> {
        let value = context.attribute(attr).map_err(KernelError::driver(what))?;
        Ok(u32::try_from(value).unwrap_or(0))
    };
    let (major, minor) = context
        .compute_capability()
        .map_err(KernelError::driver("reading the compute capability"))?;
    Ok(DeviceInfo {
        ordinal: context.ordinal(),
        name: context.name().map_err(KernelError::driver("reading the device name"))?,
        arch: arch_number(major, minor),
        sm_count: attribute(
            Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            "reading the SM count",
        )?,
        total_memory_bytes: context
            .total_mem()
            .map_err(KernelError::driver("reading the memory size"))?,
        l2_cache_bytes: attribute(Attr::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "reading the L2 size")?
            as usize,
    })
}

/// Compute capability (major, minor) as the `sm_XX` number: (9, 0) -> 90, (12, 0) -> 120.
pub fn arch_number(major: i32, minor: i32) -> u32 {
    u32::try_from(major * 10 + minor).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_number_is_major_tens_plus_minor() {
        assert_eq!((arch_number(8, 0), arch_number(8, 6), arch_number(9, 0)), (80, 86, 90));
        assert_eq!((arch_number(10, 0), arch_number(12, 0)), (100, 120));
    }

    /// On a machine without libcuda (CI), opening a context is the typed NoDriver error, not a
    /// panic inside cudarc. Where a driver exists this checks nothing.
    #[test]
    fn missing_driver_is_a_typed_error() {
        if driver_present() {
            println!("a CUDA driver is present: nothing to check");
            return;
        }
        let error = GpuContext::on_device(0).err().expect("no driver yet a context opened");
        assert!(matches!(error, KernelError::NoDriver), "{error}");
        assert!(error.to_string().starts_with("no CUDA driver found (libcuda.so): "), "{error}");
    }
}

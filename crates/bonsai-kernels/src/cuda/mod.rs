//! The CUDA side: context, the kernel library (one module, cached on disk, resolved by name),
//! device buffers and graphs. Nothing here is needed to build or run on a machine without CUDA:
//! the driver and NVRTC are loaded at run time, and their absence is a typed error.

pub mod cache;
pub mod compile;
pub mod context;
pub mod elf;
pub mod embedded;
pub mod error;
pub mod library;
mod loader;
/// The one list of CUDA sources and their entry points, shared with `build.rs` (see the file's
/// header comment for how to add a kernel).
pub mod registry;
pub mod selftest;
pub mod weights;

pub use context::{driver_present, DeviceInfo, GpuContext};
pub use error::KernelError;
pub use library::{CompilerChoice, KernelLibrary, LoadOptions, LoadReport, LoadStep, LoadTier};
pub use weights::{upload, GpuQ1Matrix, GpuQ2Matrix, GpuQMatrix};

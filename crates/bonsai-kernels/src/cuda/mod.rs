//! The CUDA side: context, the kernel library (one module, cached on disk, resolved by name),
//! device buffers and graphs. Nothing here is needed to build or run on a machine without CUDA:
//! the driver and NVRTC are loaded at run time.

pub mod library;
pub mod registry;

pub use library::{KernelError, KernelLibrary};

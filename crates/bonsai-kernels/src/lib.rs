//! Every op bonsai runs: a plain Rust reference that defines it, a fast CPU version, and a CUDA
//! kernel, side by side in `ops/<op>/`. Shared CPU machinery lives in `cpu/`, the CUDA kernel
//! library (one module, cached, resolved by name) in `cuda/`.

pub mod config;
pub mod cpu;
pub mod cuda;
pub mod launch;
pub mod launch_ex;
pub mod ops;
pub mod rope;
pub mod trace;
pub mod verify;
pub mod weights;

pub use config::Config;
pub use weights::{QMatrix, Q1Interleaved, Q1Matrix, Q2Matrix, TernaryInterleaved, WeightError, GROUP};

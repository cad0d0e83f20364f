//! `residual_add`: `a[i] += b[i]` (f32, same length).
//!
//! Accumulation: one f32 add per element in both versions (the reference adds in f64 and rounds
//! once, which is the same correctly rounded f32 sum), so the test demands bitwise equality.
//!
//! Speed of light on the H200: 12 bytes per element (read a, b; write a); hidden 4096 is 49 KB
//! -> 11 ns at 4.3 TB/s (launch-bound in practice; the model fuses it into `matmul_*` `Store::Add`).
//! CUDA: see cuda.rs.

mod cpu;
mod reference;
#[cfg(test)]
mod tests;

pub use cpu::{cpu, cpu_at};
pub use reference::reference;

/// The op's name in error messages.
pub(crate) const OP: &str = "residual_add";

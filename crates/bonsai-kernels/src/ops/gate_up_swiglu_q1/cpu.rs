//! Fast CPU version: the shared tiled engine with the SwiGLU epilogue (gate row f and up row
//! F + f sit in the same tile, so both dots finish in registers before silu·u is written).

use super::check_shapes;
use crate::cpu::{qgemm, simd_level, SimdLevel};
use crate::ops::OpError;
use crate::weights::Q1Matrix;

pub fn cpu(w: &Q1Matrix, x: &[f32], m: usize, out: &mut [f32]) -> Result<(), OpError> {
    cpu_at(simd_level(), w, x, m, out)
}

/// [`cpu`] at an explicit SIMD level (tests run every available level).
pub fn cpu_at(
    level: SimdLevel,
    w: &Q1Matrix,
    x: &[f32],
    m: usize,
    out: &mut [f32],
) -> Result<(), OpError> {
    check_shapes(w, x, m, out)?;
    qgemm::run(w, x, m, out, qgemm::Epilogue::SwiGlu, level);
    Ok(())
}

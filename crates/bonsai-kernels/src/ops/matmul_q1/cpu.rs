//! Fast CPU version: the shared tiled engine in [`crate::cpu::qgemm`] (rayon over output
//! columns, AVX2 + FMA sign-expansion micro kernel or its scalar twin).

use super::check_shapes;
use crate::cpu::{qgemm, simd_level, SimdLevel};
use crate::ops::{OpError, Store};
use crate::weights::Q1Matrix;

pub fn cpu(w: &Q1Matrix, x: &[f32], m: usize, y: &mut [f32], store: Store) -> Result<(), OpError> {
    cpu_at(simd_level(), w, x, m, y, store)
}

/// [`cpu`] at an explicit SIMD level (tests run every available level).
pub fn cpu_at(
    level: SimdLevel,
    w: &Q1Matrix,
    x: &[f32],
    m: usize,
    y: &mut [f32],
    store: Store,
) -> Result<(), OpError> {
    check_shapes(w, x, m, y)?;
    qgemm::run(w, x, m, y, qgemm::Epilogue::Store(store), level);
    Ok(())
}

//! Fast CPU version: rayon over tokens, each row decoded by the matmul engine's exact dequantizer
//! (`QuantRows::dequant_into`, a block of one scale and 4 or 8 words at a time).

use super::check_shapes;
use crate::ops::OpError;
use crate::cpu::qgemm::QuantRows;
use crate::weights::QMatrix;
use rayon::prelude::*;

pub fn cpu(table: &QMatrix, ids: &[u32], out: &mut [f32]) -> Result<(), OpError> {
    check_shapes(table, ids, out)?;
    let hidden = table.k();
    if hidden == 0 {
        return Ok(());
    }
    out.par_chunks_mut(hidden).zip(ids.par_iter()).for_each(|(row, &id)| match table {
        QMatrix::Q1(w) => w.dequant_into(id as usize, 0, row),
        QMatrix::Q2(w) => w.dequant_into(id as usize, 0, row),
    });
    Ok(())
}

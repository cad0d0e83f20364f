//! Fast CPU version: the CPU pool over tokens, each row decoded by the matmul engine's exact
//! dequantizer (`QuantRows::dequant_into`, a block of one scale and 4 or 8 words at a time).

use super::check_table_shapes;
use crate::cpu::pool::{self, Split};
use crate::cpu::qgemm::QuantRows;
use crate::ops::OpError;
use crate::weights::QMatrix;

pub fn cpu(table: &QMatrix, ids: &[u32], out: &mut [f32]) -> Result<(), OpError> {
    match table {
        QMatrix::Q1(w) => cpu_of(w, ids, out),
        QMatrix::Q2(w) => cpu_of(w, ids, out),
    }
}

/// [`cpu`] for a table in any layout the matmul engine reads (the CPU backend's Q1 tables are
/// interleaved at its SIMD levels).
pub fn cpu_of<W: QuantRows>(table: &W, ids: &[u32], out: &mut [f32]) -> Result<(), OpError> {
    check_table_shapes(table.rows(), table.cols(), ids, out)?;
    let hidden = table.cols();
    if hidden == 0 {
        return Ok(());
    }
    let split = Split::new(1, pool::MIN_ELEMENTS_PER_PART.div_ceil(hidden));
    pool::for_each_rows_mut(out, hidden, split, &|tokens, out_rows| {
        for (row, &id) in out_rows.chunks_exact_mut(hidden).zip(&ids[tokens]) {
            table.dequant_into(id as usize, 0, row);
        }
    });
    Ok(())
}

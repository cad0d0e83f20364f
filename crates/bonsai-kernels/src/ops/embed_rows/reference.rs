//! The definition: the matrices' own `weight(row, col)`.

use super::check_shapes;
use crate::ops::OpError;
use crate::weights::QMatrix;

pub fn reference(table: &QMatrix, ids: &[u32], out: &mut [f32]) -> Result<(), OpError> {
    check_shapes(table, ids, out)?;
    let hidden = table.k();
    for (i, &id) in ids.iter().enumerate() {
        for c in 0..hidden {
            out[i * hidden + c] = match table {
                QMatrix::Q1(w) => w.weight(id as usize, c),
                QMatrix::Q2(w) => w.weight(id as usize, c),
            };
        }
    }
    Ok(())
}

//! Fast CPU version: rayon over tokens, each row decoded a block (one scale, 4 or 8 words) at a
//! time.

use super::check_shapes;
use crate::ops::OpError;
use crate::weights::{Q1Matrix, Q2Matrix, QMatrix, GROUP, Q1_WORDS, Q2_WORDS};
use rayon::prelude::*;

pub fn cpu(table: &QMatrix, ids: &[u32], out: &mut [f32]) -> Result<(), OpError> {
    check_shapes(table, ids, out)?;
    let hidden = table.k();
    if hidden == 0 {
        return Ok(());
    }
    out.par_chunks_mut(hidden).zip(ids.par_iter()).for_each(|(row, &id)| match table {
        QMatrix::Q1(w) => decode_q1_row(w, id as usize, row),
        QMatrix::Q2(w) => decode_q2_row(w, id as usize, row),
    });
    Ok(())
}

fn decode_q1_row(w: &Q1Matrix, row: usize, out: &mut [f32]) {
    let nb = w.blocks_per_row();
    for (kb, block_out) in out.chunks_exact_mut(GROUP).enumerate() {
        let b = row * nb + kb;
        let d = w.scales[b].to_f32();
        let words = &w.bits[b * Q1_WORDS..(b + 1) * Q1_WORDS];
        for (j, o) in block_out.iter_mut().enumerate() {
            let bit = (words[j / 32] >> (j % 32)) & 1;
            *o = if bit == 1 { d } else { -d };
        }
    }
}

fn decode_q2_row(w: &Q2Matrix, row: usize, out: &mut [f32]) {
    let nb = w.blocks_per_row();
    for (kb, block_out) in out.chunks_exact_mut(GROUP).enumerate() {
        let b = row * nb + kb;
        let d = w.scales[b].to_f32();
        let words = &w.codes[b * Q2_WORDS..(b + 1) * Q2_WORDS];
        for (j, o) in block_out.iter_mut().enumerate() {
            let code = (words[j / 16] >> (2 * (j % 16))) & 3;
            *o = (code as f32 - 1.0) * d;
        }
    }
}

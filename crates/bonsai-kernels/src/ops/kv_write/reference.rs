//! The definition: element by element.

use super::check_shapes;
use crate::ops::{KvCache, OpError, QkvRows};
use half::f16;

pub fn reference(rows: QkvRows<'_>, cache: KvCache<&mut [f16]>) -> Result<(), OpError> {
    check_shapes(&rows, &cache)?;
    let (QkvRows { qkv, m, shape, pos0 }, KvCache { k: k_cache, v: v_cache, max_seq }) = (rows, cache);
    let hd = shape.head_dim;
    for i in 0..m {
        let row = &qkv[i * shape.qkv_row_len()..(i + 1) * shape.qkv_row_len()];
        for h in 0..shape.n_kv {
            for d in 0..hd {
                let dst = (h * max_seq + pos0 + i) * hd + d;
                k_cache[dst] = f16::from_f32(row[shape.q_len() + h * hd + d]);
                v_cache[dst] = f16::from_f32(row[shape.q_len() + shape.kv_len() + h * hd + d]);
            }
        }
    }
    Ok(())
}

//! The definition: element by element.

use super::check_shapes;
use crate::ops::{kv_row_offset, KvCache, OpError, QkvRows, KV_BLOCK};
use half::f16;

pub fn reference(rows: QkvRows<'_>, cache: KvCache<&mut [f16], &[u32]>) -> Result<(), OpError> {
    check_shapes(&rows, &cache)?;
    let (QkvRows { qkv, m, shape, pos0 }, KvCache { k: k_cache, v: v_cache, table, .. }) = (rows, cache);
    let hd = shape.head_dim;
    for i in 0..m {
        let p = pos0 + i;
        let row = &qkv[i * shape.qkv_row_len()..(i + 1) * shape.qkv_row_len()];
        for h in 0..shape.n_kv {
            for d in 0..hd {
                let dst = kv_row_offset(shape, table[p / KV_BLOCK], h, p) + d;
                k_cache[dst] = f16::from_f32(row[shape.q_len() + h * hd + d]);
                v_cache[dst] = f16::from_f32(row[shape.q_len() + shape.kv_len() + h * hd + d]);
            }
        }
    }
    Ok(())
}

//! Fast CPU version: one slice conversion per (token, kv head) row with `half`'s run-time F16C
//! path. Serial: the rows land in blocks the table scatters over the pool, and even a 512-token
//! prompt of the 8B geometry converts only 1M values per layer, next to the layer's 2 GFLOP.

use super::check_shapes;
use crate::ops::{kv_row_offset, KvCache, OpError, QkvRows, KV_BLOCK};
use half::{f16, slice::HalfFloatSliceExt};

pub fn cpu(rows: QkvRows<'_>, cache: KvCache<&mut [f16], &[u32]>) -> Result<(), OpError> {
    check_shapes(&rows, &cache)?;
    let (QkvRows { qkv, m, shape, pos0 }, KvCache { k: k_cache, v: v_cache, table, .. }) = (rows, cache);
    let hd = shape.head_dim;
    let row_len = shape.qkv_row_len();
    for i in 0..m {
        let p = pos0 + i;
        let row = &qkv[i * row_len..(i + 1) * row_len];
        for h in 0..shape.n_kv {
            let k_src = shape.q_len() + h * hd;
            let v_src = k_src + shape.kv_len();
            let dst = kv_row_offset(shape, table[p / KV_BLOCK], h, p);
            k_cache[dst..dst + hd].convert_from_f32_slice(&row[k_src..k_src + hd]);
            v_cache[dst..dst + hd].convert_from_f32_slice(&row[v_src..v_src + hd]);
        }
    }
    Ok(())
}

//! Fast CPU version: the CPU pool over kv heads (each head's cache plane is disjoint), slice
//! conversion with `half`'s run-time F16C path.

use super::check_shapes;
use crate::cpu::pool::{self, Split};
use crate::ops::{KvCache, OpError, QkvRows};
use half::{f16, slice::HalfFloatSliceExt};

pub fn cpu(rows: QkvRows<'_>, cache: KvCache<&mut [f16]>) -> Result<(), OpError> {
    check_shapes(&rows, &cache)?;
    let (QkvRows { qkv, m, shape, pos0 }, KvCache { k: k_cache, v: v_cache, max_seq }) = (rows, cache);
    if m == 0 {
        // Nothing to write (and max_seq may be 0, which no row split accepts).
        return Ok(());
    }
    let hd = shape.head_dim;
    let plane = max_seq * hd;
    let row_len = shape.qkv_row_len();
    // A head converts m·hd values into each cache: one decode token's heads are one thread's work.
    let split = Split::new(1, pool::MIN_ELEMENTS_PER_PART.div_ceil(2 * m * hd));
    pool::for_each_rows_mut2(k_cache, v_cache, plane, plane, split, &|heads, k_planes, v_planes| {
        for (h, (k_plane, v_plane)) in heads.zip(k_planes.chunks_exact_mut(plane).zip(v_planes.chunks_exact_mut(plane))) {
            for i in 0..m {
                let row = &qkv[i * row_len..(i + 1) * row_len];
                let k_src = shape.q_len() + h * hd;
                let v_src = k_src + shape.kv_len();
                let dst = (pos0 + i) * hd;
                k_plane[dst..dst + hd].convert_from_f32_slice(&row[k_src..k_src + hd]);
                v_plane[dst..dst + hd].convert_from_f32_slice(&row[v_src..v_src + hd]);
            }
        }
    });
    Ok(())
}

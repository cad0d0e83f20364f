//! Launcher of `kv_write_head_per_block` (kv_write.cu).


use cudarc::driver::{DevicePtr, DevicePtrMut, LaunchConfig};

use crate::launch_ex::Launch;
use crate::launch::{Gpu, KvCache, QkvRows, as_i32, check_kv_cache, expect_at_least, read_ptr, shape, write_ptr, LaunchError};

const THREADS: u32 = 128;

/// Writes the k and v heads of `m` qkv rows into the paged f16 caches (pools
/// `[blocks][n_kv][KV_BLOCK][hd]` as u16 bits, the block table in device memory) at positions
/// `pos0[0] + i`; positions >= max_seq are skipped on the device.
#[allow(clippy::too_many_arguments)]
pub fn kv_write(
    gpu: Gpu<'_>,
    rows: QkvRows<'_, impl DevicePtr<f32>, &impl DevicePtr<u32>>,
    cache: KvCache<&mut impl DevicePtrMut<u16>, &impl DevicePtr<u32>>,
) -> Result<(), LaunchError> {
    let QkvRows { qkv, m, shape: shape_, pos0 } = rows;
    const OP: &str = "kv_write";
    let KvCache { k: k_cache, v: v_cache, table, max_seq } = cache;
    let hd = shape_.head_dim;
    if m == 0 || hd == 0 || shape_.n_kv == 0 {
        return Err(shape(OP, format!("bad shape m={m} {shape_:?}")));
    }
    let max_seq_i = check_kv_cache(OP, shape_, max_seq, (k_cache.len(), v_cache.len()), table.len())?;
    let row = (shape_.n_q + 2 * shape_.n_kv) * hd;
    expect_at_least(OP, "qkv", qkv.len(), m * row)?;
    expect_at_least(OP, "pos0", pos0.len(), 1)?;
    let (n_q, n_kv, hd_i) = (as_i32(OP, "n_q", shape_.n_q)?, as_i32(OP, "n_kv", shape_.n_kv)?, as_i32(OP, "hd", hd)?);
    let cfg = LaunchConfig {
        grid_dim: (u32::try_from(m).map_err(|_| shape(OP, "too many tokens".into()))?, shape_.n_kv as u32, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    let func = gpu.function("kv_write_head_per_block")?;
    let (q_p, _a) = read_ptr(qkv, gpu.stream);
    let (p0, _b) = read_ptr(pos0, gpu.stream);
    let (t_p, _t) = read_ptr(table, gpu.stream);
    let (k_p, _c) = write_ptr(k_cache, gpu.stream);
    let (v_p, _d) = write_ptr(v_cache, gpu.stream);
    let mut l = Launch::new(gpu, func);
    l.arg(&q_p).arg(&n_q).arg(&n_kv).arg(&hd_i).arg(&p0).arg(&max_seq_i).arg(&t_p).arg(&k_p).arg(&v_p);
    // SAFETY: matches kv_write_head_per_block's signature; the pools are whole blocks and the
    // table covers max_seq (checked above), the kernel skips positions >= max_seq, and the table
    // entries of the written positions name pool blocks (the caller's contract, KvCache).
    unsafe { l.launch(cfg) }?;
    Ok(())
}

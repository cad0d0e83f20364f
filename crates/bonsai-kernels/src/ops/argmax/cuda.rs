//! Launcher of `argmax_multi_block` (argmax.cu).


use cudarc::driver::{DevicePtr, DevicePtrMut};

use crate::launch_ex::Launch;
use crate::launch::{Gpu, expect_at_least, grid_1d, read_ptr, shape, write_ptr, LaunchError};

const THREADS: u32 = 256;
/// Values each thread scans (grid-stride) at the most common sizes: ~150 CTAs for the vocabulary.
const VALUES_PER_THREAD: usize = 4;
/// Upper bound on CTAs: beyond ~8 per SM more CTAs only add atomics.
const MAX_BLOCKS: usize = 1024;
/// Written to `out[0]` when every value is NaN (ARGMAX_NONE in argmax.cu).
pub const ARGMAX_NONE: u32 = u32::MAX;

/// `out[0]` = index of the largest of `x[..n]` (ties -> lowest, NaN never wins), or
/// [`ARGMAX_NONE`] when all are NaN.
pub fn argmax(
    gpu: Gpu<'_>,
    x: &impl DevicePtr<f32>,
    n: usize,
    out: &mut impl DevicePtrMut<u32>,
) -> Result<(), LaunchError> {
    const OP: &str = "argmax";
    if n == 0 {
        return Err(shape(OP, "empty input".into()));
    }
    expect_at_least(OP, "x", x.len(), n)?;
    expect_at_least(OP, "out", out.len(), 1)?;
    let n_u = u32::try_from(n).ok().filter(|&v| v != ARGMAX_NONE).ok_or_else(|| shape(OP, format!("n = {n} too large")))?;
    let blocks = n.div_ceil(THREADS as usize * VALUES_PER_THREAD).clamp(1, MAX_BLOCKS) as u32;
    let func = gpu.function("argmax_multi_block")?;
    let (x_p, _a) = read_ptr(x, gpu.stream);
    let (o_p, _b) = write_ptr(out, gpu.stream);
    let mut l = Launch::new(gpu, func);
    l.arg(&x_p).arg(&n_u).arg(&o_p);
    // SAFETY: matches argmax_multi_block(x, n, out); x holds n values, out one. The kernel's
    // device globals are reset by its last CTA, so launches on one gpu.stream never overlap them.
    unsafe { l.launch(grid_1d(blocks, THREADS)) }?;
    Ok(())
}

/// `out[r]` = the argmax of row r of `x` (`rows` rows of `n`), as [`argmax`] gives for each row,
/// in one launch (`argmax_rows`). `keys` and `done` (one per row) are zero before the launch and
/// left zero.
pub fn argmax_rows(
    gpu: Gpu<'_>,
    x: &impl DevicePtr<f32>,
    rows: usize,
    n: usize,
    out: &mut impl DevicePtrMut<u32>,
    keys: &mut impl DevicePtrMut<u64>,
    done: &mut impl DevicePtrMut<u32>,
) -> Result<(), LaunchError> {
    const OP: &str = "argmax_rows";
    if n == 0 || rows == 0 {
        return Err(shape(OP, format!("empty input ({rows} rows of {n})")));
    }
    expect_at_least(OP, "x", x.len(), rows * n)?;
    expect_at_least(OP, "out", out.len(), rows)?;
    expect_at_least(OP, "keys", keys.len(), rows)?;
    expect_at_least(OP, "done", done.len(), rows)?;
    let n_u = u32::try_from(n).ok().filter(|&v| v != ARGMAX_NONE).ok_or_else(|| shape(OP, format!("n = {n} too large")))?;
    let rows_u = u32::try_from(rows).ok().filter(|&r| r <= 65_535).ok_or_else(|| shape(OP, format!("{rows} rows")))?;
    // Fewer CTAs per row than the one-row launch: the rows together fill the device.
    let blocks = n.div_ceil(THREADS as usize * VALUES_PER_THREAD * rows.min(MAX_ROW_SHARE)).clamp(1, MAX_BLOCKS) as u32;
    let func = gpu.function("argmax_rows")?;
    let (x_p, _a) = read_ptr(x, gpu.stream);
    let (o_p, _b) = write_ptr(out, gpu.stream);
    let (k_p, _c) = write_ptr(keys, gpu.stream);
    let (d_p, _d) = write_ptr(done, gpu.stream);
    let mut l = Launch::new(gpu, func);
    l.arg(&x_p).arg(&n_u).arg(&o_p).arg(&k_p).arg(&d_p);
    let cfg = cudarc::driver::LaunchConfig { grid_dim: (blocks, rows_u, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };
    // SAFETY: matches argmax_rows(x, n, out, keys, done); x holds rows * n values, out, keys and
    // done one per row (checked above); each row's last CTA resets its key and counter.
    unsafe { l.launch(cfg) }?;
    Ok(())
}

/// Up to this many rows, each extra row divides the CTAs per row (values per thread grow), so a
/// batch's launch stays near the one-row launch's CTA count.
const MAX_ROW_SHARE: usize = 8;

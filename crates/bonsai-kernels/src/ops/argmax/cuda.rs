//! Launchers of `argmax_multi_block` and `argmax_rows` (argmax.cu).

use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut, LaunchConfig};

use crate::launch::{expect_at_least, read_ptr, shape, write_ptr, Gpu, LaunchError};
use crate::launch_ex::Launch;

const THREADS: u32 = 256;
/// Values each thread scans (grid-stride) at the most common sizes: ~150 CTAs for the vocabulary.
const VALUES_PER_THREAD: usize = 4;
/// Upper bound on CTAs: beyond ~8 per SM more CTAs only add atomics.
const MAX_BLOCKS: usize = 1024;
/// Up to this many rows, each extra row divides the CTAs per row (values per thread grow), so a
/// batch's launch stays near the one-row launch's CTA count.
const MAX_ROW_SHARE: usize = 8;
/// Written to `out[0]` when every value is NaN (ARGMAX_NONE in argmax.cu).
pub const ARGMAX_NONE: u32 = u32::MAX;

/// `out[0]` = index of the largest of `x[..n]` (ties -> lowest, NaN never wins), or
/// [`ARGMAX_NONE`] when all are NaN (`argmax_multi_block`, whose per-launch state is two device
/// globals).
pub fn argmax(gpu: Gpu<'_>, x: &impl DevicePtr<f32>, n: usize, out: &mut impl DevicePtrMut<u32>) -> Result<(), LaunchError> {
    launch(gpu, x, 1, n, out, None::<(&mut CudaSlice<u64>, &mut CudaSlice<u32>)>)
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
    launch(gpu, x, rows, n, out, Some((keys, done)))
}

/// Both launches: `per_row` holds `argmax_rows`'s keys and counters; None is the one-row kernel.
fn launch<K: DevicePtrMut<u64>, D: DevicePtrMut<u32>>(
    gpu: Gpu<'_>,
    x: &impl DevicePtr<f32>,
    rows: usize,
    n: usize,
    out: &mut impl DevicePtrMut<u32>,
    per_row: Option<(&mut K, &mut D)>,
) -> Result<(), LaunchError> {
    const OP: &str = "argmax";
    if n == 0 || rows == 0 {
        return Err(shape(OP, format!("empty input ({rows} rows of {n})")));
    }
    expect_at_least(OP, "x", x.len(), rows * n)?;
    expect_at_least(OP, "out", out.len(), rows)?;
    let n_u = u32::try_from(n).ok().filter(|&v| v != ARGMAX_NONE).ok_or_else(|| shape(OP, format!("n = {n} too large")))?;
    let rows_u = u32::try_from(rows).ok().filter(|&r| r <= 65_535).ok_or_else(|| shape(OP, format!("{rows} rows")))?;
    let blocks = n.div_ceil(THREADS as usize * VALUES_PER_THREAD * rows.min(MAX_ROW_SHARE)).clamp(1, MAX_BLOCKS) as u32;
    let cfg = LaunchConfig { grid_dim: (blocks, rows_u, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };
    let (x_p, _a) = read_ptr(x, gpu.stream);
    let (o_p, _b) = write_ptr(out, gpu.stream);
    match per_row {
        None => {
            let mut l = Launch::new(gpu, gpu.function("argmax_multi_block")?);
            l.arg(&x_p).arg(&n_u).arg(&o_p);
            // SAFETY: matches argmax_multi_block(x, n, out); x holds n values, out one (rows is
            // 1 here). The kernel's device globals are reset by its last CTA, so launches on one
            // stream never overlap them.
            unsafe { l.launch(cfg) }?;
        }
        Some((keys, done)) => {
            expect_at_least(OP, "keys", keys.len(), rows)?;
            expect_at_least(OP, "done", done.len(), rows)?;
            let (k_p, _c) = write_ptr(keys, gpu.stream);
            let (d_p, _d) = write_ptr(done, gpu.stream);
            let mut l = Launch::new(gpu, gpu.function("argmax_rows")?);
            l.arg(&x_p).arg(&n_u).arg(&o_p).arg(&k_p).arg(&d_p);
            // SAFETY: matches argmax_rows(x, n, out, keys, done); x holds rows * n values, out,
            // keys and done one per row (checked above); each row's last CTA resets its key and
            // counter.
            unsafe { l.launch(cfg) }?;
        }
    }
    Ok(())
}

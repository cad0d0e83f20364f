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

//! Launcher of `silu_grid_stride` (silu.cu).


use cudarc::driver::{DevicePtr, DevicePtrMut};

use crate::launch_ex::Launch;
use crate::launch::{Gpu, expect_at_least, grid_1d, grid_stride_blocks, read_ptr, write_ptr, LaunchError};

const THREADS: u32 = 256;
const OP: &str = "silu";

/// `y[i] = x[i]·sigmoid(x[i])` for `len` elements (len 0 launches nothing).
pub fn silu(
    gpu: Gpu<'_>,
    x: &impl DevicePtr<f32>,
    len: usize,
    y: &mut impl DevicePtrMut<f32>,
) -> Result<(), LaunchError> {
    if !check(x.len(), y.len(), len)? {
        return Ok(());
    }
    let (x_p, _a) = read_ptr(x, gpu.stream);
    let (y_p, _b) = write_ptr(y, gpu.stream);
    launch_raw(gpu, x_p, y_p, len)
}

/// `x[i] = silu(x[i])` in place.
pub fn silu_in_place(
    gpu: Gpu<'_>,
    x: &mut impl DevicePtrMut<f32>,
    len: usize,
) -> Result<(), LaunchError> {
    if !check(x.len(), x.len(), len)? {
        return Ok(());
    }
    let (x_p, _a) = write_ptr(x, gpu.stream);
    launch_raw(gpu, x_p, x_p, len)
}

/// Checks the buffer lengths; Ok(false) when there is nothing to do (len 0).
pub(crate) fn check(x_len: usize, y_len: usize, len: usize) -> Result<bool, LaunchError> {
    expect_at_least(OP, "x", x_len, len)?;
    expect_at_least(OP, "y", y_len, len)?;
    // The kernel counts in long long.
    i64::try_from(len).map_err(|_| crate::launch::shape(OP, format!("{len} elements overflow")))?;
    Ok(len > 0)
}

/// float4 loads each thread has in flight (SILU_LOADS_IN_FLIGHT in silu.cu).
const LOADS_IN_FLIGHT: usize = 4;

/// CTAs of one call: one per THREADS·LOADS_IN_FLIGHT float4s (so a 384 x 64² tensor is one wave
/// of 384 CTAs), capped by grid_stride_blocks' limit, beyond which threads loop.
pub(crate) fn blocks_for(len: usize) -> u32 {
    grid_stride_blocks(len.div_ceil(4).div_ceil(LOADS_IN_FLIGHT), THREADS)
}

fn launch_raw(gpu: Gpu<'_>, x_p: u64, y_p: u64, len: usize) -> Result<(), LaunchError> {
    let func = gpu.function("silu_grid_stride")?;
    let len_i = len as i64; // fits: check() above
    let blocks = blocks_for(len);
    let mut b = Launch::new(gpu, func);
    b.arg(&x_p).arg(&y_p).arg(&len_i);
    // SAFETY: matches silu_grid_stride(x, y, len); both buffers hold >= len floats (checked by
    // the callers), and the kernel reads x[i] before writing y[i] at the same i, so x == y is safe.
    unsafe { b.launch(grid_1d(blocks, THREADS)) }?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn lengths_are_checked_before_any_launch() {
        assert_eq!(super::check(10, 10, 10).ok(), Some(true));
        assert_eq!(super::check(0, 0, 0).ok(), Some(false));
        let err = super::check(9, 10, 10).expect_err("short x");
        assert!(err.to_string().contains("silu: x holds 9 elements, needs 10"), "{err}");
        assert!(super::check(10, 3, 10).is_err());
    }

    #[test]
    fn small_tensors_run_in_one_wave() {
        // 384 x 64² floats: 393,216 float4s, 4 per thread, 256 threads: 384 CTAs (<= 3 per SM).
        assert_eq!(super::blocks_for(384 * 64 * 64), 384);
        assert_eq!(super::blocks_for(1), 1);
        assert_eq!(super::blocks_for(384 * 512 * 512), 132 * 16, "large tensors loop");
    }
}

//! Launcher of `upsample_nearest2x_grid_stride` (upsample_nearest2x.cu).

use std::sync::Arc;

use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut, PushKernelArg};

use crate::cuda::KernelLibrary;
use crate::launch::{as_i32, expect_at_least, grid_1d, grid_stride_blocks, read_ptr, shape, write_ptr, LaunchError};

const THREADS: u32 = 256;
const OP: &str = "upsample_nearest2x";

/// `y[c, i, j] = x[c, i/2, j/2]`: x `[C, H, W]` -> y `[C, 2H, 2W]`.
pub fn upsample_nearest2x(
    lib: &KernelLibrary,
    stream: &Arc<CudaStream>,
    x: &impl DevicePtr<f32>,
    channels: usize,
    height: usize,
    width: usize,
    y: &mut impl DevicePtrMut<f32>,
) -> Result<(), LaunchError> {
    if channels == 0 || height == 0 || width == 0 {
        return Err(shape(OP, format!("empty image {channels}x{height}x{width}")));
    }
    let input_len = channels
        .checked_mul(height)
        .and_then(|v| v.checked_mul(width))
        .filter(|v| v.checked_mul(4).is_some())
        .ok_or_else(|| shape(OP, format!("image {channels}x{height}x{width} overflows")))?;
    expect_at_least(OP, "x", x.len(), input_len)?;
    expect_at_least(OP, "y", y.len(), 4 * input_len)?;
    // The kernel indexes columns with int: 2W must fit.
    as_i32(OP, "2W", 2 * width)?;
    let rows = (channels * height) as i64;
    let width_i = width as i32;
    let func = lib.function("upsample_nearest2x_grid_stride")?;
    let (x_p, _a) = read_ptr(x, stream);
    let (y_p, _b) = write_ptr(y, stream);
    let mut b = stream.launch_builder(func);
    b.arg(&x_p).arg(&y_p).arg(&rows).arg(&width_i);
    // One thread per input float4 on the vector path (the scalar path loops grid-stride).
    let blocks = grid_stride_blocks(input_len.div_ceil(4), THREADS);
    // SAFETY: matches upsample_nearest2x_grid_stride(x, y, rows, width); x holds rows·W and y
    // 4·rows·W floats (checked above).
    unsafe { b.launch(grid_1d(blocks, THREADS)) }?;
    Ok(())
}

//! Launcher of `silu_grid_stride` (silu.cu).

use std::sync::Arc;

use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut, PushKernelArg};

use crate::cuda::KernelLibrary;
use crate::launch::{expect_at_least, grid_1d, grid_stride_blocks, read_ptr, write_ptr, LaunchError};

const THREADS: u32 = 256;
const OP: &str = "silu";

/// `y[i] = x[i]·sigmoid(x[i])` for `len` elements (len 0 launches nothing).
pub fn silu(
    lib: &KernelLibrary,
    stream: &Arc<CudaStream>,
    x: &impl DevicePtr<f32>,
    len: usize,
    y: &mut impl DevicePtrMut<f32>,
) -> Result<(), LaunchError> {
    expect_at_least(OP, "x", x.len(), len)?;
    expect_at_least(OP, "y", y.len(), len)?;
    if len == 0 {
        return Ok(());
    }
    let (x_p, _a) = read_ptr(x, stream);
    let (y_p, _b) = write_ptr(y, stream);
    launch_raw(lib, stream, x_p, y_p, len)
}

/// `x[i] = silu(x[i])` in place.
pub fn silu_in_place(
    lib: &KernelLibrary,
    stream: &Arc<CudaStream>,
    x: &mut impl DevicePtrMut<f32>,
    len: usize,
) -> Result<(), LaunchError> {
    expect_at_least(OP, "x", x.len(), len)?;
    if len == 0 {
        return Ok(());
    }
    let (x_p, _a) = write_ptr(x, stream);
    launch_raw(lib, stream, x_p, x_p, len)
}

fn launch_raw(lib: &KernelLibrary, stream: &Arc<CudaStream>, x_p: u64, y_p: u64, len: usize) -> Result<(), LaunchError> {
    let func = lib.function("silu_grid_stride")?;
    let len_i = len as i64;
    // Each thread starts on float4s: a quarter as many threads as elements fill the grid.
    let blocks = grid_stride_blocks(len.div_ceil(4), THREADS);
    let mut b = stream.launch_builder(func);
    b.arg(&x_p).arg(&y_p).arg(&len_i);
    // SAFETY: matches silu_grid_stride(x, y, len); both buffers hold >= len floats (checked by
    // the callers), and the kernel reads x[i] before writing y[i] at the same i, so x == y is safe.
    unsafe { b.launch(grid_1d(blocks, THREADS)) }?;
    Ok(())
}

//! Launcher of `sigmoid_gate_grid_stride` (sigmoid_gate.cu).

use cudarc::driver::{DevicePtr, DevicePtrMut};

use crate::launch::{expect_at_least, grid_1d, grid_stride_blocks, read_ptr, write_ptr, Gpu, LaunchError};
use crate::launch_ex::Launch;

const OP: &str = "sigmoid_gate";
const THREADS: u32 = 256;

/// `y[i] = x[i]·sigmoid(g[i])` for `len` elements (len 0 launches nothing).
pub fn sigmoid_gate(
    gpu: Gpu<'_>,
    x: &impl DevicePtr<f32>,
    g: &impl DevicePtr<f32>,
    len: usize,
    y: &mut impl DevicePtrMut<f32>,
) -> Result<(), LaunchError> {
    expect_at_least(OP, "x", x.len(), len)?;
    expect_at_least(OP, "g", g.len(), len)?;
    expect_at_least(OP, "y", y.len(), len)?;
    if len == 0 {
        return Ok(());
    }
    let len_i = len as i64;
    let func = gpu.function("sigmoid_gate_grid_stride")?;
    let (x_p, _a) = read_ptr(x, gpu.stream);
    let (g_p, _b) = read_ptr(g, gpu.stream);
    let (y_p, _c) = write_ptr(y, gpu.stream);
    let mut l = Launch::new(gpu, func);
    l.arg(&x_p).arg(&g_p).arg(&y_p).arg(&len_i);
    // SAFETY: matches sigmoid_gate_grid_stride(x, g, y, len); all three hold >= len floats.
    unsafe { l.launch(grid_1d(grid_stride_blocks(len, THREADS), THREADS)) }?;
    Ok(())
}

//! Launcher of `rms_norm_row_per_block` (rms_norm.cu).


use cudarc::driver::{DevicePtr, DevicePtrMut};

use crate::launch_ex::Launch;
use crate::launch::{Gpu, as_i32, expect_at_least, grid_1d, read_ptr, shape, write_ptr, LaunchError};

/// `RMS_NORM_THREADS` of rms_norm.cu: the fused rotation (ops/hadamard) sums a row's squares over
/// as many partial sums, bit-identical to this launch.
const THREADS: u32 = 256;

/// `y[r] = x[r] * weight / sqrt(mean(x[r]^2) + eps)` for `rows` rows of `n`.
#[allow(clippy::too_many_arguments)]
pub fn rms_norm(
    gpu: Gpu<'_>,
    x: &impl DevicePtr<f32>,
    weight: &impl DevicePtr<f32>,
    eps: f32,
    rows: usize,
    n: usize,
    y: &mut impl DevicePtrMut<f32>,
) -> Result<(), LaunchError> {
    const OP: &str = "rms_norm";
    if rows == 0 || n == 0 {
        return Err(shape(OP, format!("empty shape {rows}x{n}")));
    }
    expect_at_least(OP, "x", x.len(), rows * n)?;
    expect_at_least(OP, "weight", weight.len(), n)?;
    expect_at_least(OP, "y", y.len(), rows * n)?;
    let n_i = as_i32(OP, "n", n)?;
    let blocks = u32::try_from(rows).map_err(|_| shape(OP, format!("{rows} rows exceed the grid")))?;
    let func = gpu.function("rms_norm_row_per_block")?;
    let (x_p, _a) = read_ptr(x, gpu.stream);
    let (w_p, _b) = read_ptr(weight, gpu.stream);
    let (y_p, _c) = write_ptr(y, gpu.stream);
    let mut b = Launch::new(gpu, func);
    b.arg(&x_p).arg(&w_p).arg(&eps).arg(&y_p).arg(&n_i);
    // SAFETY: matches rms_norm_row_per_block(x, w, eps, y, n); lengths checked above.
    unsafe { b.launch(grid_1d(blocks, THREADS)) }?;
    Ok(())
}

//! Launcher of `residual_add_grid_stride` (residual_add.cu).


use cudarc::driver::{DevicePtr, DevicePtrMut};

use crate::launch_ex::Launch;
use crate::launch::{Gpu, expect_at_least, grid_1d, grid_stride_blocks, read_ptr, write_ptr, LaunchError};

const THREADS: u32 = 256;

/// `a[i] += b[i]` for the first `n` elements.
pub fn residual_add(
    gpu: Gpu<'_>,
    a: &mut impl DevicePtrMut<f32>,
    b: &impl DevicePtr<f32>,
    n: usize,
) -> Result<(), LaunchError> {
    const OP: &str = "residual_add";
    expect_at_least(OP, "a", a.len(), n)?;
    expect_at_least(OP, "b", b.len(), n)?;
    let n_i = n as i64;
    let func = gpu.function("residual_add_grid_stride")?;
    let (b_p, _g1) = read_ptr(b, gpu.stream);
    let (a_p, _g0) = write_ptr(a, gpu.stream);
    let mut l = Launch::new(gpu, func);
    l.arg(&a_p).arg(&b_p).arg(&n_i);
    // SAFETY: matches residual_add_grid_stride(a, b, n); both hold >= n elements.
    unsafe { l.launch(grid_1d(grid_stride_blocks(n, THREADS), THREADS)) }?;
    Ok(())
}

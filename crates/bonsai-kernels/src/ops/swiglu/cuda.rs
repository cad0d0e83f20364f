//! Launcher of `swiglu_grid_stride` (swiglu.cu).


use cudarc::driver::{DevicePtr, DevicePtrMut};

use crate::launch_ex::Launch;
use crate::launch::{Gpu, as_i32, expect_at_least, grid_1d, grid_stride_blocks, read_ptr, write_ptr, LaunchError};

const THREADS: u32 = 256;

/// `out[i, f] = silu(gate_up[i, f]) * gate_up[i, F + f]`; gate_up is `[m, 2F]`, out `[m, F]`.
pub fn swiglu(
    gpu: Gpu<'_>,
    gate_up: &impl DevicePtr<f32>,
    m: usize,
    f: usize,
    out: &mut impl DevicePtrMut<f32>,
) -> Result<(), LaunchError> {
    const OP: &str = "swiglu";
    expect_at_least(OP, "gate_up", gate_up.len(), m * 2 * f)?;
    expect_at_least(OP, "out", out.len(), m * f)?;
    let (m_i, f_i) = (as_i32(OP, "m", m)?, as_i32(OP, "F", f)?);
    let func = gpu.function("swiglu_grid_stride")?;
    let (g_p, _a) = read_ptr(gate_up, gpu.stream);
    let (o_p, _b) = write_ptr(out, gpu.stream);
    let mut l = Launch::new(gpu, func);
    l.arg(&g_p).arg(&o_p).arg(&m_i).arg(&f_i);
    // SAFETY: matches swiglu_grid_stride(gate_up, out, m, F); lengths checked above.
    unsafe { l.launch(grid_1d(grid_stride_blocks(m * f, THREADS), THREADS)) }?;
    Ok(())
}

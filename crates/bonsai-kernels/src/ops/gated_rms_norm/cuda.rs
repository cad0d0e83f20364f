//! Launcher of `gated_rms_norm_warp_per_head` (gated_rms_norm.cu).

use cudarc::driver::{DevicePtr, DevicePtrMut};

use crate::launch::{as_i32, expect_at_least, grid_1d, read_ptr, shape, write_ptr, Gpu, LaunchError};
use crate::launch_ex::Launch;

const OP: &str = "gated_rms_norm";
/// Heads (warps) per CTA (GRN_WARPS in gated_rms_norm.cu).
const WARPS: usize = 8;

/// `ops::gated_rms_norm` on the device: `heads` heads of `d` in `x`, `z`, `y`; `weight: [d]`.
/// No heads: nothing runs.
#[allow(clippy::too_many_arguments)]
pub fn gated_rms_norm(
    gpu: Gpu<'_>,
    x: &impl DevicePtr<f32>,
    z: &impl DevicePtr<f32>,
    weight: &impl DevicePtr<f32>,
    eps: f32,
    heads: usize,
    d: usize,
    y: &mut impl DevicePtrMut<f32>,
) -> Result<(), LaunchError> {
    if d == 0 {
        return Err(shape(OP, "head size 0".into()));
    }
    if heads == 0 {
        return Ok(()); // as the CPU version: nothing to normalise
    }
    expect_at_least(OP, "x", x.len(), heads * d)?;
    expect_at_least(OP, "z", z.len(), heads * d)?;
    expect_at_least(OP, "weight", weight.len(), d)?;
    expect_at_least(OP, "y", y.len(), heads * d)?;
    let d_i = as_i32(OP, "d", d)?;
    let heads_i = heads as i64;
    let blocks = u32::try_from(heads.div_ceil(WARPS)).map_err(|_| shape(OP, format!("{heads} heads exceed the grid")))?;
    let func = gpu.function("gated_rms_norm_warp_per_head")?;
    let (x_p, _a) = read_ptr(x, gpu.stream);
    let (z_p, _b) = read_ptr(z, gpu.stream);
    let (w_p, _c) = read_ptr(weight, gpu.stream);
    let (y_p, _d) = write_ptr(y, gpu.stream);
    let mut l = Launch::new(gpu, func);
    l.arg(&x_p).arg(&z_p).arg(&w_p).arg(&eps).arg(&y_p).arg(&heads_i).arg(&d_i);
    // SAFETY: matches gated_rms_norm_warp_per_head(x, z, w, eps, y, heads, d); lengths checked.
    unsafe { l.launch(grid_1d(blocks, (WARPS * 32) as u32)) }?;
    Ok(())
}

//! Launcher of `position_advance` (position_advance.cu): `pos[0] += by` on the device, the last
//! node of a captured decode step.
//!
//! Exact op (integer add); it has no CPU twin because the CPU backend keeps its position on the
//! host. Checked on the GPU by `bonsai check` (a graph-replayed decode equal to the CPU one).


use cudarc::driver::DevicePtrMut;

use crate::launch_ex::Launch;
use crate::launch::{Gpu, expect_at_least, grid_1d, shape, write_ptr, LaunchError};

/// `pos[0] += by`.
pub fn position_advance(
    gpu: Gpu<'_>,
    pos: &mut impl DevicePtrMut<u32>,
    by: usize,
) -> Result<(), LaunchError> {
    const OP: &str = "position_advance";
    expect_at_least(OP, "pos", pos.len(), 1)?;
    let by_u = u32::try_from(by).map_err(|_| shape(OP, format!("advance by {by} exceeds u32")))?;
    let func = gpu.function("position_advance")?;
    let (p, _a) = write_ptr(pos, gpu.stream);
    let mut l = Launch::new(gpu, func);
    l.arg(&p).arg(&by_u);
    // SAFETY: matches position_advance(u32* pos, u32 by); pos holds at least one element.
    unsafe { l.launch(grid_1d(1, 1)) }?;
    Ok(())
}

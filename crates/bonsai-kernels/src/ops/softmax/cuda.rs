//! Launcher of `softmax_row_per_block` (softmax.cu).


use cudarc::driver::DevicePtrMut;

use crate::launch_ex::Launch;
use crate::launch::{Gpu, as_i32, expect_at_least, grid_1d, shape, write_ptr, LaunchError};

const THREADS: u32 = 256;

/// Softmax in place over each of `rows` rows of `n`.
pub fn softmax(
    gpu: Gpu<'_>,
    x: &mut impl DevicePtrMut<f32>,
    rows: usize,
    n: usize,
) -> Result<(), LaunchError> {
    const OP: &str = "softmax";
    if rows == 0 || n == 0 {
        return Err(shape(OP, format!("empty shape {rows}x{n}")));
    }
    expect_at_least(OP, "x", x.len(), rows * n)?;
    let n_i = as_i32(OP, "n", n)?;
    let blocks = u32::try_from(rows).map_err(|_| shape(OP, format!("{rows} rows exceed the grid")))?;
    let func = gpu.function("softmax_row_per_block")?;
    let (x_p, _g) = write_ptr(x, gpu.stream);
    let mut l = Launch::new(gpu, func);
    l.arg(&x_p).arg(&n_i);
    // SAFETY: matches softmax_row_per_block(x, n); x holds rows * n elements.
    unsafe { l.launch(grid_1d(blocks, THREADS)) }?;
    Ok(())
}

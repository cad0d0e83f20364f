//! Launcher of `im2col_3x3_grid_stride` (im2col.cu).


use cudarc::driver::{DevicePtr, DevicePtrMut};

use crate::launch_ex::Launch;
use crate::launch::{Gpu, check_image_op, grid_1d, grid_stride_blocks, read_ptr, write_ptr, ImageShape, LaunchError};
use crate::ops::im2col::TAPS;

const THREADS: u32 = 256;
const OP: &str = "im2col";

/// The 3x3, pad 1 patches of x `[C, H, W]` as cols `[C·9, H·W]`.
pub fn im2col(
    gpu: Gpu<'_>,
    x: &impl DevicePtr<f32>,
    image: ImageShape,
    cols: &mut impl DevicePtrMut<f32>,
) -> Result<(), LaunchError> {
    let input_len = check_image_op(OP, x.len(), ("cols", cols.len()), image, TAPS)?;
    // All fit in i32: the check bounded 9·C·H·W by 2^31.
    let ImageShape { channels, height, width } = image;
    let (c_i, h_i, w_i) = (channels as i32, height as i32, width as i32);
    let func = gpu.function("im2col_3x3_grid_stride")?;
    let (x_p, _a) = read_ptr(x, gpu.stream);
    let (c_p, _b) = write_ptr(cols, gpu.stream);
    let mut b = Launch::new(gpu, func);
    b.arg(&x_p).arg(&c_p).arg(&c_i).arg(&h_i).arg(&w_i);
    let blocks = grid_stride_blocks((TAPS * input_len).div_ceil(4), THREADS);
    // SAFETY: matches im2col_3x3_grid_stride(x, cols, C, H, W); x holds C·H·W and cols 9·C·H·W
    // floats (checked above).
    unsafe { b.launch(grid_1d(blocks, THREADS)) }?;
    Ok(())
}

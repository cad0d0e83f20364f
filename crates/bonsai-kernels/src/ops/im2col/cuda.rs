//! Launcher of `im2col_3x3_grid_stride` (im2col.cu).

use std::sync::Arc;

use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};

use crate::cuda::KernelLibrary;
use crate::launch_ex::Launch;
use crate::launch::{check_image_op, grid_1d, grid_stride_blocks, read_ptr, write_ptr, LaunchError};
use crate::ops::im2col::TAPS;

const THREADS: u32 = 256;
const OP: &str = "im2col";

/// Checks x `[C, H, W]` and cols `[C·9, H·W]` against the buffer lengths; returns C·H·W.
pub(crate) fn check(x_len: usize, cols_len: usize, channels: usize, height: usize, width: usize) -> Result<usize, LaunchError> {
    check_image_op(OP, x_len, ("cols", cols_len), (channels, height, width), TAPS)
}

/// The 3x3, pad 1 patches of x `[C, H, W]` as cols `[C·9, H·W]`.
pub fn im2col(
    lib: &KernelLibrary,
    stream: &Arc<CudaStream>,
    x: &impl DevicePtr<f32>,
    channels: usize,
    height: usize,
    width: usize,
    cols: &mut impl DevicePtrMut<f32>,
) -> Result<(), LaunchError> {
    let input_len = check(x.len(), cols.len(), channels, height, width)?;
    // All fit in i32: check() bounded 9·C·H·W by 2^31.
    let (c_i, h_i, w_i) = (channels as i32, height as i32, width as i32);
    let func = lib.function("im2col_3x3_grid_stride")?;
    let (x_p, _a) = read_ptr(x, stream);
    let (c_p, _b) = write_ptr(cols, stream);
    let mut b = Launch::new(lib, stream, func);
    b.arg(&x_p).arg(&c_p).arg(&c_i).arg(&h_i).arg(&w_i);
    let blocks = grid_stride_blocks((TAPS * input_len).div_ceil(4), THREADS);
    // SAFETY: matches im2col_3x3_grid_stride(x, cols, C, H, W); x holds C·H·W and cols 9·C·H·W
    // floats (checked above).
    unsafe { b.launch(grid_1d(blocks, THREADS)) }?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn shapes_are_checked_before_any_launch() {
        assert_eq!(check(2 * 3 * 5, 9 * 30, 2, 3, 5).ok(), Some(30));
        assert!(check(30, 9 * 30 - 1, 2, 3, 5).expect_err("short cols").to_string().contains("im2col: cols"));
        assert!(check(29, 270, 2, 3, 5).is_err());
        assert!(check(0, 0, 2, 0, 5).is_err());
        assert!(check(usize::MAX, usize::MAX, 1, 1 << 14, 1 << 14).is_err(), "9·C·H·W beyond 2^31");
        assert!(check(usize::MAX, usize::MAX, 96, 1024, 1024).is_ok(), "the largest VAE conv input");
    }
}

//! Launcher of `upsample_nearest2x_grid_stride` (upsample_nearest2x.cu).

use std::sync::Arc;

use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};

use crate::cuda::KernelLibrary;
use crate::launch_ex::Launch;
use crate::launch::{expect_at_least, grid_1d, grid_stride_blocks, read_ptr, shape, write_ptr, LaunchError};

const THREADS: u32 = 256;
const OP: &str = "upsample_nearest2x";
/// The kernel indexes outputs with 32-bit unsigned ints and strides must not wrap: < 2^31.
const MAX_OUTPUT_ELEMENTS: usize = i32::MAX as usize;

/// Checks x `[C, H, W]` and y `[C, 2H, 2W]` against the buffer lengths; returns C·H·W.
pub(crate) fn check(x_len: usize, y_len: usize, channels: usize, height: usize, width: usize) -> Result<usize, LaunchError> {
    if channels == 0 || height == 0 || width == 0 {
        return Err(shape(OP, format!("empty image {channels}x{height}x{width}")));
    }
    let input_len = channels
        .checked_mul(height)
        .and_then(|v| v.checked_mul(width))
        .filter(|v| v.checked_mul(4).is_some_and(|n| n <= MAX_OUTPUT_ELEMENTS))
        .ok_or_else(|| shape(OP, format!("image {channels}x{height}x{width} overflows")))?;
    expect_at_least(OP, "x", x_len, input_len)?;
    expect_at_least(OP, "y", y_len, 4 * input_len)?;
    Ok(input_len)
}

/// `y[c, i, j] = x[c, i/2, j/2]`: x `[C, H, W]` -> y `[C, 2H, 2W]`.
pub fn upsample_nearest2x(
    lib: &KernelLibrary,
    stream: &Arc<CudaStream>,
    x: &impl DevicePtr<f32>,
    channels: usize,
    height: usize,
    width: usize,
    y: &mut impl DevicePtrMut<f32>,
) -> Result<(), LaunchError> {
    let input_len = check(x.len(), y.len(), channels, height, width)?;
    // Both fit: check() bounded 4·C·H·W by 2^31.
    let rows = (channels * height) as u32;
    let width_u = width as u32;
    let func = lib.function("upsample_nearest2x_grid_stride")?;
    let (x_p, _a) = read_ptr(x, stream);
    let (y_p, _b) = write_ptr(y, stream);
    let mut b = Launch::new(stream, func);
    b.arg(&x_p).arg(&y_p).arg(&rows).arg(&width_u);
    // One thread per input float4 on the vector path (the scalar path loops grid-stride).
    let blocks = grid_stride_blocks(input_len.div_ceil(4), THREADS);
    // SAFETY: matches upsample_nearest2x_grid_stride(x, y, rows, width); x holds rows·W and y
    // 4·rows·W floats (checked above).
    unsafe { b.launch(grid_1d(blocks, THREADS)) }?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn shapes_are_checked_before_any_launch() {
        assert_eq!(check(3 * 5 * 7, 4 * 105, 3, 5, 7).ok(), Some(105));
        assert!(check(105, 4 * 105 - 1, 3, 5, 7).expect_err("short y").to_string().contains("upsample_nearest2x: y"));
        assert!(check(104, 420, 3, 5, 7).is_err());
        assert!(check(0, 0, 0, 5, 7).expect_err("empty").to_string().contains("empty image"));
        assert!(check(usize::MAX, usize::MAX, 1 << 40, 1 << 40, 2).is_err());
        assert!(check(usize::MAX, usize::MAX, 1, 1 << 14, 1 << 15).is_err(), "4·C·H·W beyond 2^31");
        assert!(check(usize::MAX, usize::MAX, 1, 1 << 14, (1 << 15) - 1).is_ok());
    }
}

//! Launchers of `upsample_nearest2x_float2` (even W, aligned views) and
//! `upsample_nearest2x_grid_stride` (any W) in upsample_nearest2x.cu.


use cudarc::driver::{DevicePtr, DevicePtrMut};

use crate::launch_ex::Launch;
use crate::launch::{Gpu, check_image_op, grid_1d, grid_stride_blocks, read_ptr, write_ptr, ImageShape, LaunchError};

const THREADS: u32 = 256;
const OP: &str = "upsample_nearest2x";

/// Input float2s each thread of `upsample_nearest2x_float2` handles (UPSAMPLE_ITEMS).
const ITEMS_PER_THREAD: usize = 4;

/// Which kernel serves a call: the float2 -> 2 x float4 kernel needs an even W (so each output
/// row starts 16-byte aligned), x 8-byte and y 16-byte aligned.
pub(crate) fn vector_path(width: usize, x_ptr: u64, y_ptr: u64) -> bool {
    width % 2 == 0 && x_ptr % 8 == 0 && y_ptr % 16 == 0
}

/// CTAs of the vector kernel: one thread per ITEMS_PER_THREAD input float2s, no grid-stride.
pub(crate) fn vector_blocks(input_len: usize) -> u32 {
    // input_len < 2^29 (check_image_op), so this fits u32.
    (input_len / 2).div_ceil(THREADS as usize * ITEMS_PER_THREAD).max(1) as u32
}

/// `y[c, i, j] = x[c, i/2, j/2]`: x `[C, H, W]` -> y `[C, 2H, 2W]`.
pub fn upsample_nearest2x(
    gpu: Gpu<'_>,
    x: &impl DevicePtr<f32>,
    image: ImageShape,
    y: &mut impl DevicePtrMut<f32>,
) -> Result<(), LaunchError> {
    let input_len = check_image_op(OP, x.len(), ("y", y.len()), image, 4)?;
    let ImageShape { channels, height, width } = image;
    let (x_p, _a) = read_ptr(x, gpu.stream);
    let (y_p, _b) = write_ptr(y, gpu.stream);
    if vector_path(width, x_p, y_p) {
        // Both fit u32: check_image_op bounded 4·C·H·W by 2^31.
        let (half_width, items) = ((width / 2) as u32, (input_len / 2) as u32);
        let func = gpu.function("upsample_nearest2x_float2")?;
        let mut b = Launch::new(gpu, func);
        b.arg(&x_p).arg(&y_p).arg(&half_width).arg(&items);
        // SAFETY: matches upsample_nearest2x_float2(x, y, half_width, items); x holds
        // 2·items floats (8-byte aligned), y 8·items (16-byte aligned, W even: checked above).
        unsafe { b.launch(grid_1d(vector_blocks(input_len), THREADS)) }?;
    } else {
        let rows = (channels * height) as u32;
        let width_u = width as u32;
        let func = gpu.function("upsample_nearest2x_grid_stride")?;
        let mut b = Launch::new(gpu, func);
        b.arg(&x_p).arg(&y_p).arg(&rows).arg(&width_u);
        let blocks = grid_stride_blocks(4 * input_len, THREADS);
        // SAFETY: matches upsample_nearest2x_grid_stride(x, y, rows, width); x holds rows·W and
        // y 4·rows·W floats (checked above).
        unsafe { b.launch(grid_1d(blocks, THREADS)) }?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_vector_path_needs_even_width_and_aligned_views() {
        assert!(super::vector_path(64, 8, 16));
        assert!(!super::vector_path(63, 0, 0), "odd W: output rows are not 16-byte aligned");
        assert!(!super::vector_path(64, 4, 16) && !super::vector_path(64, 8, 8));
        // Every input float2 gets a thread slot: 384 x 64² -> 786,432 float2s / 1024 per CTA.
        assert_eq!(super::vector_blocks(384 * 64 * 64), 768);
        assert_eq!(super::vector_blocks(2), 1);
        assert_eq!(super::vector_blocks(2 * 1025), 2);
    }
}

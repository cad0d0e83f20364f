//! Launcher of `conv3x3` on tensor cores: the implicit GEMM of conv3x3.cu on the 3xTF32 tile
//! machinery of ops/gemm_f32/tile_3xtf32.cu (helpers shared with ops/gemm_f32/cuda.rs); for
//! C_out <= [`DIRECT_MAX_C_OUT`] the direct f32 kernel of conv3x3_direct.cu.


use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut, LaunchConfig};

use crate::launch::gemm_f32::{
    allow_smem, expect_aligned8, tile_grid, variant, ROWS_TILE_BYTES, STAGES, TILE_K, TILE_M,
    TILE_N,
};
use crate::launch::{Gpu, as_i32, expect_at_least, grid_1d, grid_stride_blocks, read_ptr, shape, write_ptr, LaunchError};
use crate::launch_ex::Launch;
use crate::ops::conv3x3::{ConvDims, Inputs, TAPS};

/// Padding floats per k row of the gathered pixel tile (CONV3X3_B_STRIDE = TILE_N + 8).
pub const B_ROW_PAD: usize = 8;
/// Dynamic shared memory of one conv3x3 CTA: filter tile + gathered pixel tile per stage.
pub const CONV_SMEM_BYTES: usize = STAGES * (ROWS_TILE_BYTES + TILE_K * (TILE_N + B_ROW_PAD) * 4);

const OP: &str = "conv3x3";

/// C_out up to which `conv3x3` runs the direct kernel (conv3x3_direct.cu) instead of the
/// implicit GEMM, whose 128-row M tile would be mostly padding.
pub const DIRECT_MAX_C_OUT: usize = 8;
/// Direct kernel geometry (CONV_DIRECT_* in conv3x3_direct.cu).
pub const DIRECT_TILE_H: usize = 8;
pub const DIRECT_TILE_W: usize = 64;
const DIRECT_THREADS: u32 = 128;
/// Input channels per stage of the direct kernel and per f32 fold of its partial sums.
pub const DIRECT_CI_BLOCK: usize = 8;
/// Output channels the `_co4` kernel computes (it serves C_out <= 4).
const DIRECT_CO4: usize = 4;
/// CUDA's limit on gridDim.y.
const MAX_GRID_Y: usize = 65_535;

/// Split-K of the implicit GEMM: at most this many K ranges, each at least
/// MIN_K_TILES_PER_SPLIT K tiles long, and only while all split CTAs fit one wave
/// (H200_CTA_SLOTS: 132 SMs x 2 CTAs). 384 -> 384 at 64² has 96 output tiles (72% of the SMs,
/// one CTA each) and 108 K tiles: 2 splits put 192 CTAs on the 264 slots.
pub const MAX_SPLITS: usize = 4;
const MIN_K_TILES_PER_SPLIT: usize = 16;
const H200_CTA_SLOTS: usize = 132 * 2;
const MERGE_THREADS: u32 = 256;

/// K splits a call at `dims` uses (1: none). Needs an even H·W (each split's partial then
/// starts 8-byte aligned for the epilogue's paired stores).
pub fn split_k(dims: ConvDims) -> usize {
    let pixels = dims.h * dims.w;
    if dims.c_out <= DIRECT_MAX_C_OUT || pixels % 2 != 0 {
        return 1;
    }
    let tiles = dims.c_out.div_ceil(TILE_M) * pixels.div_ceil(TILE_N);
    let k_tiles = (TAPS * dims.c_in).div_ceil(TILE_K);
    (2..=MAX_SPLITS)
        .rev()
        .find(|&s| tiles * s <= H200_CTA_SLOTS && k_tiles / s >= MIN_K_TILES_PER_SPLIT)
        .unwrap_or(1)
}

/// Which kernel a call at `dims` runs: "conv3x3_direct" or "conv3x3_3xtf32" (verify names its
/// rows and picks the error bound by this).
pub fn kernel_family(dims: ConvDims) -> &'static str {
    if dims.c_out <= DIRECT_MAX_C_OUT {
        "conv3x3_direct"
    } else {
        "conv3x3_3xtf32"
    }
}

/// Grid of the direct kernel: one CTA per DIRECT_TILE_H x DIRECT_TILE_W output tile.
pub(crate) fn direct_grid(dims: ConvDims) -> Result<(u32, u32, u32), LaunchError> {
    let (tiles_w, tiles_h) = (dims.w.div_ceil(DIRECT_TILE_W), dims.h.div_ceil(DIRECT_TILE_H));
    if tiles_h > MAX_GRID_Y {
        return Err(shape(OP, format!("H = {} needs {tiles_h} row tiles, beyond the grid's {MAX_GRID_Y}", dims.h)));
    }
    let tiles_w = u32::try_from(tiles_w).map_err(|_| shape(OP, format!("W = {} overflows the grid", dims.w)))?;
    Ok((tiles_w, tiles_h as u32, 1))
}

/// The direct kernel for C_out <= DIRECT_MAX_C_OUT on the device addresses of x, weight, bias
/// and y and the kernel's (C_in, C_out, H, W) (shapes already checked by `conv3x3`).
fn launch_direct(
    gpu: Gpu<'_>,
    dims: ConvDims,
    [x_ptr, w_ptr, b_ptr, y_ptr]: [u64; 4],
    [ci, co, h_i, w_i]: [i32; 4],
) -> Result<(), LaunchError> {
    let cfg = LaunchConfig { grid_dim: direct_grid(dims)?, block_dim: (DIRECT_THREADS, 1, 1), shared_mem_bytes: 0 };
    let name = if dims.c_out <= DIRECT_CO4 { "conv3x3_direct_co4" } else { "conv3x3_direct_co8" };
    let func = gpu.function(name)?;
    let mut b = Launch::new(gpu, func);
    b.arg(&x_ptr).arg(&w_ptr).arg(&b_ptr).arg(&y_ptr).arg(&ci).arg(&co).arg(&h_i).arg(&w_i);
    // SAFETY: argument order and types match conv3x3_direct_co4/_co8 (x, weight, bias, y, c_in,
    // c_out, h, w); `conv3x3` checked every length (x C_in·H·W, weight C_out·C_in·9, bias C_out,
    // y C_out·H·W) and that C_in·9, H·W fit i32; the kernel reads and writes only channels
    // < c_out <= its CO, with 4-byte accesses (no alignment needed) and static shared memory.
    unsafe { b.launch(cfg) }?;
    Ok(())
}

/// `y[co, h, w] = bias[co] + Σ weight[co, ci, kh, kw] · x[ci, h + kh − 1, w + kw − 1]` (pad 1,
/// stride 1, NCHW, batch 1) on tensor cores, 3xTF32 (error bound in ops/conv3x3/mod.rs); C_out
/// <= [`DIRECT_MAX_C_OUT`] on the direct f32 kernel; an under-filled GEMM with a long K in
/// [`split_k`] K ranges (stream-ordered partial buffer, merged in a fixed order with the bias).
pub fn conv3x3(
    gpu: Gpu<'_>,
    inputs: Inputs<'_, impl DevicePtr<f32>>,
    y: &mut impl DevicePtrMut<f32>,
) -> Result<(), LaunchError> {
    let Inputs { dims, x, weight, bias } = inputs;
    let ConvDims { c_in, c_out, h, w } = dims;
    if c_in == 0 || c_out == 0 || h == 0 || w == 0 {
        return Err(shape(OP, format!("empty shape {dims:?}")));
    }
    let too_big = || shape(OP, format!("shape {dims:?} overflows"));
    let pixels = h.checked_mul(w).ok_or_else(too_big)?;
    let k = c_in.checked_mul(TAPS).ok_or_else(too_big)?;
    expect_at_least(OP, "x", x.len(), c_in.checked_mul(pixels).ok_or_else(too_big)?)?;
    expect_at_least(OP, "weight", weight.len(), c_out.checked_mul(k).ok_or_else(too_big)?)?;
    expect_at_least(OP, "bias", bias.len(), c_out)?;
    expect_at_least(OP, "y", y.len(), c_out.checked_mul(pixels).ok_or_else(too_big)?)?;
    // The kernel indexes pixels and K rows in 32-bit ints and rounds C_out and H*W up to tiles.
    as_i32(OP, "H*W + one tile", pixels + TILE_N)?;
    as_i32(OP, "C_out + one tile", c_out + TILE_M)?;
    as_i32(OP, "C_in*9", k)?;
    let (ci, co, h_i, w_i) = (
        as_i32(OP, "C_in", c_in)?,
        as_i32(OP, "C_out", c_out)?,
        as_i32(OP, "H", h)?,
        as_i32(OP, "W", w)?,
    );
    let (x_ptr, _gx) = read_ptr(x, gpu.stream);
    let (w_ptr, _gw) = read_ptr(weight, gpu.stream);
    let (b_ptr, _gb) = read_ptr(bias, gpu.stream);
    let (y_ptr, _gy) = write_ptr(y, gpu.stream);
    if c_out <= DIRECT_MAX_C_OUT {
        return launch_direct(gpu, dims, [x_ptr, w_ptr, b_ptr, y_ptr], [ci, co, h_i, w_i]);
    }
    let mut cfg = tile_grid(OP, c_out, pixels, CONV_SMEM_BYTES)?;
    expect_aligned8(OP, "y", y_ptr)?;
    let splits = split_k(dims);
    if splits > 1 {
        let len = splits.checked_mul(c_out * pixels).ok_or_else(too_big)?; // C_out·H·W: y's length
        // SAFETY: gpu.stream-ordered scratch, never read before written: every split CTA row writes
        // its whole [C_out, H·W] partial (zeros for an empty K range) before the merge, queued
        // later on the same gpu.stream, reads it.
        let mut partial: CudaSlice<f32> = unsafe { gpu.stream.alloc(len) }?;
        let (p_ptr, _gp) = write_ptr(&mut partial, gpu.stream);
        let name = variant(k, &[w_ptr], "conv3x3_3xtf32_split_vec16", "conv3x3_3xtf32_split_any_c");
        let func = gpu.function(name)?;
        allow_smem(func, CONV_SMEM_BYTES)?;
        cfg.grid_dim.1 = splits as u32;
        let splits_i = splits as i32;
        let mut b = Launch::new(gpu, func);
        b.arg(&x_ptr).arg(&w_ptr).arg(&p_ptr).arg(&ci).arg(&co).arg(&h_i).arg(&w_i).arg(&splits_i);
        // SAFETY: argument order and types match conv3x3_3xtf32_split_* (x, weight, partial,
        // c_in, c_out, h, w, splits); x and weight lengths were checked above, partial holds
        // splits·C_out·H·W floats, H·W is even (split_k) so every split's partial starts 8-byte
        // aligned for the paired stores, and the CTA was granted CONV_SMEM_BYTES.
        unsafe { b.launch(cfg) }?;
        let merge = gpu.function("conv3x3_split_merge")?;
        let pixels_i = pixels as i32; // fits: checked above
        let mut b = Launch::new(gpu, merge);
        b.arg(&p_ptr).arg(&b_ptr).arg(&y_ptr).arg(&co).arg(&pixels_i).arg(&splits_i);
        let blocks = grid_stride_blocks((c_out * pixels).div_ceil(4), MERGE_THREADS);
        // SAFETY: matches conv3x3_split_merge(partial, bias, y, c_out, pixels, splits); partial
        // holds splits·C_out·H·W floats, bias C_out, y C_out·H·W (checked above).
        unsafe { b.launch(grid_1d(blocks, MERGE_THREADS)) }?;
        return Ok(());
    }
    let name = variant(k, &[w_ptr], "conv3x3_3xtf32_vec16", "conv3x3_3xtf32_any_c");
    let func = gpu.function(name)?;
    allow_smem(func, CONV_SMEM_BYTES)?;
    let mut b = Launch::new(gpu, func);
    b.arg(&x_ptr).arg(&w_ptr).arg(&b_ptr).arg(&y_ptr).arg(&ci).arg(&co).arg(&h_i).arg(&w_i);
    // SAFETY: argument order and types match conv3x3_3xtf32_* (x, weight, bias, y, c_in, c_out,
    // h, w); lengths were checked above to cover every index the kernel touches, the vec16
    // variant is chosen only for 16-byte aligned filter rows, `y` takes 8-byte stores, and the
    // CTA was granted CONV_SMEM_BYTES of shared memory.
    unsafe { b.launch(cfg) }?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn few_output_channels_take_the_direct_kernel() {
        let d = |c_out| ConvDims { c_in: 96, c_out, h: 512, w: 512 };
        assert_eq!(kernel_family(d(3)), "conv3x3_direct");
        assert_eq!(kernel_family(d(8)), "conv3x3_direct");
        assert_eq!(kernel_family(d(9)), "conv3x3_3xtf32");
        // 512² in 8 x 64 tiles: 8 x 64 = 512 CTAs (~4 per SM, one wave).
        assert_eq!(direct_grid(d(3)).expect("fits"), (8, 64, 1));
        assert_eq!(direct_grid(ConvDims { c_in: 1, c_out: 1, h: 9, w: 65 }).expect("fits"), (2, 2, 1));
        assert!(direct_grid(ConvDims { c_in: 1, c_out: 1, h: 8 * 65_536, w: 1 }).is_err());
    }

    #[test]
    fn only_underfilled_long_k_convs_split() {
        let d = |c_in, c_out, hw| ConvDims { c_in, c_out, h: hw, w: hw };
        assert_eq!(split_k(d(384, 384, 64)), 2, "96 tiles x 2 = 192 CTAs <= 264 slots");
        assert_eq!(split_k(d(32, 384, 64)), 1, "9 K tiles: too short to split");
        assert_eq!(split_k(d(384, 384, 128)), 1, "384 tiles fill the GPU");
        assert_eq!(split_k(d(96, 3, 512)), 1, "direct kernel");
        assert_eq!(split_k(ConvDims { c_in: 128, c_out: 20, h: 6, w: 8 }), 2);
        assert_eq!(split_k(ConvDims { c_in: 128, c_out: 20, h: 7, w: 7 }), 1, "odd H·W");
        assert_eq!(split_k(d(1024, 64, 8)), 4, "one tile, 288 K tiles");
    }
}

//! Launcher of `conv3x3` on tensor cores: the implicit GEMM of conv3x3.cu on the 3xTF32 tile
//! machinery of ops/gemm_f32/tile_3xtf32.cu (helpers shared with ops/gemm_f32/cuda.rs).

use std::sync::Arc;

use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};

use crate::cuda::KernelLibrary;
use crate::launch::gemm_f32::{
    allow_smem, expect_aligned8, tile_grid, variant, ROWS_TILE_BYTES, STAGES, TILE_K, TILE_M,
    TILE_N,
};
use crate::launch::{as_i32, expect_at_least, read_ptr, shape, write_ptr, LaunchError};
use crate::launch_ex::Launch;
use crate::ops::conv3x3::{ConvDims, TAPS};

/// Padding floats per k row of the gathered pixel tile (CONV3X3_B_STRIDE = TILE_N + 8).
pub const B_ROW_PAD: usize = 8;
/// Dynamic shared memory of one conv3x3 CTA: filter tile + gathered pixel tile per stage.
pub const CONV_SMEM_BYTES: usize = STAGES * (ROWS_TILE_BYTES + TILE_K * (TILE_N + B_ROW_PAD) * 4);

const OP: &str = "conv3x3";

/// `y[co, h, w] = bias[co] + Σ weight[co, ci, kh, kw] · x[ci, h + kh − 1, w + kw − 1]` (pad 1,
/// stride 1, NCHW, batch 1) on tensor cores, 3xTF32 (error bound in ops/conv3x3/mod.rs).
pub fn conv3x3(
    lib: &KernelLibrary,
    stream: &Arc<CudaStream>,
    dims: ConvDims,
    x: &impl DevicePtr<f32>,
    weight: &impl DevicePtr<f32>,
    bias: &impl DevicePtr<f32>,
    y: &mut impl DevicePtrMut<f32>,
) -> Result<(), LaunchError> {
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
    let cfg = tile_grid(OP, c_out, pixels, CONV_SMEM_BYTES)?;
    let (x_ptr, _gx) = read_ptr(x, stream);
    let (w_ptr, _gw) = read_ptr(weight, stream);
    let (b_ptr, _gb) = read_ptr(bias, stream);
    let (y_ptr, _gy) = write_ptr(y, stream);
    expect_aligned8(OP, "y", y_ptr)?;
    let name = variant(k, &[w_ptr], "conv3x3_3xtf32_vec16", "conv3x3_3xtf32_any_c");
    let func = lib.function(name)?;
    allow_smem(func, CONV_SMEM_BYTES)?;
    let mut b = Launch::new(stream, func);
    b.arg(&x_ptr).arg(&w_ptr).arg(&b_ptr).arg(&y_ptr).arg(&ci).arg(&co).arg(&h_i).arg(&w_i);
    // SAFETY: argument order and types match conv3x3_3xtf32_* (x, weight, bias, y, c_in, c_out,
    // h, w); lengths were checked above to cover every index the kernel touches, the vec16
    // variant is chosen only for 16-byte aligned filter rows, `y` takes 8-byte stores, and the
    // CTA was granted CONV_SMEM_BYTES of shared memory.
    unsafe { b.launch(cfg) }?;
    Ok(())
}

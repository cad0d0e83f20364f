//! `conv3x3`: 3x3 convolution, padding 1, stride 1, with bias (the VAE decoder's convs):
//! `y[co, h, w] = bias[co] + Σ_{ci, kh, kw} weight[co, ci, kh, kw] · x[ci, h + kh − 1, w + kw − 1]`,
//! with x read as 0 outside the image.
//!
//! Shapes (batch 1, NCHW): `x: [Cin, H, W]`, `weight: [Cout, Cin, 3, 3]` (PyTorch layout),
//! `bias: [Cout]`, `y: [Cout, H, W]`; all dimensions > 0.
//! Accumulation: reference in f64; CPU in f32 over `LANES` = 8 interleaved accumulators.
//!
//! Tolerance (tests.rs): each output is a dot product of 9·Cin products plus the bias, an f32
//! summation tree of height <= 9·Cin + LANES + 2, so it errs by at most
//! γ_{9·Cin+LANES+2}·(Σ|x·w| + |bias|) (padding terms are exact zeros); the reference's
//! rounding to f32 adds u·|y|.
//!
//! CPU: implicit GEMM tiled over (output row, [`PIXEL_TILE`]-pixel run): each rayon task
//! gathers only its tile's patches (PIXEL_TILE × 9·Cin floats), never the whole image's im2col
//! buffer, then dots every output channel's filter against them.
//!
//! CUDA (`launch::conv3x3::conv3x3`, conv3x3.cu): implicit GEMM on the 3xTF32 tile machinery of
//! ops/gemm_f32/tile_3xtf32.cu, M = C_out (filters as K-contiguous rows), N = H·W pixels,
//! K = 9·C_in with k = ci·9 + kh·3 + kw. No patch buffer: each pipeline stage gathers its
//! [32 k][128 pixels] tile straight from x into shared memory with 4-byte cp.async (a plain 0
//! for padding taps). Error bound: the GEMM's with K = 9·C_in, i.e.
//! `(2·⌈9·C_in/32⌉ + 38)·u·Σ|x·w| + u·|bias|` (derivation in ops/gemm_f32/mod.rs), against a
//! plain f32 conv's worst case `γ_{9·C_in}·Σ|x·w|`; verify/image_gemm.rs checks it per element
//! and the relative Frobenius error within 2x of a sequential-FMA f32 conv.
//! C_out <= 8 (the VAE's conv_out, 96 -> 3) runs a direct f32 convolution instead
//! (conv3x3_direct.cu: no 128-row tile of padding filters; blocked FMA sums with error
//! <= γ_{72 + ⌈C_in/8⌉}·Σ|x·w|, derivation and predicted time in its header).
//! Speed of light: as the GEMM (~100-110 TFLOP/s effective on the H200 with mma.sync); target:
//! at least cuDNN fp32's 29.5-30.6 TFLOP/s at 384 ch 128²-256² and 192 ch 512². Not yet measured.
//! Static evidence (as for the GEMM): 128 registers, `_vec16` spills 116 bytes (11 LDL + 9 STL
//! per K step), `_any_c` 408; shared memory 99 KiB per CTA (3 × (16 KiB filters + 17 KiB
//! pixels, rows padded by 8 floats)), 2 CTAs per SM; main loop ~1450 SASS instructions per K step
//! of 32 per warp (1349 with the gather's 8-row body once, which runs twice), 192 of them HMMA.

mod cpu;
mod reference;
#[cfg(test)]
mod tests;

pub use cpu::{cpu, cpu_at, PIXEL_TILE};
pub use reference::reference;

use crate::ops::{check_len, OpError};

/// The op's name in error messages.
pub(crate) const OP: &str = "conv3x3";

/// Taps per input channel (3 × 3).
pub(crate) const TAPS: usize = 9;

/// Tensor sizes of one convolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvDims {
    pub c_in: usize,
    pub c_out: usize,
    pub h: usize,
    pub w: usize,
}

/// One call's inputs: the image, filters and bias (host slices; device buffers for the CUDA
/// launcher).
#[derive(Debug)]
pub struct Inputs<'a, T: ?Sized = [f32]> {
    pub dims: ConvDims,
    /// `x: [C_in, H, W]`.
    pub x: &'a T,
    /// `weight: [C_out, C_in, 3, 3]`.
    pub weight: &'a T,
    /// `bias: [C_out]`.
    pub bias: &'a T,
}

impl<T: ?Sized> Clone for Inputs<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: ?Sized> Copy for Inputs<'_, T> {}

/// Checks every length against `dims` and that no dimension is zero.
pub(crate) fn check_shapes(inputs: &Inputs<'_>, y: &[f32]) -> Result<(), OpError> {
    let Inputs { dims, x, weight, bias } = *inputs;
    let ConvDims { c_in, c_out, h, w } = dims;
    if c_in == 0 || c_out == 0 || h == 0 || w == 0 {
        return Err(OpError::Shape { op: OP, detail: format!("empty shape {dims:?}") });
    }
    let too_big = || OpError::Shape { op: OP, detail: format!("shape {dims:?} overflows usize") };
    let plane = h.checked_mul(w).ok_or_else(too_big)?;
    check_len(OP, "x", c_in.checked_mul(plane).ok_or_else(too_big)?, x.len())?;
    let filters = c_out.checked_mul(c_in).and_then(|v| v.checked_mul(TAPS)).ok_or_else(too_big)?;
    check_len(OP, "weight", filters, weight.len())?;
    check_len(OP, "bias", c_out, bias.len())?;
    check_len(OP, "y", c_out.checked_mul(plane).ok_or_else(too_big)?, y.len())
}

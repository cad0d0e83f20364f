//! The kernels verify and bench run for a quantized matmul (the one-token GEMVs, the GEMMs), how
//! to launch each, and gemv_b1's quantization bound.

use super::gpu::DeviceQMatrix;
use super::matmul::{abs_matrix, par_reference};
use super::{Ctx, VerifyError, F32_UNIT_ROUNDOFF as U};
use crate::launch;
use crate::launch::matmul::{Epilogue, GemmKernel, GemvKernel, WgmmaTile, GEMV_MAX_TOKENS};
use crate::ops::{OpError, Store};
use crate::weights::{QMatrix, GROUP};

/// A kernel of the quantized matmul: a decode GEMV or a GEMM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MatmulKernel {
    Gemv(GemvKernel),
    Gemm(GemmKernel),
}

impl MatmulKernel {
    /// The binary GEMVs (one token, or several: [`GemmKernel::BinaryTokens`]): x quantized per
    /// token into bit planes, whose bound carries the quantization term.
    pub(crate) fn is_binary(self) -> bool {
        matches!(self, MatmulKernel::Gemv(GemvKernel::Binary) | MatmulKernel::Gemm(GemmKernel::BinaryTokens))
    }
}

/// The kernels that serve m tokens, each checked on the same inputs: both one-token GEMVs, or
/// every GEMM this device runs: the small-m one up to its token limit, the f16 one where its
/// tiles fit the shared memory (not on sm_86/89/120), and the wgmma one on compute capability 9.0
/// (the emulator's by default).
pub(crate) fn kernels_for(ctx: &Ctx, m: usize) -> Result<Vec<MatmulKernel>, VerifyError> {
    Ok(match m {
        1 => vec![MatmulKernel::Gemv(GemvKernel::Binary), MatmulKernel::Gemv(GemvKernel::Bf16x3)],
        _ => {
            let mut gemms = vec![GemmKernel::TensorCoreBf16x3];
            if launch::matmul::f16_gemm_runs(&ctx.stream)? {
                gemms.insert(0, GemmKernel::TensorCoreF16);
            }
            if launch::matmul::device_has_wgmma(&ctx.stream)? {
                // Every tile forced (each its own entry point; the launcher's choice is one of
                // them, and matmul_large runs that choice at the DiT shapes).
                gemms.splice(gemms.len() - 1..gemms.len() - 1, WgmmaTile::ALL.map(GemmKernel::TensorCoreWgmmaTile));
            }
            if m <= launch::matmul::SMALL_M_MAX_TOKENS {
                gemms.insert(0, GemmKernel::TensorCoreSmall);
            }
            if m <= launch::matmul::B1_MAX_TOKENS {
                gemms.insert(0, GemmKernel::BinaryTokens);
            }
            gemms.into_iter().map(MatmulKernel::Gemm).collect()
        }
    })
}

pub(crate) fn kernel_label(kernel: MatmulKernel) -> &'static str {
    match kernel {
        MatmulKernel::Gemv(GemvKernel::Binary) => "gemv_b1",
        MatmulKernel::Gemv(GemvKernel::Bf16x3) => "gemv_tc",
        MatmulKernel::Gemm(GemmKernel::TensorCoreF16) => "gemm_f16",
        MatmulKernel::Gemm(GemmKernel::TensorCoreF16Splits(1)) => "gemm_f16_unsplit",
        MatmulKernel::Gemm(GemmKernel::TensorCoreF16Splits(2)) => "gemm_f16_split2",
        MatmulKernel::Gemm(GemmKernel::TensorCoreF16Splits(3)) => "gemm_f16_split3",
        MatmulKernel::Gemm(GemmKernel::TensorCoreF16Splits(4)) => "gemm_f16_split4",
        MatmulKernel::Gemm(GemmKernel::TensorCoreF16Splits(8)) => "gemm_f16_split8",
        MatmulKernel::Gemm(GemmKernel::TensorCoreF16Splits(16)) => "gemm_f16_split16",
        MatmulKernel::Gemm(GemmKernel::TensorCoreF16Splits(_)) => "gemm_f16_splitn",
        MatmulKernel::Gemm(GemmKernel::TensorCoreWgmma) => "gemm_wgmma",
        MatmulKernel::Gemm(GemmKernel::TensorCoreWgmmaTile(WgmmaTile::Tokens128)) => "gemm_wgmma_128",
        MatmulKernel::Gemm(GemmKernel::TensorCoreWgmmaTile(WgmmaTile::Tokens64)) => "gemm_wgmma_64",
        MatmulKernel::Gemm(GemmKernel::TensorCoreWgmmaTile(WgmmaTile::Tokens256)) => "gemm_wgmma_256",
        MatmulKernel::Gemm(GemmKernel::TensorCoreBf16x3) => "gemm_mma",
        MatmulKernel::Gemm(GemmKernel::TensorCoreSmall) => "gemm_small",
        MatmulKernel::Gemm(GemmKernel::BinaryTokens) => "gemv_b1_tokens",
    }
}

/// Runs `kernel` on m tokens: `y (=|+=) [RMSNorm](x) . W^T` or the SwiGLU of gate|up (`norm`:
/// the fused RMSNorm's weights and eps).
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_kernel(
    ctx: &Ctx,
    kernel: MatmulKernel,
    w: &DeviceQMatrix,
    x: &cudarc::driver::CudaSlice<f32>,
    norm: Option<(&cudarc::driver::CudaSlice<f32>, f32)>,
    m: usize,
    y: &mut cudarc::driver::CudaSlice<f32>,
    epilogue: Epilogue,
) -> Result<(), VerifyError> {
    let (gpu, view) = (ctx.gpu(), w.view());
    match (kernel, norm) {
        (MatmulKernel::Gemv(gemv), _) if m == 1 => launch::matmul::gemv_with(gpu, &view, x, norm, y, epilogue, gemv)?,
        (MatmulKernel::Gemm(gemm), Some((nw, eps))) if m > GEMV_MAX_TOKENS => {
            launch::matmul::rms_norm_matmul_with(gpu, &view, x, nw, eps, m, y, epilogue, Some(gemm))?
        }
        (_, Some((nw, eps))) => launch::matmul::rms_norm_matmul(gpu, &view, x, nw, eps, m, y, epilogue)?,
        (kernel, None) => {
            let gemm = match kernel {
                MatmulKernel::Gemm(g) => g,
                MatmulKernel::Gemv(_) => GemmKernel::TensorCoreBf16x3, // unused at m <= GEMV_MAX_TOKENS
            };
            launch::matmul::matmul(gpu, &view, x, m, y, epilogue, Some(gemm))?
        }
    }
    Ok(())
}

/// gemv_b1's quantization step s_G of every 128-group of the x it stages (matmul_gemv_b1.cu):
/// s_G = 2^(E - B1_PLANES + 2) with E = (biased exponent of max|x_G|) - 126, at least
/// B1_MIN_EXP. Each staged value is off by at most s_G / 2.
pub(crate) fn b1_group_steps(x: &[f32]) -> Vec<f32> {
    const B1_PLANES: i32 = launch::matmul::B1_ACTIVATION_BITS as i32;
    use launch::matmul::B1_MIN_EXP;
    x.chunks(GROUP)
        .map(|g| {
            let amax = g.iter().fold(0.0f32, |a, v| a.max(v.abs()));
            let e = (((amax.to_bits() >> 23) & 0xff) as i32 - 126).max(B1_MIN_EXP);
            2f32.powi(e - B1_PLANES + 2)
        })
        .collect()
}

/// [`b1_quant_bound`] of each of the m token rows of x, [m][N] (the binary GEMVs quantize each
/// token on its own), where one of `kernels` is binary; zeros (unread) otherwise, so the large-m
/// cases compute no per-row bound they do not use.
pub(crate) fn b1_quant_bound_rows(w: &QMatrix, x: &[f32], m: usize, kernels: &[MatmulKernel]) -> Result<Vec<f32>, OpError> {
    if !kernels.iter().any(|k| k.is_binary()) {
        return Ok(vec![0.0; m * w.n()]);
    }
    let k = w.k();
    let mut out = Vec::with_capacity(m * w.n());
    for row in x.chunks(k).take(m) {
        out.extend(b1_quant_bound(w, row)?);
    }
    Ok(out)
}

/// gemv_b1's quantization error bound per output of one token: sum_G (s_G / 2) sum_{k in G} |W[n, k]|,
/// rounded up for the reference's own f32 rounding.
pub(crate) fn b1_quant_bound(w: &QMatrix, staged_x: &[f32]) -> Result<Vec<f32>, OpError> {
    let half_steps: Vec<f32> = b1_group_steps(staged_x).iter().flat_map(|&s| std::iter::repeat_n(s / 2.0, GROUP)).collect();
    let q = par_reference(&abs_matrix(w), &half_steps, 1, &vec![0.0; w.n()], Store::Overwrite)?;
    Ok(q.into_iter().map(|v| v * (1.0 + 4.0 * U as f32)).collect())
}

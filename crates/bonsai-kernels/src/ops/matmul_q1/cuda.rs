//! Launchers of every quantized matmul (1-bit and 2-bit, plain / fused residual / fused gate|up
//! SwiGLU). Kernels: matmul_gemv_b1.cu + matmul_gemv_tc.cu + matmul_gemm.cu + matmul_gemm_f16.cu (templates),
//! matmul_q1.cu, matmul_q2.cu, gate_up_swiglu_q*.cu (entry points).
//! m == 1 -> `*_gemv_b1` (binary tensor core, [`GemvKernel::Binary`], geometry from
//! [`b1_geometry`]; `*_gemv_tc` for Q2 matrices with +2d codes, [`gemv_for`], [`tc_geometry`]);
//! 2..=[`B1_MAX_TOKENS`] -> `gemv_b1_prepare` of every row + `*_gemv_b1_t{2,4,8}` where the
//! binary GEMV takes the matrix ([`GemmKernel::BinaryTokens`]); otherwise
//! m >= [`F16_GEMM_MIN_TOKENS`] (2) -> `x_to_f16_rows_q*` + an f16 GEMM: `*_gemm_small{8,16,32}` up
//! to [`SMALL_M_MAX_TOKENS`] ([`GemmKernel::TensorCoreSmall`]), past that the wgmma GEMM on compute
//! capability 9.0, else `*_gemm_f16_128x{128,256}` ([`GemmKernel::TensorCoreF16`]), which yields
//! to bf16x3 on devices whose shared memory cannot hold its tiles.
//!
//! The f16 GEMM needs m·K f16 + m f32 of scratch for the converted activations; the launcher
//! allocates it stream-ordered (`cuMemAllocAsync` from the context's pool, freed on the stream
//! after the GEMM), so no caller-visible buffer is needed and graph capture still works.

use std::sync::Arc;

use cudarc::driver::sys::CUfunction_attribute;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut, LaunchConfig};

use super::matmul_f16::{F16Input, F16Shape};
pub use super::matmul_f16::F16Rows;
pub use super::matmul_wgmma::{device_has_wgmma, WgmmaTile};
pub(crate) use super::matmul_wgmma::require_wgmma;
use crate::launch_ex::Launch;
use crate::launch::{Gpu, 
    as_i32, expect_aligned16, expect_at_least, read_ptr, shape, write_ptr, LaunchError, QWeightsView,
    QuantBits, Store,
};

/// Largest m served by the GEMV kernels (GEMV_MAX_TOKENS in matmul_gemv.cu): one token. From
/// two on the small-m GEMM reads each weight once for all of them, which the GEMVs' per-token
/// staging did not (docs/kernel-notes.md, "Small batches: the small-m GEMM").
pub const GEMV_MAX_TOKENS: usize = 1;
const MMA_TILE_ROWS: usize = 64;
const MMA_TILE_TOKENS: usize = 32;
const MMA_THREADS: u32 = 128;
/// Smallest m served by the f16 GEMMs: every m past the GEMV. The f16 tile GEMM beat bf16x3 (3
/// mma per product, too few CTAs at small m) from m = 16 on, by over 2x at 16 and 32 tokens
/// (docs/kernel-notes.md, "Small-m GEMM: f16 from 9 tokens"); bf16x3 stays the tile GEMM of
/// devices whose shared memory cannot hold the f16 tiles.
pub const F16_GEMM_MIN_TOKENS: usize = GEMV_MAX_TOKENS + 1;

/// Whether [`GemmKernel::TensorCoreF16`] runs on this device at every shape, tile and split
/// count: its largest CTA fits the opt-in shared memory (sm_80, sm_90, sm_100; not the 99 KB of
/// sm_86/89/120, where the default GEMM for m >= [`F16_GEMM_MIN_TOKENS`] is bf16x3 instead).
/// Callers that force the f16 GEMM (verify, bench) check this first.
pub fn f16_gemm_runs(stream: &Arc<CudaStream>) -> Result<bool, LaunchError> {
    super::matmul_f16::fits_every_tile(stream)
}

/// Tokens per f16 GEMM CTA (QG_TILE_TOKENS in matmul_gemm_f16.cu).
pub(crate) const QG_TILE_TOKENS: usize = 128;
/// Weight rows per warp column of the f16 GEMM (QG_WARP_ROWS); a CTA has 2 x WARPS_N warps.
pub(crate) const QG_WARP_ROWS: usize = 64;
/// cp.async ring stages of the f16 GEMM (QG_STAGES).
pub(crate) const QG_STAGES: usize = 3;
/// Threads of the activation pre-pass (QG_PREP_THREADS).
pub(crate) const QG_PREP_THREADS: u32 = 256;
/// The narrow (128 x 128, 4 warps, 2 CTAs per SM) and wide (128 x 256, 8 warps) f16 GEMM tiles.
pub(crate) const QG_NARROW_WARPS_N: usize = 2;
pub(crate) const QG_WIDE_WARPS_N: usize = 4;
/// The wide tile halves the activation traffic per FLOP but runs one CTA per SM; it is used when
/// its grid still fills this many waves of SMs (fewer, and the narrow tile's finer grid wastes
/// less of the last wave).
pub(crate) const QG_WIDE_MIN_WAVES: usize = 2;

/// Which GEMM serves m > GEMV_MAX_TOKENS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GemmKernel {
    /// mma.sync f16, f32 accumulate: each token row of x scaled by a power of two 2^e that puts
    /// its max |x| in [2^14, 2^15) and rounded to f16 (relative error <= 2^-11 per element),
    /// weights exact in f16 as (code value)·d; the result is scaled back by 2^-e (exact).
    TensorCoreF16,
    /// [`GemmKernel::TensorCoreF16`] with exactly this many K splits instead of the launcher's
    /// choice: 1 = the unsplit kernels with the default tile, n >= 2 = the narrow split-K kernel
    /// (clamped to one split per 128-group). Bench and verify force the schedule with it.
    TensorCoreF16Splits(usize),
    /// The same f16 numerics on Hopper's warpgroup MMA (wgmma, sm_90a): weights decoded into
    /// registers as the A operand, activations from shared memory (matmul_gemm_wgmma.cu). The
    /// default f16 GEMM on compute capability 9.0.
    TensorCoreWgmma,
    /// [`GemmKernel::TensorCoreWgmma`] with this CTA tile instead of the launcher's choice.
    TensorCoreWgmmaTile(WgmmaTile),
    /// mma.sync bf16 with activations split into three bf16 parts (f32-level accuracy).
    TensorCoreBf16x3,
    /// The f16 numerics for 2..=[`SMALL_M_MAX_TOKENS`] tokens (a batched decode step): each warp
    /// streams its weight rows into registers as the one-token GEMV does and runs mma.sync on
    /// them with the tokens as 8, 16 or 32 columns (matmul_gemm_small.cu). The default there on
    /// every device past [`b1_tokens_default_max`] tokens or for matrices the binary GEMV does not
    /// take.
    TensorCoreSmall,
    /// 2..=[`B1_MAX_TOKENS`] tokens on the one-token binary GEMV's weight stream (`*_gemv_b1_t2`,
    /// `_t4`, `_t8`): every token's x quantized as the one-token GEMV quantizes it, the weights read
    /// once for all of them (matmul_gemv_b1.cu). The default up to [`b1_tokens_default_max`]
    /// tokens for every matrix the binary GEMV takes ([`gemv_for`]).
    BinaryTokens,
}

impl GemmKernel {
    /// For the wgmma GEMM: Some(forced tile, None = the launcher's choice); else None.
    pub(crate) fn wgmma_tile(self) -> Option<Option<WgmmaTile>> {
        match self {
            GemmKernel::TensorCoreWgmma => Some(None),
            GemmKernel::TensorCoreWgmmaTile(tile) => Some(Some(tile)),
            _ => None,
        }
    }
    /// For the f16 GEMM: Some(forced split count, None = the launcher's choice); else None.
    pub(crate) fn f16_splits(self) -> Option<Option<usize>> {
        match self {
            GemmKernel::TensorCoreF16 => Some(None),
            GemmKernel::TensorCoreF16Splits(n) => Some(Some(n)),
            GemmKernel::TensorCoreWgmma
            | GemmKernel::TensorCoreWgmmaTile(_)
            | GemmKernel::TensorCoreSmall
            | GemmKernel::BinaryTokens
            | GemmKernel::TensorCoreBf16x3 => None,
        }
    }
    /// Whether the GEMM runs the f16 pre-pass (the f16 numerics; it also fuses a RMSNorm).
    pub(crate) fn is_f16(self) -> bool {
        self.f16_splits().is_some() || self.wgmma_tile().is_some() || self == GemmKernel::TensorCoreSmall
    }
    /// Whether the kernel applies a RMSNorm of x itself (the f16 pre-pass, or the binary GEMV's
    /// planes with their sums of squares); bf16x3 needs the normed rows written first.
    fn fuses_norm(self) -> bool {
        self.is_f16() || self == GemmKernel::BinaryTokens
    }
}

pub use super::matmul_b1::B1_MAX_TOKENS;

/// Most tokens the default path gives the multi-token binary GEMV for `bits`-bit weights: past
/// them the small-m GEMM's step measured cheaper (1-bit at 8 tokens; docs/kernel-notes.md, "Small
/// batches: the multi-token binary GEMV").
pub fn b1_tokens_default_max(bits: QuantBits) -> usize {
    match bits {
        QuantBits::One => 7,
        QuantBits::Two => B1_MAX_TOKENS,
    }
}

/// The GEMM for m > GEMV_MAX_TOKENS tokens of `w` when the caller does not choose one: the
/// multi-token binary GEMV up to [`b1_tokens_default_max`] where the binary GEMV takes the
/// matrix, else the f16 GEMMs' choice ([`super::matmul_f16::auto_gemm`]).
fn batched_gemm(gpu: Gpu<'_>, w: &QWeightsView<'_>, shape: &F16Shape) -> Result<GemmKernel, LaunchError> {
    if shape.m <= b1_tokens_default_max(w.bits) && gemv_for(w) == GemvKernel::Binary {
        return Ok(GemmKernel::BinaryTokens);
    }
    super::matmul_f16::auto_gemm(gpu.stream, shape)
}

/// Most tokens the small-m GEMM ([`GemmKernel::TensorCoreSmall`]) serves (SM_MAX_TOKENS).
pub const SMALL_M_MAX_TOKENS: usize = 32;

/// The GEMM [`matmul`] and [`gate_up_swiglu`] use for m tokens (m > GEMV_MAX_TOKENS) on a device
/// whose shared memory holds the f16 GEMM's tiles (sm_80, sm_90; else bf16x3).
pub fn default_gemm(m: usize) -> GemmKernel {
    if m >= F16_GEMM_MIN_TOKENS {
        GemmKernel::TensorCoreF16
    } else {
        GemmKernel::TensorCoreBf16x3
    }
}

/// How a matmul's result leaves the kernel (MATMUL_* in matmul_gemv_tc.cu).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Epilogue {
    Store,
    Add,
    SwiGlu,
}

impl Epilogue {
    /// The op named in this launch's errors.
    pub(crate) fn op_name(self) -> &'static str {
        if self == Epilogue::SwiGlu {
            "gate_up_swiglu"
        } else {
            "matmul"
        }
    }
}

/// `wide`: the f16 GEMM's 128 x 256 tile.
pub(crate) fn kernel_name(
    bits: QuantBits,
    epilogue: Epilogue,
    m: usize,
    gemv: GemvKernel,
    gemm: GemmKernel,
    wide: bool,
) -> String {
    let prefix = match (bits, epilogue) {
        (QuantBits::One, Epilogue::Store) => "matmul_q1",
        (QuantBits::One, Epilogue::Add) => "matmul_q1_add",
        (QuantBits::One, Epilogue::SwiGlu) => "gate_up_swiglu_q1",
        (QuantBits::Two, Epilogue::Store) => "matmul_q2",
        (QuantBits::Two, Epilogue::Add) => "matmul_q2_add",
        (QuantBits::Two, Epilogue::SwiGlu) => "gate_up_swiglu_q2",
    };
    let variant = match m {
        1 if gemv == GemvKernel::Binary => "gemv_b1",
        1 => "gemv_tc",
        _ => match gemm {
            GemmKernel::TensorCoreF16 | GemmKernel::TensorCoreF16Splits(_) if wide => "gemm_f16_128x256",
            GemmKernel::TensorCoreF16 | GemmKernel::TensorCoreF16Splits(_) => "gemm_f16_128x128",
            GemmKernel::TensorCoreWgmma | GemmKernel::TensorCoreWgmmaTile(_) => "gemm_wgmma",
            GemmKernel::TensorCoreSmall if m <= 8 => "gemm_small8",
            GemmKernel::TensorCoreSmall if m <= 16 => "gemm_small16",
            GemmKernel::TensorCoreSmall => "gemm_small32",
            GemmKernel::BinaryTokens => return format!("{prefix}_gemv_b1{}", super::matmul_b1::tokens_kernel(m).1),
            GemmKernel::TensorCoreBf16x3 => "gemm_mma_bf16x3",
        },
    };
    format!("{prefix}_{variant}")
}

/// `y[m, N] (=|+=) x[m, K] . W^T` (`epilogue` Store or Add: overwrite or the fused residual
/// add), or with [`Epilogue::SwiGlu`] `y[m, F] = silu(x . Wg^T) * (x . Wu^T)` for
/// `W = [gate rows | up rows]`, `N = 2F`. `gemm` picks the GEMM kernel for m > GEMV_MAX_TOKENS
/// (None: the default for m).
pub fn matmul(
    gpu: Gpu<'_>,
    w: &QWeightsView<'_>,
    x: &impl DevicePtr<f32>,
    m: usize,
    y: &mut impl DevicePtrMut<f32>,
    epilogue: Epilogue,
    gemm: Option<GemmKernel>,
) -> Result<(), LaunchError> {
    let n_out = outputs(w, epilogue)?;
    launch_any(gpu, w, x, m, y, epilogue, n_out, gemm, None, None)
}

impl From<Store> for Epilogue {
    fn from(store: Store) -> Self {
        match store {
            Store::Overwrite => Epilogue::Store,
            Store::Add => Epilogue::Add,
        }
    }
}

/// [`matmul`] of `RMSNorm(x; norm_w, eps)` (x * rsqrt(mean(x^2) + eps) * norm_w, as rms_norm),
/// without the normed rows in global memory: up to GEMV_MAX_TOKENS tokens the GEMV normalises x
/// while staging it; past that the f16 GEMMs' pre-pass normalises each row (bit for bit the
/// rms_norm kernel then the plain pre-pass). The bf16x3 GEMM (devices whose shared memory holds
/// no f16 tile) has no pre-pass: there the rms_norm kernel writes the normed rows first.
#[allow(clippy::too_many_arguments)]
pub fn rms_norm_matmul(
    gpu: Gpu<'_>,
    w: &QWeightsView<'_>,
    x: &impl DevicePtr<f32>,
    norm_w: &impl DevicePtr<f32>,
    eps: f32,
    m: usize,
    y: &mut impl DevicePtrMut<f32>,
    epilogue: Epilogue,
) -> Result<(), LaunchError> {
    rms_norm_matmul_with(gpu, w, x, norm_w, eps, m, y, epilogue, None)
}

/// [`rms_norm_matmul`] with the GEMM kernel for m > GEMV_MAX_TOKENS given (None: the default;
/// verify runs each).
#[allow(clippy::too_many_arguments)]
pub(crate) fn rms_norm_matmul_with(
    gpu: Gpu<'_>,
    w: &QWeightsView<'_>,
    x: &impl DevicePtr<f32>,
    norm_w: &impl DevicePtr<f32>,
    eps: f32,
    m: usize,
    y: &mut impl DevicePtrMut<f32>,
    epilogue: Epilogue,
    gemm: Option<GemmKernel>,
) -> Result<(), LaunchError> {
    let op = epilogue.op_name();
    let n_out = outputs(w, epilogue)?;
    let mut gemm = gemm;
    if m > GEMV_MAX_TOKENS {
        let chosen = match gemm {
            Some(g) => g,
            None => batched_gemm(gpu, w, &F16Shape { bits: w.bits, epilogue, m, n_out, k: w.k })?,
        };
        if !chosen.fuses_norm() {
            // SAFETY: stream-ordered, uninitialised; rms_norm writes all m x K values before the
            // matmul, later on the same stream, reads them.
            let mut xn: CudaSlice<f32> = unsafe { gpu.stream.alloc(m * w.k) }?;
            crate::launch::rms_norm::rms_norm(gpu, x, norm_w, eps, m, w.k, &mut xn)?;
            return launch_any(gpu, w, &xn, m, y, epilogue, n_out, Some(chosen), None, None);
        }
        gemm = Some(chosen);
    }
    let (norm, _guard) = norm_arg(op, norm_w, w.k, gpu.stream)?;
    launch_any(gpu, w, x, m, y, epilogue, n_out, gemm, None, Some((norm, eps)))
}

/// A one-token GEMV with an explicit kernel (verify and bench compare both): `y (=|+=)
/// [RMSNorm](x) . W^T` (`epilogue` Store / Add) or the SwiGLU of a gate|up matrix (`y` then
/// holds N / 2 outputs).
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemv_with(
    gpu: Gpu<'_>,
    w: &QWeightsView<'_>,
    x: &impl DevicePtr<f32>,
    norm: Option<(&cudarc::driver::CudaSlice<f32>, f32)>,
    y: &mut impl DevicePtrMut<f32>,
    epilogue: Epilogue,
    gemv: GemvKernel,
) -> Result<(), LaunchError> {
    let n_out = outputs(w, epilogue)?;
    match norm {
        Some((norm_w, eps)) => {
            let op = epilogue.op_name();
            let (ptr, _guard) = norm_arg(op, norm_w, w.k, gpu.stream)?;
            launch_any(gpu, w, x, 1, y, epilogue, n_out, None, Some(gemv), Some((ptr, eps)))
        }
        None => launch_any(gpu, w, x, 1, y, epilogue, n_out, None, Some(gemv), None),
    }
}

/// The norm weights' pointer for a fused launch: K values, 8-byte aligned (the GEMVs' float2
/// loads; the GEMM pre-pass checks its own 16 bytes).
fn norm_arg<'a>(
    op: &'static str,
    norm_w: &'a impl DevicePtr<f32>,
    k: usize,
    stream: &'a Arc<CudaStream>,
) -> Result<(u64, cudarc::driver::SyncOnDrop<'a>), LaunchError> {
    expect_at_least(op, "norm weights", norm_w.len(), k)?;
    let (ptr, guard) = read_ptr(norm_w, stream);
    if ptr % 8 != 0 {
        return Err(shape(op, "norm weights must start on an 8-byte boundary".into()));
    }
    Ok((ptr, guard))
}

/// Outputs per token: N, or F = N / 2 for the SwiGLU of a gate|up matrix (N must be even).
fn outputs(w: &QWeightsView<'_>, epilogue: Epilogue) -> Result<usize, LaunchError> {
    if epilogue != Epilogue::SwiGlu {
        return Ok(w.n);
    }
    if w.n % 2 != 0 {
        return Err(shape("gate_up_swiglu", format!("fused gate|up matrix has odd N = {}", w.n)));
    }
    Ok(w.n / 2)
}

#[allow(clippy::too_many_arguments)]
fn launch_any(
    gpu: Gpu<'_>,
    w: &QWeightsView<'_>,
    x: &impl DevicePtr<f32>,
    m: usize,
    y: &mut impl DevicePtrMut<f32>,
    epilogue: Epilogue,
    n_out: usize,
    gemm: Option<GemmKernel>,
    gemv: Option<GemvKernel>,
    norm: Option<(u64, f32)>,
) -> Result<(), LaunchError> {
    let op = epilogue.op_name();
    w.validate(op)?;
    if m == 0 {
        return Err(shape(op, "m = 0 tokens".into()));
    }
    expect_at_least(op, "x", x.len(), m * w.k)?;
    expect_at_least(op, "y", y.len(), m * n_out)?;
    let (m_i, n_i, k_i) = (as_i32(op, "m", m)?, as_i32(op, "n_out", n_out)?, as_i32(op, "K", w.k)?);
    as_i32(op, "N*K/32", w.n * w.k / 32)?;
    let (scales, _g0) = read_ptr(w.scales, gpu.stream);
    let (payload, _g1) = read_ptr(w.payload, gpu.stream);
    let (x_ptr, _g2) = read_ptr(x, gpu.stream);
    expect_aligned16(op, "x", x_ptr)?;
    let (y_ptr, _g3) = write_ptr(y, gpu.stream);
    let f16_shape = F16Shape { bits: w.bits, epilogue, m, n_out, k: w.k };
    // None: the default for m, except that the f16 GEMM yields to bf16x3 on devices whose
    // shared memory cannot hold its tiles (sm_86/89/120: 99 KB holds none of them).
    let gemm = match gemm {
        Some(g) => g,
        None if m > GEMV_MAX_TOKENS => batched_gemm(gpu, w, &f16_shape)?,
        None => default_gemm(m),
    };
    let io = (scales, payload, x_ptr, y_ptr);
    if m > GEMV_MAX_TOKENS && gemm == GemmKernel::BinaryTokens {
        check_gemv_weight_alignment(op, payload, scales)?;
        w.require_binary_gemv(op)?;
        return super::matmul_b1::launch_tokens(gpu, w.bits, epilogue, n_out, w.k, m, io, norm);
    }
    if m > GEMV_MAX_TOKENS && gemm.is_f16() {
        return launch_f16(gpu, f16_shape, gemm, io, F16Input::Rows { norm });
    }
    let gemv = match gemv {
        Some(g) => g,
        None => gemv_for(w),
    };
    if m == 1 {
        check_gemv_weight_alignment(op, payload, scales)?;
    }
    if m == 1 && gemv == GemvKernel::Binary {
        w.require_binary_gemv(op)?;
        return super::matmul_b1::launch(gpu, w.bits, epilogue, n_out, w.k, io, norm);
    }
    let name = kernel_name(w.bits, epilogue, m, gemv, gemm, false);
    let func = gpu.function(&name)?;
    if m == 1 {
        let g = tc_geometry(w.k, n_out, epilogue == Epilogue::SwiGlu)
            .ok_or_else(|| shape(op, format!("{n_out} outputs x K = {} exceed the GEMV grid", w.k)))?;
        // Dynamic plus the kernel's static shared memory (the fused norm's per-warp sums) must
        // stay within the default limit, else the launch needs the opt-in. (Once raised the
        // limit stays, so a launch over it failed only where no earlier one had raised it.)
        let static_smem = func.shared_size_bytes()?.max(0) as usize;
        if g.smem_bytes + static_smem > DEFAULT_SMEM_LIMIT {
            let attr = CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
            func.set_attribute(attr, g.smem_bytes as i32)?;
        }
        let cfg = LaunchConfig {
            grid_dim: (g.ctas, 1, 1),
            block_dim: (g.tiles_per_cta * g.splits * 32, 1, 1),
            shared_mem_bytes: g.smem_bytes as u32,
        };
        let (tiles_per_cta, splits, chunk) = (g.tiles_per_cta as i32, g.splits as i32, g.chunk_groups as i32);
        // No norm: a null pointer (the kernel stages x as it is).
        let (norm_ptr, norm_eps) = norm.unwrap_or((0, 0.0));
        let mut b = Launch::new(gpu, func);
        b.arg(&scales).arg(&payload).arg(&x_ptr).arg(&m_i).arg(&y_ptr).arg(&n_i).arg(&k_i);
        b.arg(&tiles_per_cta).arg(&splits).arg(&chunk).arg(&norm_ptr).arg(&norm_eps);
        // SAFETY: argument order and types match gemv_tc's entry points (scales, payload, x, m, y,
        // n_out, k, tiles_per_cta, splits, chunk_groups, norm_w, norm_eps); buffer lengths were
        // checked above (norm weights: K values, by norm_arg), the alignment the unit loads need
        // just now, and tc_geometry sized the block and shared memory.
        unsafe { b.launch(cfg) }?;
        return Ok(());
    }
    let cfg = {
        let (tile_rows, tile_tokens, threads) = (MMA_TILE_ROWS, MMA_TILE_TOKENS, MMA_THREADS);
        let rows_per_tile = if epilogue == Epilogue::SwiGlu { tile_rows / 2 } else { tile_rows };
        let tiles = u32::try_from(n_out.div_ceil(rows_per_tile)).map_err(|_| shape(op, "too many rows".into()))?;
        let token_tiles = m.div_ceil(tile_tokens);
        if token_tiles > 65_535 {
            return Err(shape(op, format!("m = {m} exceeds the grid's y range")));
        }
        LaunchConfig { grid_dim: (tiles, token_tiles as u32, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 }
    };
    let mut b = Launch::new(gpu, func);
    b.arg(&scales).arg(&payload).arg(&x_ptr).arg(&m_i).arg(&y_ptr).arg(&n_i).arg(&k_i);
    // SAFETY: argument order and types match the kernel signature (scales, payload, x, m, y,
    // n_out, k); buffer lengths were checked above to cover every index the kernel touches.
    unsafe { b.launch(cfg) }?;
    Ok(())
}

/// The f16 GEMM `gemm` (one of the kinds [`GemmKernel::is_f16`] names) on `input`.
fn launch_f16(gpu: Gpu<'_>, s: F16Shape, gemm: GemmKernel, io: (u64, u64, u64, u64), input: F16Input) -> Result<(), LaunchError> {
    if gemm == GemmKernel::TensorCoreSmall {
        return super::matmul_small::launch(gpu, s, io, input);
    }
    if let Some(tile) = gemm.wgmma_tile() {
        return super::matmul_wgmma::launch(gpu, s, tile, io, input);
    }
    match gemm.f16_splits() {
        Some(forced_splits) => super::matmul_f16::launch(gpu, s, forced_splits, io, input),
        None => Err(shape(s.op(), format!("{gemm:?} does not read f16 rows"))),
    }
}

/// Whether the default GEMM of `w` at m tokens reads the f16 pre-pass's rows (so a kernel ending
/// with the pre-pass, writing [`F16Rows`], may stand in for it): Some(the weights' bits), or None
/// (one token, the multi-token binary GEMV, bf16x3).
pub fn reads_f16_rows(gpu: Gpu<'_>, w: &QWeightsView<'_>, m: usize, epilogue: Epilogue) -> Result<Option<QuantBits>, LaunchError> {
    if m <= GEMV_MAX_TOKENS {
        return Ok(None);
    }
    let n_out = outputs(w, epilogue)?;
    let gemm = batched_gemm(gpu, w, &F16Shape { bits: w.bits, epilogue, m, n_out, k: w.k })?;
    Ok(gemm.is_f16().then_some(w.bits))
}

/// The f16 pre-pass alone on m rows of K f32 values at `x` (16-byte aligned), for `bits`-bit
/// weights: what [`F16Rows`] holds after a kernel ending with it (verify compares the two).
pub(crate) fn f16_prepass(gpu: Gpu<'_>, x: u64, m: usize, k: usize, bits: QuantBits) -> Result<(CudaSlice<u16>, CudaSlice<f32>), LaunchError> {
    super::matmul_f16::prepass(gpu, &F16Shape { bits, epilogue: Epilogue::Store, m, n_out: 1, k }, x, None)
}

/// [`matmul`] on rows already in the f16 GEMMs' input form (`rows`: m rows of K = the matrix's
/// input width for its format, see [`reads_f16_rows`]), with the default GEMM for m.
pub fn matmul_f16_rows(
    gpu: Gpu<'_>,
    w: &QWeightsView<'_>,
    rows: &F16Rows,
    m: usize,
    y: &mut impl DevicePtrMut<f32>,
    epilogue: Epilogue,
) -> Result<(), LaunchError> {
    let op = epilogue.op_name();
    w.validate(op)?;
    let n_out = outputs(w, epilogue)?;
    expect_at_least(op, "y", y.len(), m * n_out)?;
    as_i32(op, "m", m)?;
    let (xh, unscale) = rows.read_ptrs(gpu.stream, op, (w.bits, m, w.k))?;
    let s = F16Shape { bits: w.bits, epilogue, m, n_out, k: w.k };
    let gemm = batched_gemm(gpu, w, &s)?;
    if m <= GEMV_MAX_TOKENS || !gemm.is_f16() {
        return Err(shape(op, format!("m = {m}: the default GEMM ({gemm:?}) does not read f16 rows")));
    }
    let (scales, _g0) = read_ptr(w.scales, gpu.stream);
    let (payload, _g1) = read_ptr(w.payload, gpu.stream);
    let (y_ptr, _g2) = write_ptr(y, gpu.stream);
    launch_f16(gpu, s, gemm, (scales, payload, 0, y_ptr), F16Input::Prepared { xh, unscale })
}

/// Whether [`matmul_pair_f16_rows`] takes `w1` and `w2` at m rows: both matrices' default GEMM
/// there is the wgmma one on f16 rows, of one format and K, and the pair's combined grid runs
/// unsplit on the 128- or 256-token tile.
pub fn f16_pair_fits(gpu: Gpu<'_>, w1: &QWeightsView<'_>, w2: &QWeightsView<'_>, m: usize) -> Result<bool, LaunchError> {
    if w1.bits != w2.bits || w1.k != w2.k || m <= GEMV_MAX_TOKENS {
        return Ok(false);
    }
    for w in [w1, w2] {
        if batched_gemm(gpu, w, &F16Shape { bits: w.bits, epilogue: Epilogue::Store, m, n_out: w.n, k: w.k })? != GemmKernel::TensorCoreWgmma {
            return Ok(false);
        }
    }
    let sms = crate::launch::sm_count(gpu.stream)?;
    Ok(super::matmul_wgmma::pair_tile(sms, w1.bits, m, w1.k, w1.n, w2.n).is_some())
}

/// Two Store matmuls of the same f16 rows in one launch (a mixer's projections in a prefill):
/// `y1 = rows · W1ᵀ`, `y2 = rows · W2ᵀ`, each bit-identical to its matrix's own unsplit wgmma
/// launch of the pair's tile. [`f16_pair_fits`] must hold.
pub fn matmul_pair_f16_rows(
    gpu: Gpu<'_>,
    (w1, y1): (&QWeightsView<'_>, &mut impl DevicePtrMut<f32>),
    (w2, y2): (&QWeightsView<'_>, &mut impl DevicePtrMut<f32>),
    rows: &F16Rows,
    m: usize,
) -> Result<(), LaunchError> {
    let op = "matmul_pair";
    for w in [w1, w2] {
        w.validate(op)?;
        as_i32(op, "N*K/32", w.n * w.k / 32)?;
    }
    if !f16_pair_fits(gpu, w1, w2, m)? {
        return Err(shape(op, format!("no pair launch for m = {m}, N = {} + {}, K = {} / {}", w1.n, w2.n, w1.k, w2.k)));
    }
    expect_at_least(op, "y1", y1.len(), m * w1.n)?;
    expect_at_least(op, "y2", y2.len(), m * w2.n)?;
    let prepared = rows.read_ptrs(gpu.stream, op, (w1.bits, m, w1.k))?;
    let (s1, _g0) = read_ptr(w1.scales, gpu.stream);
    let (p1, _g1) = read_ptr(w1.payload, gpu.stream);
    let (s2, _g2) = read_ptr(w2.scales, gpu.stream);
    let (p2, _g3) = read_ptr(w2.payload, gpu.stream);
    let (y1_ptr, _g4) = write_ptr(y1, gpu.stream);
    let (y2_ptr, _g5) = write_ptr(y2, gpu.stream);
    super::matmul_wgmma::launch_pair(gpu, (w1.bits, m, w1.k), (w1.n, s1, p1, y1_ptr), (w2.n, s2, p2, y2_ptr), prepared)
}

/// The decode GEMVs' weight loads: 16-byte unit loads of payload words, 8-byte loads of 4 scales
/// (weight_layout.cu).
pub(crate) fn check_gemv_weight_alignment(op: &'static str, payload: u64, scales: u64) -> Result<(), LaunchError> {
    if payload % 16 != 0 || scales % 8 != 0 {
        return Err(shape(op, "weight buffers must start on 16-byte (payload) / 8-byte (scales) boundaries".into()));
    }
    Ok(())
}

/// Dynamic shared memory a kernel gets without opting in.
pub(crate) const DEFAULT_SMEM_LIMIT: usize = 48 * 1024;

#[path = "tc_geometry.rs"]
mod tc_geometry;
pub use tc_geometry::{b1_geometry, b1_pair_geometry, b1_shape_ok, b1_smem_bytes, tc_geometry, TcGeometry};
pub(crate) use tc_geometry::{B1_GROUP_WORDS, B1_MIN_EXP, B1_WORDS, MAX_WARPS_B1, TILE_ROWS};
#[path = "cuda_planes.rs"]
mod planes;
pub use planes::{
    embed_prepare_planes, gemv_from_planes, gemv_pair_fits, gemv_pair_from_planes, matmul_from_planes, planes_out_fits, prepare_planes, prepare_planes_normed,
    B1Planes, PlanesEpilogue, PlanesOut, RopeOut,
};
#[path = "gemv_choice.rs"]
mod gemv_choice;
pub use gemv_choice::{gemv_for, GemvKernel, B1_ACTIVATION_BITS};
pub use super::matmul_b1::TilesChoice;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_gemm_is_f16_from_the_first_m_past_the_gemvs() {
        assert_eq!((GEMV_MAX_TOKENS, F16_GEMM_MIN_TOKENS), (1, 2));
        assert_eq!(default_gemm(1), GemmKernel::TensorCoreBf16x3);
        assert_eq!(default_gemm(GEMV_MAX_TOKENS + 1), GemmKernel::TensorCoreF16);
        assert_eq!(default_gemm(4608), GemmKernel::TensorCoreF16);
    }

    #[test]
    fn every_variant_the_launcher_picks_is_registered() {
        let names: Vec<&str> = crate::cuda::library::entry_points().collect();
        for bits in [QuantBits::One, QuantBits::Two] {
            for epilogue in [Epilogue::Store, Epilogue::Add, Epilogue::SwiGlu] {
                for m in [1, 2, 8, 9, SMALL_M_MAX_TOKENS, 512] {
                    for gemm in [
                        GemmKernel::TensorCoreF16,
                        GemmKernel::TensorCoreWgmma,
                        GemmKernel::TensorCoreSmall,
                        GemmKernel::BinaryTokens,
                        GemmKernel::TensorCoreBf16x3,
                    ] {
                        for gemv in [GemvKernel::Binary, GemvKernel::Bf16x3] {
                            for wide in [false, true] {
                                let name = kernel_name(bits, epilogue, m, gemv, gemm, wide);
                                assert!(names.contains(&name.as_str()), "{name} is not a registered entry point");
                            }
                        }
                    }
                }
            }
            // The pair launches' names (cuda_wgmma.rs::launch_pair).
            for tile in [WgmmaTile::Tokens128, WgmmaTile::Tokens256] {
                let name = kernel_name(bits, Epilogue::Store, 512, GemvKernel::Binary, GemmKernel::TensorCoreWgmma, false) + tile.suffix() + "_pair";
                assert!(names.contains(&name.as_str()), "{name} is not a registered entry point");
            }
        }
    }
}

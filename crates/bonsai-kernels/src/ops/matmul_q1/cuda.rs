//! Launchers of every quantized matmul (1-bit and 2-bit, plain / fused residual / fused gate|up
//! SwiGLU). Kernels: matmul_gemv.cu + matmul_gemm.cu + matmul_gemm_f16.cu (templates),
//! matmul_q1.cu, matmul_q2.cu, gate_up_swiglu_q*.cu (entry points).
//! m == 1 -> `*_gemv_stream` (matmul_gemv_stream.cu) where its layout requirements hold (K % 256,
//! aligned buffers, shared memory fits), else `*_gemv_rows8_split_k`;
//! 2..=8 -> `*_gemv_rows8_split_k_tokens8`; 9..=63 -> `*_gemm_mma_bf16x3` (tensor cores,
//! f32-level accuracy); m >= [`F16_GEMM_MIN_TOKENS`] -> `x_to_f16_rows_q*` + `*_gemm_f16_128x{128,256}`
//! (tensor cores, f16 operands; see [`GemmKernel::TensorCoreF16`]). `*_gemm_tile64_simt` (CUDA
//! cores) is kept as an independent implementation that verify checks too.
//!
//! The f16 GEMM needs m·K f16 + m f32 of scratch for the converted activations; the launcher
//! allocates it stream-ordered (`cuMemAllocAsync` from the context's pool, freed on the stream
//! after the GEMM), so no caller-visible buffer is needed and graph capture still works.

use std::sync::Arc;

use cudarc::driver::sys::CUfunction_attribute;
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg};

use super::matmul_f16::F16Shape;
use crate::cuda::KernelLibrary;
use crate::launch::{
    as_i32, expect_aligned16, expect_at_least, read_ptr, shape, write_ptr, LaunchError, QWeightsView,
    QuantBits, Store,
};

/// Largest m served by the GEMV kernels (GEMV_MAX_TOKENS in matmul_q1.cu).
pub const GEMV_MAX_TOKENS: usize = 8;
const GEMV_ROWS: usize = 8;
const GEMV_THREADS: u32 = 4 * 32;
const GEMM_TILE_ROWS: usize = 64;
const GEMM_TILE_TOKENS: usize = 64;
const GEMM_THREADS: u32 = 256;
const MMA_TILE_ROWS: usize = 64;
const MMA_TILE_TOKENS: usize = 32;
const MMA_THREADS: u32 = 128;
/// Smallest m served by the f16 GEMM. Its CTA covers 128 tokens, so from 64 tokens on at least
/// half of each tile's tensor-core work is useful, while bf16x3 spends 3 mma per product at any
/// m (a guess to be replaced by a measured crossover: no GPU time was left when it was written).
pub const F16_GEMM_MIN_TOKENS: usize = 64;
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
    /// mma.sync bf16 with activations split into three bf16 parts (f32-level accuracy).
    TensorCoreBf16x3,
    /// f32 FFMA register tiles.
    Simt,
}

/// The GEMM [`matmul`] and [`gate_up_swiglu`] use for m tokens (m > GEMV_MAX_TOKENS).
pub fn default_gemm(m: usize) -> GemmKernel {
    if m >= F16_GEMM_MIN_TOKENS {
        GemmKernel::TensorCoreF16
    } else {
        GemmKernel::TensorCoreBf16x3
    }
}

/// How a matmul's result leaves the kernel (MATMUL_* in matmul_gemv.cu).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Epilogue {
    Store,
    Add,
    SwiGlu,
}

/// `stream`: the m = 1 stream GEMV applies; `wide`: the f16 GEMM's 128 x 256 tile.
pub(crate) fn kernel_name(bits: QuantBits, epilogue: Epilogue, m: usize, gemm: GemmKernel, stream: bool, wide: bool) -> String {
    let prefix = match (bits, epilogue) {
        (QuantBits::One, Epilogue::Store) => "matmul_q1",
        (QuantBits::One, Epilogue::Add) => "matmul_q1_add",
        (QuantBits::One, Epilogue::SwiGlu) => "gate_up_swiglu_q1",
        (QuantBits::Two, Epilogue::Store) => "matmul_q2",
        (QuantBits::Two, Epilogue::Add) => "matmul_q2_add",
        (QuantBits::Two, Epilogue::SwiGlu) => "gate_up_swiglu_q2",
    };
    let variant = match m {
        1 if stream => "gemv_stream",
        1 => "gemv_rows8_split_k",
        m if m <= GEMV_MAX_TOKENS => "gemv_rows8_split_k_tokens8",
        _ => match gemm {
            GemmKernel::TensorCoreF16 if wide => "gemm_f16_128x256",
            GemmKernel::TensorCoreF16 => "gemm_f16_128x128",
            GemmKernel::TensorCoreBf16x3 => "gemm_mma_bf16x3",
            GemmKernel::Simt => "gemm_tile64_simt",
        },
    };
    format!("{prefix}_{variant}")
}

/// `y[m, N] (=|+=) x[m, K] . W^T` (store picks overwrite or the fused residual add).
pub fn matmul(
    lib: &KernelLibrary,
    stream: &Arc<CudaStream>,
    w: &QWeightsView<'_>,
    x: &impl DevicePtr<f32>,
    m: usize,
    y: &mut impl DevicePtrMut<f32>,
    store: Store,
) -> Result<(), LaunchError> {
    launch_any(lib, stream, w, x, m, y, store_epilogue(store), w.n, None)
}

/// [`matmul`] with an explicit choice of GEMM kernel for m > GEMV_MAX_TOKENS.
#[allow(clippy::too_many_arguments)]
pub fn matmul_with_gemm(
    lib: &KernelLibrary,
    stream: &Arc<CudaStream>,
    w: &QWeightsView<'_>,
    x: &impl DevicePtr<f32>,
    m: usize,
    y: &mut impl DevicePtrMut<f32>,
    store: Store,
    gemm: GemmKernel,
) -> Result<(), LaunchError> {
    launch_any(lib, stream, w, x, m, y, store_epilogue(store), w.n, Some(gemm))
}

fn store_epilogue(store: Store) -> Epilogue {
    match store {
        Store::Overwrite => Epilogue::Store,
        Store::Add => Epilogue::Add,
    }
}

/// `out[m, F] = silu(x . Wg^T) * (x . Wu^T)` with `W = [gate rows | up rows]`, `N = 2F`.
pub fn gate_up_swiglu(
    lib: &KernelLibrary,
    stream: &Arc<CudaStream>,
    w: &QWeightsView<'_>,
    x: &impl DevicePtr<f32>,
    m: usize,
    out: &mut impl DevicePtrMut<f32>,
) -> Result<(), LaunchError> {
    check_gate_up(w)?;
    launch_any(lib, stream, w, x, m, out, Epilogue::SwiGlu, w.n / 2, None)
}

/// [`gate_up_swiglu`] with an explicit choice of GEMM kernel for m > GEMV_MAX_TOKENS.
pub fn gate_up_swiglu_with_gemm(
    lib: &KernelLibrary,
    stream: &Arc<CudaStream>,
    w: &QWeightsView<'_>,
    x: &impl DevicePtr<f32>,
    m: usize,
    out: &mut impl DevicePtrMut<f32>,
    gemm: GemmKernel,
) -> Result<(), LaunchError> {
    check_gate_up(w)?;
    launch_any(lib, stream, w, x, m, out, Epilogue::SwiGlu, w.n / 2, Some(gemm))
}

fn check_gate_up(w: &QWeightsView<'_>) -> Result<(), LaunchError> {
    if w.n % 2 != 0 {
        return Err(shape("gate_up_swiglu", format!("fused gate|up matrix has odd N = {}", w.n)));
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn launch_any(
    lib: &KernelLibrary,
    stream: &Arc<CudaStream>,
    w: &QWeightsView<'_>,
    x: &impl DevicePtr<f32>,
    m: usize,
    y: &mut impl DevicePtrMut<f32>,
    epilogue: Epilogue,
    n_out: usize,
    gemm: Option<GemmKernel>,
) -> Result<(), LaunchError> {
    let op = if epilogue == Epilogue::SwiGlu { "gate_up_swiglu" } else { "matmul" };
    w.validate(op)?;
    if m == 0 {
        return Err(shape(op, "m = 0 tokens".into()));
    }
    expect_at_least(op, "x", x.len(), m * w.k)?;
    expect_at_least(op, "y", y.len(), m * n_out)?;
    let (m_i, n_i, k_i) = (as_i32(op, "m", m)?, as_i32(op, "n_out", n_out)?, as_i32(op, "K", w.k)?);
    as_i32(op, "N*K/32", w.n * w.k / 32)?;
    let (scales, _g0) = read_ptr(w.scales, stream);
    let (payload, _g1) = read_ptr(w.payload, stream);
    let (x_ptr, _g2) = read_ptr(x, stream);
    expect_aligned16(op, "x", x_ptr)?;
    let (y_ptr, _g3) = write_ptr(y, stream);
    let f16_shape = F16Shape { bits: w.bits, epilogue, m, n_out, k: w.k };
    // None: the default for m, except that the f16 GEMM yields to bf16x3 on devices whose
    // shared memory cannot hold its tiles (sm_86/89 with 2-bit weights).
    let gemm = match gemm {
        Some(g) => g,
        None if m > GEMV_MAX_TOKENS => super::matmul_f16::auto_gemm(stream, &f16_shape)?,
        None => default_gemm(m),
    };
    if m > GEMV_MAX_TOKENS && gemm == GemmKernel::TensorCoreF16 {
        return super::matmul_f16::launch(lib, stream, f16_shape, scales, payload, x_ptr, y_ptr);
    }
    let streamed = if m == 1 { stream_geometry(w.bits, w.k, epilogue, n_out, scales, payload) } else { None };
    let name = kernel_name(w.bits, epilogue, m, gemm, streamed.is_some(), false);
    let func = lib.function(&name)?;
    if let Some(g) = streamed {
        if g.smem_bytes > DEFAULT_SMEM_LIMIT {
            let attr = CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
            func.set_attribute(attr, g.smem_bytes as i32)?;
        }
        let cfg = LaunchConfig {
            grid_dim: (g.ctas, 1, 1),
            block_dim: (g.warps * 32, 1, 1),
            shared_mem_bytes: g.smem_bytes as u32,
        };
        let splits = g.splits as i32;
        let mut b = stream.launch_builder(func);
        b.arg(&scales).arg(&payload).arg(&x_ptr).arg(&y_ptr).arg(&n_i).arg(&k_i).arg(&splits);
        // SAFETY: argument order and types match gemv_stream's entry points (scales, payload, x,
        // y, n_out, k, splits); buffer lengths were checked above, stream_geometry checked the
        // alignment and K % 256 the kernel relies on, and `splits` divides the CTA's warps.
        unsafe { b.launch(cfg) }?;
        return Ok(());
    }
    let cfg = if m <= GEMV_MAX_TOKENS {
        let rows_per_cta = if epilogue == Epilogue::SwiGlu { GEMV_ROWS / 2 } else { GEMV_ROWS };
        let ctas = u32::try_from(n_out.div_ceil(rows_per_cta))
            .map_err(|_| shape(op, format!("{n_out} outputs exceed the grid")))?;
        LaunchConfig { grid_dim: (ctas, 1, 1), block_dim: (GEMV_THREADS, 1, 1), shared_mem_bytes: 0 }
    } else {
        let (tile_rows, tile_tokens, threads) = match gemm {
            GemmKernel::Simt => (GEMM_TILE_ROWS, GEMM_TILE_TOKENS, GEMM_THREADS),
            _ => (MMA_TILE_ROWS, MMA_TILE_TOKENS, MMA_THREADS),
        };
        let rows_per_tile = if epilogue == Epilogue::SwiGlu { tile_rows / 2 } else { tile_rows };
        let tiles = u32::try_from(n_out.div_ceil(rows_per_tile)).map_err(|_| shape(op, "too many rows".into()))?;
        let token_tiles = m.div_ceil(tile_tokens);
        if token_tiles > 65_535 {
            return Err(shape(op, format!("m = {m} exceeds the grid's y range")));
        }
        LaunchConfig { grid_dim: (tiles, token_tiles as u32, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 }
    };
    let mut b = stream.launch_builder(func);
    b.arg(&scales).arg(&payload).arg(&x_ptr).arg(&m_i).arg(&y_ptr).arg(&n_i).arg(&k_i);
    // SAFETY: argument order and types match the kernel signature (scales, payload, x, m, y,
    // n_out, k); buffer lengths were checked above to cover every index the kernel touches.
    unsafe { b.launch(cfg) }?;
    Ok(())
}

/// gemv_stream's rows per warp and ring stages (STREAM_ROWS / STREAM_STAGES in matmul_q1.cu).
const STREAM_ROWS: usize = 4;
const STREAM_STAGES: usize = 4;
/// Words of one row per K chunk (STREAM_CHUNK_WORDS in matmul_gemv_stream.cu).
const STREAM_CHUNK_WORDS: usize = 32;
/// Warps per CTA: 8 when each warp owns its rows' whole K, 16 when two warps split it (both
/// measured best in scripts/lab round 4; <= STREAM_MAX_THREADS / 32 = 16).
const STREAM_WARPS_WHOLE_K: usize = 8;
const STREAM_WARPS_SPLIT_K: usize = 16;
/// gemv_stream's scale pieces are 4 bytes: row * K/128 scales must be even, i.e. K % 256 == 0.
const STREAM_K_MULTIPLE: usize = 256;
/// Dynamic shared memory a kernel gets without opting in.
const DEFAULT_SMEM_LIMIT: usize = 48 * 1024;
/// Largest stream CTA: within the opt-in limit of every embedded architecture (sm_86/89: 99 KB).
const STREAM_MAX_SMEM: usize = 96 * 1024;
/// Below this many row sets (132 H200 SMs x 8 warps) two warps split each row set's K chunks:
/// measured in scripts/lab round 4, N = 4096 (1024 row sets) runs 12.4 -> 11.2 us split in two
/// (Q1, K = 12288) while N = 12288 (3072 row sets) is fastest unsplit; four-way splits lost.
const STREAM_SPLIT_BELOW_ROW_SETS: usize = 132 * 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct StreamGeometry {
    ctas: u32,
    warps: u32,
    splits: usize,
    smem_bytes: usize,
}

/// Shared memory of one stream CTA (layout in matmul_gemv_stream.cu).
fn stream_smem_bytes(bits: QuantBits, k: usize, warps: usize) -> usize {
    let weights_per_word = match bits {
        QuantBits::One => 32,
        QuantBits::Two => 16,
    };
    let scales_per_chunk = STREAM_CHUNK_WORDS * weights_per_word / crate::weights::GROUP;
    let partials = (warps * STREAM_ROWS).next_multiple_of(4);
    let ring = warps * STREAM_STAGES * STREAM_ROWS;
    4 * k + 4 * (k / weights_per_word) + 4 * partials + ring * STREAM_CHUNK_WORDS * 4 + ring * scales_per_chunk * 2
}

/// The stream kernel's launch for this matrix, or None where its requirements do not hold.
fn stream_geometry(
    bits: QuantBits,
    k: usize,
    epilogue: Epilogue,
    n_out: usize,
    scales: u64,
    payload: u64,
) -> Option<StreamGeometry> {
    if k % STREAM_K_MULTIPLE != 0 || payload % 16 != 0 || scales % 4 != 0 {
        return None;
    }
    let outputs_per_warp = if epilogue == Epilogue::SwiGlu { STREAM_ROWS / 2 } else { STREAM_ROWS };
    let row_sets = n_out.div_ceil(outputs_per_warp);
    let weights_per_word = if bits == QuantBits::One { 32 } else { 16 };
    let chunks = (k / weights_per_word).div_ceil(STREAM_CHUNK_WORDS);
    let split = row_sets < STREAM_SPLIT_BELOW_ROW_SETS && chunks >= 2;
    let (warps, splits) = if split { (STREAM_WARPS_SPLIT_K, 2) } else { (STREAM_WARPS_WHOLE_K, 1) };
    let smem_bytes = stream_smem_bytes(bits, k, warps);
    if smem_bytes > STREAM_MAX_SMEM {
        return None;
    }
    let row_sets_per_cta = warps / splits;
    let ctas = u32::try_from(row_sets.div_ceil(row_sets_per_cta)).ok()?;
    Some(StreamGeometry { ctas, warps: warps as u32, splits, smem_bytes })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_gemm_switches_to_f16_at_its_threshold() {
        assert_eq!(default_gemm(GEMV_MAX_TOKENS + 1), GemmKernel::TensorCoreBf16x3);
        assert_eq!(default_gemm(F16_GEMM_MIN_TOKENS - 1), GemmKernel::TensorCoreBf16x3);
        assert_eq!(default_gemm(F16_GEMM_MIN_TOKENS), GemmKernel::TensorCoreF16);
        assert_eq!(default_gemm(4608), GemmKernel::TensorCoreF16);
    }

    #[test]
    fn stream_geometry_covers_every_output_and_respects_its_requirements() {
        for bits in [QuantBits::One, QuantBits::Two] {
            for epilogue in [Epilogue::Store, Epilogue::Add, Epilogue::SwiGlu] {
                for (n_out, k) in [(1, 256), (7, 512), (4096, 4096), (12288, 4096), (4096, 12288), (151_669, 4096)] {
                    let g = stream_geometry(bits, k, epilogue, n_out, 256, 256).expect("eligible shape");
                    let per_warp = if epilogue == Epilogue::SwiGlu { STREAM_ROWS / 2 } else { STREAM_ROWS };
                    let covered = g.ctas as usize * (g.warps as usize / g.splits) * per_warp;
                    assert!(covered >= n_out, "{n_out} outputs, {covered} covered: {g:?}");
                    assert!(covered < n_out + g.warps as usize * per_warp, "a whole idle CTA: {g:?}");
                    assert_eq!(g.warps as usize % g.splits, 0, "{g:?}");
                    assert!(g.smem_bytes <= STREAM_MAX_SMEM);
                }
            }
            // The lab's fastest geometries: N = 12288 whole-K in 8-warp CTAs, N = 4096 split in two.
            let wide = stream_geometry(bits, 4096, Epilogue::Store, 12288, 256, 256).expect("eligible");
            assert_eq!((wide.warps, wide.splits, wide.ctas), (8, 1, 12288 / 32));
            let tall = stream_geometry(bits, 12288, Epilogue::Store, 4096, 256, 256).expect("eligible");
            assert_eq!((tall.warps, tall.splits, tall.ctas), (16, 2, 4096 / 32));
            // K % 256, a misaligned payload or scale buffer, or too much shared memory: no stream.
            assert_eq!(stream_geometry(bits, 384, Epilogue::Store, 64, 256, 256), None);
            assert_eq!(stream_geometry(bits, 4096, Epilogue::Store, 64, 256, 8), None);
            assert_eq!(stream_geometry(bits, 4096, Epilogue::Store, 64, 2, 256), None);
            assert_eq!(stream_geometry(bits, 32768, Epilogue::Store, 64, 256, 256), None);
        }
    }

    #[test]
    fn every_variant_the_launcher_picks_is_registered() {
        let names: Vec<&str> = crate::cuda::library::entry_points().collect();
        for bits in [QuantBits::One, QuantBits::Two] {
            for epilogue in [Epilogue::Store, Epilogue::Add, Epilogue::SwiGlu] {
                for m in [1, 2, GEMV_MAX_TOKENS, GEMV_MAX_TOKENS + 1, 512] {
                    for gemm in [GemmKernel::TensorCoreF16, GemmKernel::TensorCoreBf16x3, GemmKernel::Simt] {
                        for (streamed, wide) in [(false, false), (true, false), (false, true)] {
                            let name = kernel_name(bits, epilogue, m, gemm, streamed, wide);
                            assert!(names.contains(&name.as_str()), "{name} is not a registered entry point");
                        }
                    }
                }
            }
        }
    }
}

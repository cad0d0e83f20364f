//! Launch of the f16 tensor-core GEMM (matmul_gemm_f16.cu): the activation pre-pass
//! `x_to_f16_rows_q*` into stream-ordered scratch, then `*_gemm_f16_128x{128,256}`.

use std::sync::{Arc, OnceLock};

use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtrMut, LaunchConfig};

use super::matmul::{
    kernel_name, Epilogue, GemmKernel, F16_GEMM_MIN_TOKENS, QG_NARROW_WARPS_N, QG_PREP_THREADS, QG_STAGES,
    QG_TILE_TOKENS, QG_WARP_ROWS, QG_WIDE_MIN_WAVES, QG_WIDE_WARPS_N,
};
use super::{as_i32, device_attribute, expect_aligned16, shape, LaunchError, QuantBits};
use crate::cuda::KernelLibrary;
use crate::launch_ex::Launch;
use crate::weights::GROUP;

/// Warp rows of the CTA (QG_WARPS_M): 2 x 64 = QG_TILE_TOKENS tokens.
const QG_WARPS_M: usize = 2;
/// Largest grid y (token tiles).
const MAX_GRID_Y: usize = 65_535;

/// What one f16 GEMM launch computes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct F16Shape {
    pub bits: QuantBits,
    pub epilogue: Epilogue,
    pub m: usize,
    /// Outputs per token: N, or F features for SwiGLU.
    pub n_out: usize,
    pub k: usize,
}

impl F16Shape {
    fn op(&self) -> &'static str {
        if self.epilogue == Epilogue::SwiGlu {
            "gate_up_swiglu"
        } else {
            "matmul"
        }
    }
}

/// Grid, block and shared memory of one f16 GEMM launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct F16Geometry {
    pub wide: bool,
    pub grid: (u32, u32),
    pub threads: u32,
    pub smem_bytes: usize,
}

/// Bytes of one cp.async ring stage (QgStage in matmul_gemm_f16.cu): the group's f16 activation
/// tile, its payload words and its scales.
pub(crate) fn stage_bytes(bits: QuantBits, warps_n: usize) -> usize {
    let rows = QG_WARP_ROWS * warps_n;
    QG_TILE_TOKENS * GROUP * 2 + rows * bits.words_per_group() * 4 + rows * 2
}

/// Outputs (N columns or F features) one CTA of `warps_n` warp columns covers.
fn outputs_per_tile(epilogue: Epilogue, warps_n: usize) -> usize {
    let rows = QG_WARP_ROWS * warps_n;
    if epilogue == Epilogue::SwiGlu {
        rows / 2
    } else {
        rows
    }
}

/// The launch for `s` on a device with `sms` multiprocessors.
pub(crate) fn geometry(s: &F16Shape, sms: usize) -> Result<F16Geometry, LaunchError> {
    let token_tiles = s.m.div_ceil(QG_TILE_TOKENS);
    if token_tiles > MAX_GRID_Y {
        return Err(shape(s.op(), format!("m = {} exceeds the grid's y range", s.m)));
    }
    let tiles = |warps_n| s.n_out.div_ceil(outputs_per_tile(s.epilogue, warps_n));
    let wide = token_tiles * tiles(QG_WIDE_WARPS_N) >= QG_WIDE_MIN_WAVES * sms;
    let warps_n = if wide { QG_WIDE_WARPS_N } else { QG_NARROW_WARPS_N };
    let col_tiles = u32::try_from(tiles(warps_n)).map_err(|_| shape(s.op(), "too many rows".into()))?;
    Ok(F16Geometry {
        wide,
        grid: (col_tiles, token_tiles as u32),
        threads: (QG_WARPS_M * warps_n * 32) as u32,
        smem_bytes: QG_STAGES * stage_bytes(s.bits, warps_n),
    })
}

/// Whether the f16 GEMM's CTA fits this device's opt-in shared memory (sm_86/89 allow 99 KB:
/// the 2-bit tiles do not fit there).
pub(crate) fn fits_device(stream: &Arc<CudaStream>, s: &F16Shape) -> Result<bool, LaunchError> {
    let sms = device_attribute(stream, CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
    let optin = device_attribute(stream, CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?;
    Ok(geometry(s, sms)?.smem_bytes <= optin)
}

/// Set to `0` to keep the f32-accurate bf16x3 GEMM at every m (the f16 GEMM's ~2^-11 relative
/// rounding of activations is far above the f32-level bounds of GPU-vs-CPU logit checks).
pub const F16_GEMM_ENV: &str = "BONSAI_GEMM_F16";

/// Whether the default GEMM choice may use the f16 GEMM (read once per process).
pub fn f16_gemm_enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var(F16_GEMM_ENV).map_or(true, |v| v.trim() != "0"))
}

/// The GEMM for m tokens when the caller does not choose one.
pub(crate) fn auto_gemm(stream: &Arc<CudaStream>, s: &F16Shape) -> Result<GemmKernel, LaunchError> {
    Ok(if s.m >= F16_GEMM_MIN_TOKENS && f16_gemm_enabled() && fits_device(stream, s)? {
        GemmKernel::TensorCoreF16
    } else {
        GemmKernel::TensorCoreBf16x3
    })
}

/// Runs the pre-pass and the GEMM. `x` (m x K f32, 16-byte aligned) and `y` (m x n_out f32) were
/// checked by the caller; `scales` / `payload` hold the matrix in group-128 layout.
pub(crate) fn launch(
    lib: &KernelLibrary,
    stream: &Arc<CudaStream>,
    s: F16Shape,
    scales: u64,
    payload: u64,
    x: u64,
    y: u64,
) -> Result<(), LaunchError> {
    let op = s.op();
    expect_aligned16(op, "weight payload", payload)?;
    let sms = device_attribute(stream, CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
    let optin = device_attribute(stream, CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?;
    let geo = geometry(&s, sms)?;
    if geo.smem_bytes > optin {
        return Err(shape(
            op,
            format!("the f16 GEMM needs {} bytes of shared memory per CTA, this device allows {optin}", geo.smem_bytes),
        ));
    }
    let (m_i, n_i, k_i) = (as_i32(op, "m", s.m)?, as_i32(op, "n_out", s.n_out)?, as_i32(op, "K", s.k)?);
    as_i32(op, "m*K", s.m * s.k)?;
    // SAFETY: stream-ordered allocations, uninitialised; the pre-pass below writes every element
    // of both (one CTA per token row writes all K slots of its row and the row's scale) before
    // the GEMM, later on the same stream, reads them.
    let mut xh: CudaSlice<u16> = unsafe { stream.alloc(s.m * s.k) }?;
    // SAFETY: as above.
    let mut unscale: CudaSlice<f32> = unsafe { stream.alloc(s.m) }?;
    let (xh_ptr, _g0) = xh.device_ptr_mut(stream);
    let (unscale_ptr, _g1) = unscale.device_ptr_mut(stream);

    let prep = lib.function(if s.bits == QuantBits::One { "x_to_f16_rows_q1" } else { "x_to_f16_rows_q2" })?;
    let prep_cfg = LaunchConfig { grid_dim: (s.m as u32, 1, 1), block_dim: (QG_PREP_THREADS, 1, 1), shared_mem_bytes: 0 };
    let mut b = Launch::new(stream, prep);
    b.arg(&x).arg(&k_i).arg(&xh_ptr).arg(&unscale_ptr);
    // SAFETY: x_to_f16_rows_q*(const float* x, int k, u16* xh, float* row_unscale): x holds m x K
    // floats 16-byte aligned (checked by the caller), K % 128 == 0 (validated weights), xh holds
    // m x K and row_unscale m elements (allocated above); one CTA per row, m CTAs.
    unsafe { b.launch(prep_cfg) }?;

    let name = kernel_name(s.bits, s.epilogue, s.m, super::matmul::GemvKernel::Binary, GemmKernel::TensorCoreF16, geo.wide);
    let gemm = lib.function(&name)?;
    gemm.set_attribute(
        CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
        geo.smem_bytes as i32,
    )?;
    // Ask for the largest shared-memory carveout so two narrow CTAs share an SM.
    gemm.set_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 100)?;
    let cfg = LaunchConfig {
        grid_dim: (geo.grid.0, geo.grid.1, 1),
        block_dim: (geo.threads, 1, 1),
        shared_mem_bytes: geo.smem_bytes as u32,
    };
    let mut b = Launch::new(stream, gemm);
    b.arg(&scales).arg(&payload).arg(&xh_ptr).arg(&unscale_ptr).arg(&m_i).arg(&y).arg(&n_i).arg(&k_i);
    // SAFETY: argument order and types match gemm_f16_mma's entry points (scales, payload, xh,
    // row_unscale, m, y, n_out, k); the caller checked the x / y / weight lengths, the payload is
    // 16-byte aligned (cp.async), the grid covers ceil(m / 128) token tiles and every output
    // tile, and the kernel bounds every row and token index by m and n_out.
    unsafe { b.launch(cfg) }?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Per-SM shared memory of the H100/H200 (228 KB), for the two-CTA check.
    const H200_SMEM_PER_SM: usize = 228 * 1024;
    /// Opt-in shared memory per CTA of the A100 (163 KB), the smallest sm_80+ data-center part.
    const A100_SMEM_OPTIN: usize = 163 * 1024;
    /// Shared memory the driver holds back per CTA on sm_80+.
    const RESERVED_SMEM_PER_CTA: usize = 1024;

    #[test]
    fn geometry_covers_every_output_and_fits_shared_memory() {
        for bits in [QuantBits::One, QuantBits::Two] {
            for epilogue in [Epilogue::Store, Epilogue::Add, Epilogue::SwiGlu] {
                for (m, n_out) in [(64, 7), (300, 333), (512, 4096), (512, 12288), (4608, 27648), (1536, 3072)] {
                    let s = F16Shape { bits, epilogue, m, n_out, k: 4096 };
                    let g = geometry(&s, 132).expect("valid shape");
                    let warps_n = if g.wide { QG_WIDE_WARPS_N } else { QG_NARROW_WARPS_N };
                    let per_tile = outputs_per_tile(epilogue, warps_n);
                    assert!(g.grid.0 as usize * per_tile >= n_out, "{s:?} {g:?}");
                    assert!((g.grid.0 as usize - 1) * per_tile < n_out, "an idle column of CTAs: {s:?} {g:?}");
                    assert!(g.grid.1 as usize * QG_TILE_TOKENS >= m);
                    assert_eq!(g.threads as usize, QG_WARPS_M * warps_n * 32);
                    assert!(g.smem_bytes <= A100_SMEM_OPTIN, "{s:?} {g:?}");
                    if !g.wide {
                        assert!(2 * (g.smem_bytes + RESERVED_SMEM_PER_CTA) <= H200_SMEM_PER_SM, "{s:?} {g:?}");
                    }
                }
            }
        }
        // The DiT's widest GEMM fills many waves with the wide tile; Bonsai-8B's N = 4096 prefill
        // GEMM at 512 tokens does not (64 wide CTAs), so it takes the narrow one.
        let dit = F16Shape { bits: QuantBits::Two, epilogue: Epilogue::Store, m: 4608, n_out: 27648, k: 3072 };
        assert!(geometry(&dit, 132).expect("valid").wide);
        let attn_out = F16Shape { bits: QuantBits::One, epilogue: Epilogue::Add, m: 512, n_out: 4096, k: 4096 };
        assert!(!geometry(&attn_out, 132).expect("valid").wide);
        let too_tall = F16Shape { m: (MAX_GRID_Y + 1) * QG_TILE_TOKENS, ..attn_out };
        assert!(geometry(&too_tall, 132).is_err());
    }
}

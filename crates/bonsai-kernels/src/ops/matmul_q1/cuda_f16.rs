//! Launch of the f16 tensor-core GEMM (matmul_gemm_f16.cu): the activation pre-pass
//! `x_to_f16_rows_q*` into stream-ordered scratch, then `*_gemm_f16_128x{128,256}` with the
//! tile and split-K count of an [`F16Schedule`] (f16_schedule.rs).

use std::sync::{Arc, OnceLock};

use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtrMut, LaunchConfig};

use super::matmul::{
    kernel_name, Epilogue, GemmKernel, F16_GEMM_MIN_TOKENS, QG_NARROW_WARPS_N, QG_PREP_THREADS, QG_STAGES,
    QG_TILE_TOKENS, QG_WARP_ROWS, QG_WIDE_MIN_WAVES, QG_WIDE_WARPS_N,
};
use super::{as_i32, device_attribute, expect_aligned16, shape, LaunchError, QuantBits};
pub use schedule::{default_f16_schedule, F16Schedule, F16_SCHEDULE_ENV};
use schedule::best_splits;
use crate::cuda::KernelLibrary;
use crate::launch_ex::Launch;
use crate::weights::GROUP;

/// Warp rows of the CTA (QG_WARPS_M): 2 x 64 = QG_TILE_TOKENS tokens.
const QG_WARPS_M: usize = 2;
/// Largest grid y (token tiles).
const MAX_GRID_Y: usize = 65_535;
/// Narrow CTAs one SM can hold by registers (255 x 128 threads each, 64K registers per SM);
/// shared memory may allow fewer (F16Device::ctas_per_sm).
const QG_NARROW_MAX_CTAS_PER_SM: usize = 2;
/// Shared memory the driver holds back per CTA on sm_80+.
const RESERVED_SMEM_PER_CTA: usize = 1024;

#[path = "f16_schedule.rs"]
mod schedule;

/// What the schedule needs to know of the device.
#[derive(Clone, Copy, Debug)]
pub(crate) struct F16Device {
    pub sms: usize,
    pub smem_per_sm: usize,
}

impl F16Device {
    fn query(stream: &Arc<CudaStream>) -> Result<Self, LaunchError> {
        Ok(Self {
            sms: device_attribute(stream, CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
            smem_per_sm: device_attribute(
                stream,
                CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
            )?,
        })
    }

    /// Narrow CTAs of `smem_bytes` each that fit one SM (at least 1: the launch checks the
    /// per-CTA limit separately).
    fn ctas_per_sm(&self, smem_bytes: usize) -> usize {
        (self.smem_per_sm / (smem_bytes + RESERVED_SMEM_PER_CTA)).clamp(1, QG_NARROW_MAX_CTAS_PER_SM)
    }
}

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
    /// (output tiles, token tiles, K splits).
    pub grid: (u32, u32, u32),
    /// K groups per split (the last split runs what is left, at least one group).
    pub split_groups: usize,
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

/// The launch for `s` under `schedule` on `dev`.
pub(crate) fn geometry(s: &F16Shape, dev: &F16Device, schedule: F16Schedule) -> Result<F16Geometry, LaunchError> {
    let token_tiles = s.m.div_ceil(QG_TILE_TOKENS);
    if token_tiles > MAX_GRID_Y {
        return Err(shape(s.op(), format!("m = {} exceeds the grid's y range", s.m)));
    }
    let tiles = |warps_n| s.n_out.div_ceil(outputs_per_tile(s.epilogue, warps_n));
    let wide = schedule == F16Schedule::Round1 && token_tiles * tiles(QG_WIDE_WARPS_N) >= QG_WIDE_MIN_WAVES * dev.sms;
    let warps_n = if wide { QG_WIDE_WARPS_N } else { QG_NARROW_WARPS_N };
    let smem_bytes = QG_STAGES * stage_bytes(s.bits, warps_n);
    let groups = (s.k / GROUP).max(1);
    let wanted = match schedule {
        F16Schedule::Round1 => 1,
        F16Schedule::FixedSplits(n) => n.clamp(1, groups),
        F16Schedule::SplitK => best_splits(token_tiles * tiles(warps_n), groups, dev.sms, dev.ctas_per_sm(smem_bytes)),
    };
    // ceil(G / wanted) groups per split; recounting the splits from that leaves none empty
    // (G = 6, 4 wanted: 2 per split, 3 splits).
    let split_groups = groups.div_ceil(wanted);
    let splits = groups.div_ceil(split_groups);
    let col_tiles = u32::try_from(tiles(warps_n)).map_err(|_| shape(s.op(), "too many rows".into()))?;
    Ok(F16Geometry {
        wide,
        grid: (col_tiles, token_tiles as u32, splits as u32),
        split_groups,
        threads: (QG_WARPS_M * warps_n * 32) as u32,
        smem_bytes,
    })
}

impl F16Geometry {
    /// Output tiles of the grid (one split-K counter each).
    fn tiles(&self) -> usize {
        self.grid.0 as usize * self.grid.1 as usize
    }
    /// f32 values of the split-K partial tiles: splits x tiles x (128 tokens x ROWS), and a CTA
    /// has one thread per weight row (ROWS = threads, a static_assert in the kernel).
    fn partial_len(&self) -> usize {
        self.grid.2 as usize * self.tiles() * QG_TILE_TOKENS * self.threads as usize
    }
}

/// Whether the f16 GEMM's CTA fits this device's opt-in shared memory (sm_86/89 allow 99 KB:
/// the 2-bit tiles do not fit there).
pub(crate) fn fits_device(stream: &Arc<CudaStream>, s: &F16Shape, schedule: F16Schedule) -> Result<bool, LaunchError> {
    let dev = F16Device::query(stream)?;
    let optin = device_attribute(stream, CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?;
    Ok(geometry(s, &dev, schedule)?.smem_bytes <= optin)
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
    Ok(if s.m >= F16_GEMM_MIN_TOKENS && f16_gemm_enabled() && fits_device(stream, s, default_f16_schedule())? {
        GemmKernel::TensorCoreF16
    } else {
        GemmKernel::TensorCoreBf16x3
    })
}

/// Runs the pre-pass and the GEMM. `x` (m x K f32, 16-byte aligned) and `y` (m x n_out f32) were
/// checked by the caller; `scales` / `payload` hold the matrix in group-128 layout.
#[allow(clippy::too_many_arguments)]
pub(crate) fn launch(
    lib: &KernelLibrary,
    stream: &Arc<CudaStream>,
    s: F16Shape,
    schedule: F16Schedule,
    scales: u64,
    payload: u64,
    x: u64,
    y: u64,
) -> Result<(), LaunchError> {
    let op = s.op();
    expect_aligned16(op, "weight payload", payload)?;
    let dev = F16Device::query(stream)?;
    let optin = device_attribute(stream, CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?;
    let geo = geometry(&s, &dev, schedule)?;
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
    // Split-K scratch (null pointers without a split, never read then): partial tiles, written
    // by every split before it is counted, and one arrival counter per output tile, zeroed here
    // on the stream.
    let mut split_scratch: Option<(CudaSlice<f32>, CudaSlice<u32>)> = None;
    if geo.grid.2 > 1 {
        // SAFETY: uninitialised; split z of a tile writes its whole partial tile before it
        // counts itself in, and only the last-counted CTA reads the others' (matmul_gemm_f16.cu).
        let partials: CudaSlice<f32> = unsafe { stream.alloc(geo.partial_len()) }?;
        split_scratch = Some((partials, stream.alloc_zeros(geo.tiles())?));
    }
    let (mut partials_ptr, mut counters_ptr) = (0u64, 0u64);
    let mut _split_guards = None;
    if let Some((partials, counters)) = split_scratch.as_mut() {
        let (p, gp) = partials.device_ptr_mut(stream);
        let (c, gc) = counters.device_ptr_mut(stream);
        (partials_ptr, counters_ptr) = (p, c);
        _split_guards = Some((gp, gc));
    }
    let split_groups_i = as_i32(op, "split_groups", geo.split_groups)?;

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
        grid_dim: geo.grid,
        block_dim: (geo.threads, 1, 1),
        shared_mem_bytes: geo.smem_bytes as u32,
    };
    let mut b = Launch::new(stream, gemm);
    b.arg(&scales).arg(&payload).arg(&xh_ptr).arg(&unscale_ptr).arg(&m_i).arg(&y).arg(&n_i).arg(&k_i);
    b.arg(&partials_ptr).arg(&counters_ptr).arg(&split_groups_i);
    // SAFETY: argument order and types match gemm_f16_mma's entry points (scales, payload, xh,
    // row_unscale, m, y, n_out, k, partials, tile_counters, split_groups); the caller checked the
    // x / y / weight lengths, the payload is 16-byte aligned (cp.async), the grid covers
    // ceil(m / 128) token tiles, every output tile and ceil(G / split_groups) non-empty splits
    // (geometry), the partials hold splits x tiles x 128 x ROWS f32 and the counters one zeroed
    // u32 per tile when splits > 1, and the kernel bounds every row and token index by m and n_out.
    unsafe { b.launch(cfg) }?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Per-SM shared memory of the H100/H200 (228 KB), for the two-CTA check.
    const H200_SMEM_PER_SM: usize = 228 * 1024;
    const H200: F16Device = F16Device { sms: 132, smem_per_sm: H200_SMEM_PER_SM };
    /// Opt-in shared memory per CTA of the A100 (163 KB), the smallest sm_80+ data-center part.
    const A100_SMEM_OPTIN: usize = 163 * 1024;
    const SCHEDULES: [F16Schedule; 4] =
        [F16Schedule::SplitK, F16Schedule::Round1, F16Schedule::FixedSplits(3), F16Schedule::FixedSplits(64)];

    #[test]
    fn geometry_covers_every_output_and_fits_shared_memory() {
        for bits in [QuantBits::One, QuantBits::Two] {
            for epilogue in [Epilogue::Store, Epilogue::Add, Epilogue::SwiGlu] {
                for (m, n_out) in [(64, 7), (300, 333), (512, 4096), (512, 12288), (4608, 27648), (1536, 3072)] {
                    for schedule in SCHEDULES {
                        let s = F16Shape { bits, epilogue, m, n_out, k: 4096 };
                        let g = geometry(&s, &H200, schedule).expect("valid shape");
                        let warps_n = if g.wide { QG_WIDE_WARPS_N } else { QG_NARROW_WARPS_N };
                        let per_tile = outputs_per_tile(epilogue, warps_n);
                        assert!(g.grid.0 as usize * per_tile >= n_out, "{s:?} {g:?}");
                        assert!((g.grid.0 as usize - 1) * per_tile < n_out, "an idle column of CTAs: {s:?} {g:?}");
                        assert!(g.grid.1 as usize * QG_TILE_TOKENS >= m);
                        // The splits cover K and none is empty (the kernel's split ranges).
                        let (splits, per) = (g.grid.2 as usize, g.split_groups);
                        assert!(splits * per >= s.k / GROUP && (splits - 1) * per < s.k / GROUP, "{s:?} {g:?}");
                        assert_eq!(g.threads as usize, QG_WARPS_M * warps_n * 32);
                        assert!(g.smem_bytes <= A100_SMEM_OPTIN, "{s:?} {g:?}");
                        if !g.wide {
                            assert_eq!(H200.ctas_per_sm(g.smem_bytes), 2, "{s:?} {g:?}");
                        }
                        if schedule != F16Schedule::Round1 {
                            assert!(!g.wide, "{s:?} {g:?}");
                        }
                    }
                }
            }
        }
        // Round 1: the DiT's widest GEMM fills many waves with the wide tile; Bonsai-8B's N = 4096
        // prefill GEMM at 512 tokens does not (64 wide CTAs), so it takes the narrow one.
        let dit = F16Shape { bits: QuantBits::Two, epilogue: Epilogue::Store, m: 4608, n_out: 27648, k: 3072 };
        assert!(geometry(&dit, &H200, F16Schedule::Round1).expect("valid").wide);
        let attn_out = F16Shape { bits: QuantBits::One, epilogue: Epilogue::Add, m: 512, n_out: 4096, k: 4096 };
        assert!(!geometry(&attn_out, &H200, F16Schedule::Round1).expect("valid").wide);
        // The split-K schedule halves attn_out's K to fill the second CTA slot of every SM.
        assert_eq!(geometry(&attn_out, &H200, F16Schedule::SplitK).expect("valid").grid, (32, 4, 2));
        let too_tall = F16Shape { m: (MAX_GRID_Y + 1) * QG_TILE_TOKENS, ..attn_out };
        assert!(geometry(&too_tall, &H200, F16Schedule::SplitK).is_err());
    }
}

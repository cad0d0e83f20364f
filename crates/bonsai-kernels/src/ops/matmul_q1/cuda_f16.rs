//! Launch of the f16 tensor-core GEMM (matmul_gemm_f16.cu): the activation pre-pass
//! `x_to_f16_rows_q*` into stream-ordered scratch, then `*_gemm_f16_128x{128,256}` or, split
//! over K, `*_gemm_f16_128x128_split` (docs/gemm-f16-notes.md, "Round 2b").

use std::sync::Arc;

use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut, LaunchConfig};

use super::matmul::{
    kernel_name, Epilogue, GemmKernel, F16_GEMM_MIN_TOKENS, QG_NARROW_WARPS_N, QG_PREP_THREADS, QG_STAGES,
    QG_TILE_TOKENS, QG_WARP_ROWS, QG_WIDE_MIN_WAVES, QG_WIDE_WARPS_N,
};
use super::{as_i32, device_attribute, expect_aligned16, opt_in_shared_memory, shape, LaunchError, QuantBits};
use crate::launch::{Gpu, sm_count};
use crate::launch_ex::Launch;
use crate::weights::GROUP;

/// Warp rows of the CTA (QG_WARPS_M): 2 x 64 = QG_TILE_TOKENS tokens.
const QG_WARPS_M: usize = 2;
/// Largest grid y (token tiles).
const MAX_GRID_Y: usize = 65_535;
/// K splits of the default split-K schedule (see [`default_splits`]).
const QG_DEFAULT_SPLITS: usize = 2;
/// Fewest 128-groups per split the default schedule accepts: shorter splits spend a large part
/// of their time filling the 3-stage ring and moving partial tiles.
const QG_MIN_SPLIT_GROUPS: usize = 4;

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
    pub(crate) fn op(&self) -> &'static str {
        self.epilogue.op_name()
    }
}

/// Grid, block and shared memory of one f16 GEMM launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct F16Geometry {
    pub wide: bool,
    /// (output tiles, token tiles, K splits); splits > 1 only with the narrow tile.
    pub grid: (u32, u32, u32),
    /// 128-groups per split (the last split runs what is left, at least one); K / 128 unsplit.
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

/// The default K split count for an unsplit grid of `ctas` CTAs (narrow or wide) and `groups`
/// 128-groups: split in two where the unsplit grid holds at most one CTA per SM (so the split
/// grid still runs in one wave of two narrow CTAs per SM: attn_out and down at pp512, 128 CTAs
/// on the H200's 132 SMs, both faster split: docs/kernel-notes.md, Prefill GEMMs), else not at
/// all.
fn default_splits(ctas: usize, groups: usize, sms: usize) -> usize {
    if ctas <= sms && groups >= QG_DEFAULT_SPLITS * QG_MIN_SPLIT_GROUPS {
        QG_DEFAULT_SPLITS
    } else {
        1
    }
}

/// The launch for `s` on a device with `sms` multiprocessors; `forced_splits` overrides the
/// default K split count (1: the unsplit kernel and tile choice; n >= 2: narrow tile, n splits
/// clamped to the 128-group count).
pub(crate) fn geometry(s: &F16Shape, sms: usize, forced_splits: Option<usize>) -> Result<F16Geometry, LaunchError> {
    let token_tiles = s.m.div_ceil(QG_TILE_TOKENS);
    if token_tiles > MAX_GRID_Y {
        return Err(shape(s.op(), format!("m = {} exceeds the grid's y range", s.m)));
    }
    let tiles = |warps_n| s.n_out.div_ceil(outputs_per_tile(s.epilogue, warps_n));
    let groups = (s.k / GROUP).max(1);
    let wide_unsplit = token_tiles * tiles(QG_WIDE_WARPS_N) >= QG_WIDE_MIN_WAVES * sms;
    let unsplit_warps_n = if wide_unsplit { QG_WIDE_WARPS_N } else { QG_NARROW_WARPS_N };
    let wanted = forced_splits.unwrap_or_else(|| default_splits(token_tiles * tiles(unsplit_warps_n), groups, sms));
    let wanted = wanted.clamp(1, groups);
    // ceil(G / wanted) groups per split; recounting the splits from that leaves none empty
    // (G = 6, 4 wanted: 2 per split, 3 splits).
    let split_groups = groups.div_ceil(wanted);
    let splits = groups.div_ceil(split_groups);
    let wide = wide_unsplit && splits == 1;
    let warps_n = if wide { QG_WIDE_WARPS_N } else { QG_NARROW_WARPS_N };
    let col_tiles = u32::try_from(tiles(warps_n)).map_err(|_| shape(s.op(), "too many rows".into()))?;
    Ok(F16Geometry {
        wide,
        grid: (col_tiles, token_tiles as u32, splits as u32),
        split_groups,
        threads: (QG_WARPS_M * warps_n * 32) as u32,
        smem_bytes: QG_STAGES * stage_bytes(s.bits, warps_n),
    })
}

impl F16Geometry {
    fn splits(&self) -> usize {
        self.grid.2 as usize
    }
    /// Output tiles of the grid (one split-K arrival counter each).
    fn tiles(&self) -> usize {
        self.grid.0 as usize * self.grid.1 as usize
    }
    /// f32 values of the split-K partial tiles: splits x tiles x (128 tokens x ROWS), and a CTA
    /// has one thread per weight row (ROWS = threads, a static_assert in the kernel).
    fn partial_len(&self) -> usize {
        self.splits() * self.tiles() * QG_TILE_TOKENS * self.threads as usize
    }
}

/// Whether every f16 GEMM launch, whatever its tile, bits and split count, fits this device's
/// opt-in shared memory: its largest CTA (the wide tile over 2-bit weights) does. True on the
/// A100 (163 KB) and Hopper / sm_100 (227 KB); the 99 KB of sm_86/89/120 hold no f16 tile at
/// all, not even the narrow one over 1-bit weights (105,216 bytes), and [`auto_gemm`] picks
/// bf16x3 there.
pub(crate) fn fits_every_tile(stream: &Arc<CudaStream>) -> Result<bool, LaunchError> {
    let largest = QG_STAGES * stage_bytes(QuantBits::Two, QG_WIDE_WARPS_N);
    Ok(largest <= device_attribute(stream, CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?)
}

/// Whether the f16 GEMM's CTA for `s` fits this device's opt-in shared memory (sm_86/89/120 allow
/// 99 KB: no f16 tile fits there).
pub(crate) fn fits_device(stream: &Arc<CudaStream>, s: &F16Shape) -> Result<bool, LaunchError> {
    let sms = sm_count(stream)?;
    let optin = device_attribute(stream, CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?;
    Ok(geometry(s, sms, None)?.smem_bytes <= optin)
}

/// The GEMM for m tokens when the caller does not choose one.
pub(crate) fn auto_gemm(stream: &Arc<CudaStream>, s: &F16Shape) -> Result<GemmKernel, LaunchError> {
    let f16 = s.m >= F16_GEMM_MIN_TOKENS;
    Ok(if f16 && s.m <= super::matmul::SMALL_M_MAX_TOKENS {
        GemmKernel::TensorCoreSmall
    } else if f16 && super::matmul_wgmma::device_has_wgmma(stream)? {
        GemmKernel::TensorCoreWgmma
    } else if f16 && fits_device(stream, s)? {
        GemmKernel::TensorCoreF16
    } else {
        GemmKernel::TensorCoreBf16x3
    })
}

/// Runs the pre-pass for `input` (of RMSNorm(x) when it gives the norm's weights and eps; none
/// for prepared rows) and the GEMM. `x` (m x K f32, 16-byte aligned), `y` (m x n_out f32) and
/// the norm weights' length (K f32) were checked by the caller; `scales` / `payload` hold the
/// matrix in group-128 layout; `forced_splits` as in [`geometry`].
pub(crate) fn launch(
    gpu: Gpu<'_>,
    s: F16Shape,
    forced_splits: Option<usize>,
    (scales, payload, x, y): (u64, u64, u64, u64),
    input: F16Input,
) -> Result<(), LaunchError> {
    let op = s.op();
    expect_aligned16(op, "weight payload", payload)?;
    let sms = sm_count(gpu.stream)?;
    let optin = device_attribute(gpu.stream, CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?;
    let geo = geometry(&s, sms, forced_splits)?;
    if geo.smem_bytes > optin {
        return Err(shape(
            op,
            format!("the f16 GEMM needs {} bytes of shared memory per CTA, this device allows {optin}", geo.smem_bytes),
        ));
    }
    let (m_i, n_i, k_i) = (as_i32(op, "m", s.m)?, as_i32(op, "n_out", s.n_out)?, as_i32(op, "K", s.k)?);
    let (xh_ptr, unscale_ptr, _scratch) = f16_operand(gpu, &s, x, input)?;

    let mut name = kernel_name(s.bits, s.epilogue, s.m, super::matmul::GemvKernel::Binary, GemmKernel::TensorCoreF16, geo.wide);
    if geo.splits() > 1 {
        name.push_str(SPLIT_SUFFIX);
    }
    let gemm = gpu.function(&name)?;
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
    if geo.splits() == 1 {
        let mut b = Launch::new(gpu, gemm);
        b.arg(&scales).arg(&payload).arg(&xh_ptr).arg(&unscale_ptr).arg(&m_i).arg(&y).arg(&n_i).arg(&k_i);
        // SAFETY: argument order and types match gemm_f16_mma's unsplit entry points (scales,
        // payload, xh, row_unscale, m, y, n_out, k); the caller checked the x / y / weight
        // lengths, the payload is 16-byte aligned (cp.async), the grid covers ceil(m / 128) token
        // tiles and every output tile, and the kernel bounds every row and token index by m and
        // n_out.
        unsafe { b.launch(cfg) }?;
        return Ok(());
    }
    // SAFETY: uninitialised; split z of a tile writes its whole partial tile before it counts
    // itself in, and only the CTA counted last reads the partials (qg_split_k_merge).
    let mut partials: CudaSlice<f32> = unsafe { gpu.stream.alloc(geo.partial_len()) }?;
    // One arrival counter per output tile, zeroed on the gpu.stream before the GEMM.
    let mut counters: CudaSlice<u32> = gpu.stream.alloc_zeros(geo.tiles())?;
    let (partials_ptr, _g2) = partials.device_ptr_mut(gpu.stream);
    let (counters_ptr, _g3) = counters.device_ptr_mut(gpu.stream);
    let split_groups = as_i32(op, "split_groups", geo.split_groups)?;
    let mut b = Launch::new(gpu, gemm);
    b.arg(&scales).arg(&payload).arg(&xh_ptr).arg(&unscale_ptr).arg(&m_i).arg(&y).arg(&n_i).arg(&k_i);
    b.arg(&partials_ptr).arg(&counters_ptr).arg(&split_groups);
    // SAFETY: as the unsplit launch above, plus: the `_split` entry points take (partials,
    // tile_counters, split_groups) after k; the grid's z holds ceil(G / split_groups) non-empty
    // splits (geometry), the partials hold splits x tiles x 128 x ROWS f32 and the counters one
    // zeroed u32 per output tile (allocated above for this grid).
    unsafe { b.launch(cfg) }?;
    Ok(())
}

/// The activation pre-pass of both f16 GEMMs (this one and the wgmma one): `x_to_f16_rows_q*`
/// (with `norm`: `x_to_f16_rows_norm_q*`, the pre-pass of RMSNorm(x; weights, eps), bit for bit
/// the rms_norm kernel then the plain pre-pass) into stream-ordered scratch, returning (xh: m x K
/// f16 in pair-slot order, 2^-e per row). `x` (m x K f32, 16-byte aligned) and the norm weights'
/// length (K f32) were checked by the caller.
pub(crate) fn prepass(
    gpu: Gpu<'_>,
    s: &F16Shape,
    x: u64,
    norm: Option<(u64, f32)>,
) -> Result<(CudaSlice<u16>, CudaSlice<f32>), LaunchError> {
    let op = s.op();
    let k_i = as_i32(op, "K", s.k)?;
    as_i32(op, "m*K", s.m * s.k)?;
    // SAFETY: gpu.stream-ordered allocations, uninitialised; the pre-pass below writes every element
    // of both (one CTA per token row writes all K slots of its row and the row's scale) before
    // the GEMM, later on the same gpu.stream, reads them.
    let mut xh: CudaSlice<u16> = unsafe { gpu.stream.alloc(s.m * s.k) }?;
    // SAFETY: as above.
    let mut unscale: CudaSlice<f32> = unsafe { gpu.stream.alloc(s.m) }?;
    {
        let (xh_ptr, _g0) = xh.device_ptr_mut(gpu.stream);
        let (unscale_ptr, _g1) = unscale.device_ptr_mut(gpu.stream);
        let q = if s.bits == QuantBits::One { "q1" } else { "q2" };
        let grid_dim = (s.m as u32, 1, 1);
        let block_dim = (QG_PREP_THREADS, 1, 1);
        match norm {
            None => {
                let prep = gpu.function(&format!("x_to_f16_rows_{q}"))?;
                let mut b = Launch::new(gpu, prep);
                b.arg(&x).arg(&k_i).arg(&xh_ptr).arg(&unscale_ptr);
                // SAFETY: x_to_f16_rows_q*(const float* x, int k, u16* xh, float* row_unscale): x
                // holds m x K floats 16-byte aligned (checked by the caller), K % 128 == 0
                // (validated weights), xh holds m x K and row_unscale m elements (allocated
                // above); one CTA per row, m CTAs.
                unsafe { b.launch(LaunchConfig { grid_dim, block_dim, shared_mem_bytes: 0 }) }?;
            }
            Some((norm_w, eps)) => {
                expect_aligned16(op, "norm weights", norm_w)?;
                let prep = gpu.function(&format!("x_to_f16_rows_norm_{q}"))?;
                // The normed row stays in shared memory.
                let row_bytes = s.k * std::mem::size_of::<f32>();
                opt_in_shared_memory(op, gpu.stream, prep, row_bytes, "the normed pre-pass' row")?;
                let mut b = Launch::new(gpu, prep);
                b.arg(&x).arg(&k_i).arg(&norm_w).arg(&eps).arg(&xh_ptr).arg(&unscale_ptr);
                // SAFETY: x_to_f16_rows_norm_q*(const float* x, int k, const float* norm_w, float
                // eps, u16* xh, float* row_unscale): as the plain pre-pass, plus norm_w holds K
                // floats (checked by the caller), 16-byte aligned (checked above), and the CTA's
                // dynamic shared memory holds the K-float row.
                unsafe { b.launch(LaunchConfig { grid_dim, block_dim, shared_mem_bytes: row_bytes as u32 }) }?;
            }
        }
    }
    Ok((xh, unscale))
}

/// What an f16 GEMM multiplies: f32 rows of x, which the launcher's pre-pass converts (of
/// RMSNorm(x; weights, eps) when `norm` is given), or rows already in the pre-pass's form
/// ([`F16Rows`], written by a kernel that ends with the pre-pass).
#[derive(Clone, Copy, Debug)]
pub(crate) enum F16Input {
    Rows { norm: Option<(u64, f32)> },
    Prepared { xh: u64, unscale: u64 },
}

/// The pre-pass's output for the GEMM of `s`: (xh, row_unscale) device pointers, and the
/// stream-ordered scratch holding them when the pre-pass runs here (dropped after the GEMM's
/// launch, which frees it on the stream after the GEMM). `x` is read only for [`F16Input::Rows`].
pub(crate) fn f16_operand(
    gpu: Gpu<'_>,
    s: &F16Shape,
    x: u64,
    input: F16Input,
) -> Result<(u64, u64, Option<(CudaSlice<u16>, CudaSlice<f32>)>), LaunchError> {
    match input {
        F16Input::Prepared { xh, unscale } => Ok((xh, unscale, None)),
        F16Input::Rows { norm } => {
            let (mut xh, mut unscale) = prepass(gpu, s, x, norm)?;
            // One stream: the guards track nothing the launch on the same stream needs.
            let xh_ptr = xh.device_ptr_mut(gpu.stream).0;
            let unscale_ptr = unscale.device_ptr_mut(gpu.stream).0;
            Ok((xh_ptr, unscale_ptr, Some((xh, unscale))))
        }
    }
}

/// Activations in the f16 GEMMs' input form, what their pre-pass writes: `rows` rows of K f16
/// values in the pair-slot order of `bits`-bit weights (`mma_slot_k`), each row scaled by a power
/// of two 2^e, and each row's 2^-e. A kernel that ends with the pre-pass writes them
/// (`launch::hadamard::rotate_f16_rows`) for one or more GEMMs of those weights' format to read
/// ([`super::matmul::matmul_f16_rows`]); the buffers are sized once for the largest use.
pub struct F16Rows {
    xh: CudaSlice<u16>,
    unscale: CudaSlice<f32>,
    /// (bits, rows, K) of the last write; None before it.
    layout: Option<(QuantBits, usize, usize)>,
}

impl F16Rows {
    /// Room for `max_rows` rows of up to `max_values` values in all.
    pub fn new(stream: &Arc<CudaStream>, max_rows: usize, max_values: usize) -> Result<Self, LaunchError> {
        Ok(F16Rows { xh: stream.alloc_zeros(max_values.max(1))?, unscale: stream.alloc_zeros(max_rows.max(1))?, layout: None })
    }
    /// The f16 values and the row scales (verify reads them back).
    pub(crate) fn buffers(&self) -> (&CudaSlice<u16>, &CudaSlice<f32>) {
        (&self.xh, &self.unscale)
    }
    /// Device pointers (xh, row_unscale) for a kernel writing `rows` rows of K values for
    /// `bits`-bit weights, checked against the buffers' size.
    pub(crate) fn write_ptrs(
        &mut self,
        stream: &Arc<CudaStream>,
        op: &'static str,
        (bits, rows, k): (QuantBits, usize, usize),
    ) -> Result<(u64, u64), LaunchError> {
        if rows * k > self.xh.len() || rows > self.unscale.len() {
            return Err(shape(op, format!("{rows} f16 rows of {k} exceed the buffer ({} values, {} rows)", self.xh.len(), self.unscale.len())));
        }
        self.layout = Some((bits, rows, k));
        // One stream: the guards track nothing a launch on the same stream needs.
        Ok((self.xh.device_ptr_mut(stream).0, self.unscale.device_ptr_mut(stream).0))
    }
    /// Device pointers (xh, row_unscale) of the last write, which must hold `rows` rows of K
    /// values for `bits`-bit weights.
    pub(crate) fn read_ptrs(
        &self,
        stream: &Arc<CudaStream>,
        op: &'static str,
        (bits, rows, k): (QuantBits, usize, usize),
    ) -> Result<(u64, u64), LaunchError> {
        if self.layout != Some((bits, rows, k)) {
            return Err(shape(op, format!("f16 rows hold {:?} (bits, rows, K), the GEMM wants ({bits:?}, {rows}, {k})", self.layout)));
        }
        Ok((self.xh.device_ptr(stream).0, self.unscale.device_ptr(stream).0))
    }
}

/// Name suffix of the split-K entry points (narrow tile only).
const SPLIT_SUFFIX: &str = "_split";

#[cfg(test)]
mod tests {
    use super::*;

    /// SMs of the H200.
    const H200_SMS: usize = 132;
    use crate::launch::smem_limits::{H200_SMEM_PER_SM, RESERVED_SMEM_PER_CTA};
    /// Opt-in shared memory per CTA of the A100 (163 KB), the smallest sm_80+ data-center part.
    const A100_SMEM_OPTIN: usize = 163 * 1024;
    /// The default schedule, unsplit, and forced splits (7 leaves a short last split at K 4096:
    /// 32 groups, 5 per split, 7 splits of 5 + 2).
    const SPLIT_CHOICES: [Option<usize>; 4] = [None, Some(1), Some(2), Some(7)];

    #[test]
    fn geometry_covers_every_output_and_fits_shared_memory() {
        for bits in [QuantBits::One, QuantBits::Two] {
            for epilogue in [Epilogue::Store, Epilogue::Add, Epilogue::SwiGlu] {
                for (m, n_out) in [(64, 7), (300, 333), (512, 4096), (512, 12288), (4608, 27648), (1536, 3072)] {
                    for forced in SPLIT_CHOICES {
                        let s = F16Shape { bits, epilogue, m, n_out, k: 4096 };
                        let g = geometry(&s, H200_SMS, forced).expect("valid shape");
                        let warps_n = if g.wide { QG_WIDE_WARPS_N } else { QG_NARROW_WARPS_N };
                        let per_tile = outputs_per_tile(epilogue, warps_n);
                        assert!(g.grid.0 as usize * per_tile >= n_out, "{s:?} {g:?}");
                        assert!((g.grid.0 as usize - 1) * per_tile < n_out, "an idle column of CTAs: {s:?} {g:?}");
                        assert!(g.grid.1 as usize * QG_TILE_TOKENS >= m);
                        // The splits cover K and none is empty (the kernel's split ranges).
                        let (splits, per, groups) = (g.splits(), g.split_groups, s.k / GROUP);
                        assert!(splits * per >= groups && (splits - 1) * per < groups, "{s:?} {g:?}");
                        assert!(splits == 1 || !g.wide, "split-K runs the narrow tile only: {s:?} {g:?}");
                        if let Some(n) = forced {
                            assert_eq!(splits, n, "{s:?} {g:?}");
                        }
                        assert_eq!(g.threads as usize, QG_WARPS_M * warps_n * 32);
                        assert!(g.smem_bytes <= A100_SMEM_OPTIN, "{s:?} {g:?}");
                        if !g.wide {
                            assert!(2 * (g.smem_bytes + RESERVED_SMEM_PER_CTA) <= H200_SMEM_PER_SM, "{s:?} {g:?}");
                        }
                    }
                }
            }
        }
        // The DiT's widest GEMM fills many waves with the wide tile; Bonsai-8B's N = 4096 prefill
        // GEMM at 512 tokens does not (64 wide CTAs), so it takes the narrow one.
        let dit = F16Shape { bits: QuantBits::Two, epilogue: Epilogue::Store, m: 4608, n_out: 27648, k: 3072 };
        assert!(geometry(&dit, H200_SMS, None).expect("valid").wide);
        let attn_out = F16Shape { bits: QuantBits::One, epilogue: Epilogue::Add, m: 512, n_out: 4096, k: 4096 };
        assert!(!geometry(&attn_out, H200_SMS, Some(1)).expect("valid").wide);
        let too_tall = F16Shape { m: (MAX_GRID_Y + 1) * QG_TILE_TOKENS, ..attn_out };
        assert!(geometry(&too_tall, H200_SMS, None).is_err());
    }

    /// Bonsai-8B pp512 on the H200: attn_out and down (128 narrow CTAs) split in two; qkv (192
    /// CTAs), the 12288-row bench shape and gate|up (wide) keep main's unsplit grid.
    #[test]
    fn default_schedule_splits_only_the_one_wave_shapes() {
        let shape = |n_out, k, epilogue| F16Shape { bits: QuantBits::One, epilogue, m: 512, n_out, k };
        let splits = |s: F16Shape| geometry(&s, H200_SMS, None).expect("valid").grid;
        assert_eq!(splits(shape(4096, 4096, Epilogue::Add)), (32, 4, 2), "attn_out");
        assert_eq!(splits(shape(4096, 12288, Epilogue::Add)), (32, 4, 2), "down");
        assert_eq!(splits(shape(6144, 4096, Epilogue::Store)), (48, 4, 1), "qkv");
        assert_eq!(splits(shape(12288, 4096, Epilogue::Store)), (96, 4, 1), "12288 x 4096");
        let gate_up = geometry(&shape(12288, 4096, Epilogue::SwiGlu), H200_SMS, None).expect("valid");
        assert!(gate_up.wide && gate_up.splits() == 1, "gate|up {gate_up:?}");
        // Too few groups for two splits of QG_MIN_SPLIT_GROUPS: unsplit.
        assert_eq!(splits(shape(4096, 7 * GROUP, Epilogue::Store)).2, 1);
        // A forced split count above the group count is clamped to one group per split.
        let g = geometry(&shape(333, 3 * GROUP, Epilogue::Store), H200_SMS, Some(8)).expect("valid");
        assert_eq!((g.splits(), g.split_groups), (3, 1));
    }

    #[test]
    fn split_entry_points_are_registered() {
        let names: Vec<&str> = crate::cuda::library::entry_points().collect();
        for bits in [QuantBits::One, QuantBits::Two] {
            for epilogue in [Epilogue::Store, Epilogue::Add, Epilogue::SwiGlu] {
                let gemv = super::super::matmul::GemvKernel::Binary;
                let name = kernel_name(bits, epilogue, 512, gemv, GemmKernel::TensorCoreF16, false) + SPLIT_SUFFIX;
                assert!(names.contains(&name.as_str()), "{name} is not a registered entry point");
            }
        }
    }
}

//! Launch of the small-m GEMM (matmul_gemm_small.cu): the f16 pre-pass shared with the other f16
//! GEMMs ([`super::matmul_f16::prepass`]), then `*_gemm_small{8,16,32}` over (row blocks, K splits).

use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::{CudaSlice, DevicePtrMut, LaunchConfig};

use super::matmul::{Epilogue, SMALL_M_MAX_TOKENS};
use super::matmul_f16::{f16_operand, F16Input, F16Shape};
use super::{as_i32, device_attribute, opt_in_shared_memory, shape, LaunchError};
use crate::launch::{sm_count, Gpu};
use crate::launch_ex::Launch;
use crate::weights::GROUP;

/// Warps (16-row tiles) of a CTA (SM_WARPS).
const WARPS: usize = 16;
/// Padding of each activation row in shared memory, in u32 words (SM_PAD_WORDS).
const PAD_WORDS: usize = 4;
/// Largest grid y (the K splits) of every CUDA device.
const MAX_GRID_Y: usize = 65_535;
/// Groups of a layout block (LAYOUT_BLOCK_GROUPS): the unit a warp loads, when K allows.
const BLOCK_GROUPS: usize = 4;
/// Shared memory one CTA's activation slice may take (the splits keep it within this): a CTA has
/// its SM to itself anyway (its 512 threads' registers), and 144 KB hold 16 tokens of K = 4096
/// unsplit. Devices that allow a CTA less (sm_86 / 89: 99 KB) split K further instead.
const SLICE_BUDGET_BYTES: usize = 144 * 1024;
/// What one more partial round trip (store, count, the last CTA's loads) costs, in units of a
/// warp's main loop (4 groups): the split choice weighs it against the units it saves.
const MERGE_COST_UNITS: usize = 2;

/// Grid and shared memory of one launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SmallGeometry {
    /// Token columns of the kernel (8, 16 or 32: the entry point).
    pub tokens: usize,
    pub row_ctas: usize,
    pub splits: usize,
    /// Layout units per split (the last split runs what is left, at least one).
    pub split_units: usize,
    pub smem_bytes: usize,
}

/// The launch for `s` on a device of `sms` SMs: one CTA of WARPS tiles per row block, and the K
/// splits that spread the row blocks over the SMs best. A CTA holds an SM's registers, so the
/// time of a grid is its waves times the units each CTA runs, plus the merge of a split grid.
/// `smem_limit`: the dynamic shared memory a CTA may opt in to on the device.
pub(crate) fn geometry(s: &F16Shape, sms: usize, smem_limit: usize) -> Result<SmallGeometry, LaunchError> {
    if s.m == 0 || s.m > SMALL_M_MAX_TOKENS {
        return Err(shape(s.op(), format!("the small-m GEMM serves 1..={SMALL_M_MAX_TOKENS} tokens, not {}", s.m)));
    }
    let tokens = s.m.next_power_of_two().max(8);
    let tile_outs = if s.epilogue == Epilogue::SwiGlu { 8 } else { 16 };
    let row_ctas = s.n_out.div_ceil(tile_outs).div_ceil(WARPS);
    let groups = s.k / GROUP;
    let unit_groups = if groups % BLOCK_GROUPS == 0 { BLOCK_GROUPS } else { 1 };
    let units = groups / unit_groups;
    let slice_bytes = |split_units: usize| tokens * (split_units * unit_groups * GROUP / 2 + PAD_WORDS) * 4;
    let budget = SLICE_BUDGET_BYTES.min(smem_limit);
    let max_units = (1..=units).take_while(|&u| slice_bytes(u) <= budget).last().unwrap_or(1);
    let min_splits = units.div_ceil(max_units);
    let cost = |splits: usize| {
        let per_split = units.div_ceil(splits);
        (row_ctas * splits).div_ceil(sms) * per_split + if splits > 1 { MERGE_COST_UNITS } else { 0 }
    };
    let best = (min_splits..=units).fold(min_splits, |best, sp| if cost(sp) < cost(best) { sp } else { best });
    let split_units = units.div_ceil(best);
    let splits = units.div_ceil(split_units);
    Ok(SmallGeometry { tokens, row_ctas, splits, split_units, smem_bytes: slice_bytes(split_units) })
}

/// Runs the pre-pass for `input` (of RMSNorm(x) when it gives the norm's weights and eps; none
/// for prepared rows) and the small-m GEMM.
/// `x` (m x K f32, 16-byte aligned), `y` (m x n_out f32) and the norm weights' length (K f32) were
/// checked by the caller; `scales` / `payload` hold the matrix in group-128 layout.
pub(crate) fn launch(
    gpu: Gpu<'_>,
    s: F16Shape,
    (scales, payload, x, y): (u64, u64, u64, u64),
    input: F16Input,
) -> Result<(), LaunchError> {
    let op = s.op();
    super::matmul::check_gemv_weight_alignment(op, payload, scales)?;
    let sms = sm_count(gpu.stream)?;
    let optin = device_attribute(gpu.stream, CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?;
    let geo = geometry(&s, sms, optin)?;
    let name = super::matmul::kernel_name(
        s.bits,
        s.epilogue,
        s.m,
        super::matmul::GemvKernel::Binary,
        super::matmul::GemmKernel::TensorCoreSmall,
        false,
    );
    let func = gpu.function(&name)?;
    opt_in_shared_memory(op, gpu.stream, func, geo.smem_bytes, "the small-m GEMM's activation slice")?;
    let (m_i, n_i, k_i) = (as_i32(op, "m", s.m)?, as_i32(op, "n_out", s.n_out)?, as_i32(op, "K", s.k)?);
    let split_units_i = as_i32(op, "split_units", geo.split_units)?;
    let row_ctas = u32::try_from(geo.row_ctas).map_err(|_| shape(op, "too many rows".into()))?;
    if geo.splits > MAX_GRID_Y {
        return Err(shape(op, format!("K = {} needs {} splits, over the grid's y range", s.k, geo.splits)));
    }
    let (xh_ptr, unscale_ptr, _scratch) = f16_operand(gpu, &s, x, input)?;
    let acc_per_thread = geo.tokens / 2;
    // SAFETY: uninitialised; split z of a row block writes its whole partial before it counts
    // itself in, and only the CTA counted last reads the partials. One f32 when unsplit (the
    // kernel never touches it then).
    let partial_len = if geo.splits > 1 { geo.splits * geo.row_ctas * acc_per_thread * WARPS * 32 } else { 1 };
    let mut partials: CudaSlice<f32> = unsafe { gpu.stream.alloc(partial_len) }?;
    // One arrival counter per row block, zeroed on the stream before the GEMM.
    let mut counters: CudaSlice<u32> = gpu.stream.alloc_zeros(if geo.splits > 1 { geo.row_ctas } else { 1 })?;
    let (partials_ptr, _g2) = partials.device_ptr_mut(gpu.stream);
    let (counters_ptr, _g3) = counters.device_ptr_mut(gpu.stream);
    let cfg = LaunchConfig {
        grid_dim: (row_ctas, geo.splits as u32, 1),
        block_dim: ((WARPS * 32) as u32, 1, 1),
        shared_mem_bytes: geo.smem_bytes as u32,
    };
    let mut b = Launch::new(gpu, func);
    b.arg(&scales).arg(&payload).arg(&xh_ptr).arg(&unscale_ptr).arg(&m_i).arg(&y).arg(&n_i).arg(&k_i);
    b.arg(&partials_ptr).arg(&counters_ptr).arg(&split_units_i);
    // SAFETY: argument order and types match gemm_small's entry points (scales, payload, xh,
    // row_unscale, m, y, n_out, k, partials, counters, split_units); the caller checked the x / y /
    // weight lengths, the weights' alignment for the 16-byte unit loads was checked above, xh /
    // row_unscale hold m x K and m values (prepass), the grid's x covers every tile (tile rows past
    // n_out are clamped for loads and never stored), its y holds ceil(units / split_units)
    // non-empty splits, the partials hold splits x row blocks x accumulators x threads f32 and the
    // counters one zeroed u32 per row block, and the shared memory holds the 8, 16 or 32 padded token
    // rows of the longest split.
    unsafe { b.launch(cfg) }?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::QuantBits;

    /// The dynamic shared memory a CTA may opt in to on sm_90, and on sm_86 / 89.
    const H200_OPTIN: usize = 227 * 1024;
    const AMPERE_CONSUMER_OPTIN: usize = 99 * 1024;

    #[test]
    fn constants_match_the_kernel() {
        let define = |name| crate::launch::tests::cu_define("ops/matmul_q1/matmul_gemm_small.cu", name);
        assert_eq!(define("SM_MAX_TOKENS"), SMALL_M_MAX_TOKENS);
        assert_eq!(define("SM_WARPS"), WARPS);
        assert_eq!(define("SM_PAD_WORDS"), PAD_WORDS);
    }

    /// The Bonsai-8B decode shapes at 16 tokens on the H200's 132 SMs.
    #[test]
    fn splits_spread_the_row_blocks_over_the_sms() {
        let shape = |n_out, k, epilogue, m| F16Shape { bits: QuantBits::One, epilogue, m, n_out, k };
        // attn_out: 16 row blocks x 8 units -> 8 splits of one unit.
        let g = geometry(&shape(4096, 4096, Epilogue::Add, 16), 132, H200_OPTIN).unwrap();
        assert_eq!((g.row_ctas, g.splits, g.split_units), (16, 8, 1));
        // down: 16 x 24 units -> 8 splits of 3.
        let g = geometry(&shape(4096, 12288, Epilogue::Add, 16), 132, H200_OPTIN).unwrap();
        assert_eq!((g.row_ctas, g.splits, g.split_units), (16, 8, 3));
        // gate|up: 96 row blocks fill most SMs unsplit.
        let g = geometry(&shape(12288, 4096, Epilogue::SwiGlu, 16), 132, H200_OPTIN).unwrap();
        assert_eq!((g.row_ctas, g.splits), (96, 1));
        // Every slice fits its budget, every split is non-empty.
        for (n_out, k) in [(151936, 4096), (4096, 12288), (40, 384), (17, 128)] {
            for m in [2, 8, 9, 16, 17, 32] {
                for optin in [H200_OPTIN, AMPERE_CONSUMER_OPTIN] {
                    let g = geometry(&shape(n_out, k, Epilogue::Store, m), 132, optin).unwrap();
                    let units = if (k / GROUP) % 4 == 0 { k / GROUP / 4 } else { k / GROUP };
                    assert!(g.smem_bytes <= SLICE_BUDGET_BYTES.min(optin), "{n_out} x {k} m {m}");
                    assert!((g.splits - 1) * g.split_units < units && g.splits * g.split_units >= units);
                }
            }
        }
        assert!(geometry(&shape(4096, 4096, Epilogue::Add, 33), 132, H200_OPTIN).is_err());
    }
}

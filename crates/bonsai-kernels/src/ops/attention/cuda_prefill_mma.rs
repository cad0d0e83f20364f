//! Launcher of the tensor-core prefill attention (attention_prefill_mma.cu): batches of more than
//! [`super::DECODE_MAX_TOKENS`] tokens run it where it has an entry point for the head shape
//! ([`prefill_mma_fits`]) and the device lets a CTA opt in to its shared memory
//! ([`prefill_mma_fits_in`], [`prefill_mma_fits_on`]), `attention_split_keys` otherwise
//! ([`super::choose_kernel`]).

use std::sync::Arc;

use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut, LaunchConfig};

use crate::launch::{Gpu, KvCache, QkvRows, 
    as_i32, device_attribute, expect_aligned16, opt_in_shared_memory, read_ptr, shape, write_ptr, HeadShape,
    LaunchError,
};
use cudarc::driver::sys::CUdevice_attribute;
use crate::launch_ex::Launch;

const OP: &str = "attention";

/// Which kernel runs attention for batches of more than [`super::DECODE_MAX_TOKENS`] tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrefillKernel {
    /// `attention_split_keys` (CUDA-core FMAs).
    SplitKeys,
    /// `attention_prefill_mma_hd*` (mma.sync f16 with split q and p; the default).
    Mma,
}

/// Query rows (tokens x GQA heads) per CTA (`APM_ROWS`): a GQA group up to it runs, floor(64 / G)
/// tokens per CTA (the `_any_group` entry points where G does not divide it).
pub const PREFILL_MMA_ROWS: usize = 64;
/// Keys per K/V tile (`APM_BLOCK_K`).
pub const PREFILL_MMA_BLOCK_K: usize = 64;
/// Padding of each shared-memory row, in halves (`APM_PAD`).
const PREFILL_MMA_PAD: usize = 8;
const PREFILL_MMA_THREADS: u32 = 128;

/// The entry point for `head_dim` and GQA groups dividing [`PREFILL_MMA_ROWS`], if the kernel has
/// one.
pub fn prefill_mma_entry_point(head_dim: usize) -> Option<&'static str> {
    match head_dim {
        64 => Some("attention_prefill_mma_hd64"),
        128 => Some("attention_prefill_mma_hd128"),
        256 => Some("attention_prefill_mma_hd256"),
        _ => None,
    }
}

/// The entry point for a head shape: head_dim 64, 128 or 256; a GQA group dividing
/// [`PREFILL_MMA_ROWS`] takes [`prefill_mma_entry_point`], any other group up to it the
/// `_any_group` one (idle rows where the group does not divide 64).
pub fn prefill_mma_kernel(shape_: HeadShape) -> Option<&'static str> {
    let group = if shape_.n_kv == 0 || shape_.n_q % shape_.n_kv != 0 { 0 } else { shape_.n_q / shape_.n_kv };
    if group == 0 || group > PREFILL_MMA_ROWS {
        return None;
    }
    if PREFILL_MMA_ROWS % group == 0 {
        return prefill_mma_entry_point(shape_.head_dim);
    }
    match shape_.head_dim {
        64 => Some("attention_prefill_mma_hd64_any_group"),
        128 => Some("attention_prefill_mma_hd128_any_group"),
        256 => Some("attention_prefill_mma_hd256_any_group"),
        _ => None,
    }
}

/// Whether the tensor-core kernel has an entry point for this head shape ([`prefill_mma_kernel`]),
/// whatever the device.
pub fn prefill_mma_fits(shape_: HeadShape) -> bool {
    prefill_mma_kernel(shape_).is_some()
}

/// [`prefill_mma_fits`] on a device whose CTAs may opt in to `smem_optin` bytes of shared memory:
/// head_dim 256 needs 202,752 (sm_90's 227 KB only), head_dim 128 104,448 (more than the 99 KB of
/// sm_86, sm_89 and sm_120), head_dim 64 55,296.
pub fn prefill_mma_fits_in(shape_: HeadShape, smem_optin: usize) -> bool {
    prefill_mma_fits(shape_) && prefill_mma_shared_bytes(shape_.head_dim) <= smem_optin
}

/// [`prefill_mma_fits_in`] on the stream's device.
pub fn prefill_mma_fits_on(stream: &Arc<CudaStream>, shape_: HeadShape) -> Result<bool, LaunchError> {
    let optin = device_attribute(stream, CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?;
    Ok(prefill_mma_fits_in(shape_, optin))
}

/// Dynamic shared memory of one CTA: q hi and lo [ROWS], K and V double-buffered [2][BLOCK_K],
/// each row hd + PAD halves.
pub fn prefill_mma_shared_bytes(head_dim: usize) -> usize {
    (2 * PREFILL_MMA_ROWS + 4 * PREFILL_MMA_BLOCK_K)
        * (head_dim + PREFILL_MMA_PAD)
        * std::mem::size_of::<u16>()
}

/// One launch of `entry` (an `attention_prefill_mma_hd*` entry point, [`prefill_mma_kernel`]) for
/// `m` tokens; the caller checked the buffer lengths and the head shape (attention()).
#[allow(clippy::too_many_arguments)]
pub(super) fn attention_prefill_mma(
    gpu: Gpu<'_>,
    rows: QkvRows<'_, impl DevicePtr<f32>, &impl DevicePtr<u32>>,
    cache: KvCache<&impl DevicePtr<u16>, &impl DevicePtr<u32>>,
    out: &mut impl DevicePtrMut<f32>,
    entry: &'static str,
) -> Result<(), LaunchError> {
    let QkvRows { qkv, m, shape: shape_, pos0 } = rows;
    let KvCache { k: k_cache, v: v_cache, table, max_seq } = cache;
    let hd = shape_.head_dim;
    if prefill_mma_kernel(shape_) != Some(entry) {
        return Err(shape(OP, format!("prefill attention on tensor cores: {entry} does not take {shape_:?}")));
    }
    let group = shape_.n_q / shape_.n_kv;
    let tokens_per_cta = PREFILL_MMA_ROWS / group;
    let blocks = u32::try_from(m.div_ceil(tokens_per_cta))
        .ok()
        .filter(|&b| b <= 65_535)
        .ok_or_else(|| shape(OP, "too many tokens".into()))?;
    let (m_i, n_q, n_kv, max_seq_i) = (
        as_i32(OP, "m", m)?,
        as_i32(OP, "n_q", shape_.n_q)?,
        as_i32(OP, "n_kv", shape_.n_kv)?,
        as_i32(OP, "max_seq", max_seq)?,
    );
    let f = gpu.function(entry)?;
    opt_in_shared_memory(OP, gpu.stream, f, prefill_mma_shared_bytes(hd), &format!("head_dim {hd}"))?;
    // log2(e) / sqrt(hd) in f64, rounded once to f32 (the error bound counts that rounding).
    let scale_log2 = (std::f64::consts::LOG2_E / (hd as f64).sqrt()) as f32;
    let (q_p, _a) = read_ptr(qkv, gpu.stream);
    let (p0, _b) = read_ptr(pos0, gpu.stream);
    let (t_p, _t) = read_ptr(table, gpu.stream);
    let (k_p, _c) = read_ptr(k_cache, gpu.stream);
    let (v_p, _d) = read_ptr(v_cache, gpu.stream);
    // q is read as float4, the caches by 16-byte cp.async pieces (rows of hd halves, hd a
    // multiple of 8), out written as float2.
    for (what, p) in [("qkv", q_p), ("k_cache", k_p), ("v_cache", v_p)] {
        expect_aligned16(OP, what, p)?;
    }
    let (o_p, _e) = write_ptr(out, gpu.stream);
    if o_p % 8 != 0 {
        return Err(shape(OP, "out must start on an 8-byte boundary".into()));
    }
    let cfg = LaunchConfig {
        grid_dim: (shape_.n_kv as u32, blocks, 1),
        block_dim: (PREFILL_MMA_THREADS, 1, 1),
        shared_mem_bytes: prefill_mma_shared_bytes(hd) as u32,
    };
    let mut l = Launch::new(gpu, f);
    l.arg(&q_p)
        .arg(&m_i)
        .arg(&n_q)
        .arg(&n_kv)
        .arg(&p0)
        .arg(&max_seq_i)
        .arg(&t_p)
        .arg(&k_p)
        .arg(&v_p)
        .arg(&o_p)
        .arg(&scale_log2);
    // SAFETY: matches attention_prefill_mma_hd*'s signature (the `_any_group` ones' too); qkv
    // holds m rows, out m * n_q * hd floats, the pools whole blocks and the table covers max_seq
    // (the caller checked them: attention()), the live table entries name pool blocks (the
    // KvCache contract), alignment checked, and the dynamic shared memory size was allowed for
    // the function just before.
    unsafe { l.launch(cfg) }?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tensor_core_kernel_takes_head_dims_64_128_256_and_groups_up_to_its_rows() {
        let shape_ = |n_q, n_kv, head_dim| HeadShape { n_q, n_kv, head_dim };
        assert_eq!(prefill_mma_kernel(shape_(32, 8, 128)), Some("attention_prefill_mma_hd128"));
        assert_eq!(prefill_mma_kernel(shape_(16, 16, 64)), Some("attention_prefill_mma_hd64"));
        assert_eq!(prefill_mma_kernel(shape_(64, 1, 64)), Some("attention_prefill_mma_hd64"));
        // Groups not dividing 64: floor(64 / G) tokens per CTA, idle rows.
        assert_eq!(prefill_mma_kernel(shape_(6, 2, 128)), Some("attention_prefill_mma_hd128_any_group"));
        assert_eq!(prefill_mma_kernel(shape_(5, 1, 64)), Some("attention_prefill_mma_hd64_any_group"));
        assert_eq!(prefill_mma_kernel(shape_(34, 2, 64)), Some("attention_prefill_mma_hd64_any_group"));
        assert!(prefill_mma_fits(shape_(63, 1, 128)));
        assert!(!prefill_mma_fits(shape_(65, 1, 128)), "no row left for a token");
        assert_eq!(prefill_mma_kernel(shape_(32, 8, 256)), Some("attention_prefill_mma_hd256"));
        // Bonsai 2's attention: 24 q / 4 kv heads of 256, G 6 (10 tokens per CTA).
        assert_eq!(prefill_mma_kernel(shape_(24, 4, 256)), Some("attention_prefill_mma_hd256_any_group"));
        assert!(!prefill_mma_fits(shape_(32, 8, 96)), "no head_dim 96 kernel");
        assert!(!prefill_mma_fits(shape_(32, 0, 128)));
        assert!(!prefill_mma_fits(shape_(6, 4, 128)), "n_q not a multiple of n_kv");
        for name in [
            "attention_prefill_mma_hd64",
            "attention_prefill_mma_hd128",
            "attention_prefill_mma_hd64_any_group",
            "attention_prefill_mma_hd128_any_group",
            "attention_prefill_mma_hd256",
            "attention_prefill_mma_hd256_any_group",
        ] {
            assert!(crate::cuda::registry::entry_points().any(|e| e == name), "{name} not in the registry");
        }
    }

    #[test]
    fn shared_memory_decides_which_devices_run_each_head_dim() {
        // Opt-in shared memory per CTA: sm_80 163 KB, sm_86 / sm_89 / sm_120 99 KB, sm_90 227 KB.
        let (sm80, sm86, sm90) = (163 * 1024, 99 * 1024, 227 * 1024);
        let g4 = |head_dim| HeadShape { n_q: 32, n_kv: 8, head_dim };
        assert!(prefill_mma_fits_in(g4(128), sm80) && prefill_mma_fits_in(g4(128), sm90));
        assert!(!prefill_mma_fits_in(g4(128), sm86));
        assert!(prefill_mma_fits_in(g4(64), sm86));
        // Head_dim 256: 202,752 bytes, sm_90 only.
        assert_eq!(prefill_mma_shared_bytes(256), 202_752);
        assert!(prefill_mma_fits_in(g4(256), sm90));
        assert!(!prefill_mma_fits_in(g4(256), sm80) && !prefill_mma_fits_in(g4(256), sm86));
    }

    #[test]
    fn shared_memory_fits_two_ctas_per_h200_sm() {
        // 228 KB per SM on Hopper, 1 KB reserved per CTA.
        assert_eq!(prefill_mma_shared_bytes(128), 104_448);
        assert!(2 * (prefill_mma_shared_bytes(128) + 1024) <= 228 * 1024);
    }
}

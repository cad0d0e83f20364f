//! Launcher of the tensor-core prefill attention (attention_prefill_mma.cu): batches of more than
//! [`super::DECODE_MAX_TOKENS`] tokens run it where it has an entry point for the head shape
//! ([`prefill_mma_fits`]), `attention_split_keys` otherwise.

use std::sync::Arc;

use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut, LaunchConfig};

use crate::cuda::KernelLibrary;
use crate::launch::{as_i32, expect_aligned16, opt_in_shared_memory, read_ptr, shape, write_ptr, HeadShape, LaunchError};
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

/// Query rows (tokens x GQA heads) per CTA (`APM_ROWS`): n_q / n_kv must divide it.
pub const PREFILL_MMA_ROWS: usize = 64;
/// Keys per K/V tile (`APM_BLOCK_K`).
pub const PREFILL_MMA_BLOCK_K: usize = 64;
/// Padding of each shared-memory row, in halves (`APM_PAD`).
const PREFILL_MMA_PAD: usize = 8;
const PREFILL_MMA_THREADS: u32 = 128;

/// The entry point for `head_dim`, if the kernel has one.
pub fn prefill_mma_entry_point(head_dim: usize) -> Option<&'static str> {
    match head_dim {
        64 => Some("attention_prefill_mma_hd64"),
        128 => Some("attention_prefill_mma_hd128"),
        _ => None,
    }
}

/// Whether the tensor-core kernel runs this head shape: head_dim 64 or 128 and a GQA group that
/// divides [`PREFILL_MMA_ROWS`].
pub fn prefill_mma_fits(shape_: HeadShape) -> bool {
    let group = if shape_.n_kv == 0 || shape_.n_q % shape_.n_kv != 0 { 0 } else { shape_.n_q / shape_.n_kv };
    prefill_mma_entry_point(shape_.head_dim).is_some() && group > 0 && PREFILL_MMA_ROWS % group == 0
}

/// Dynamic shared memory of one CTA: q hi and lo [ROWS], K and V double-buffered [2][BLOCK_K],
/// each row hd + PAD halves.
pub fn prefill_mma_shared_bytes(head_dim: usize) -> usize {
    (2 * PREFILL_MMA_ROWS + 4 * PREFILL_MMA_BLOCK_K)
        * (head_dim + PREFILL_MMA_PAD)
        * std::mem::size_of::<u16>()
}

/// One launch of `attention_prefill_mma_hd*` for `m` tokens; the caller checked the buffer
/// lengths and the head shape's basic validity (attention()).
#[allow(clippy::too_many_arguments)]
pub(super) fn attention_prefill_mma(
    lib: &KernelLibrary,
    stream: &Arc<CudaStream>,
    qkv: &impl DevicePtr<f32>,
    m: usize,
    shape_: HeadShape,
    pos0: &impl DevicePtr<u32>,
    max_seq: usize,
    k_cache: &impl DevicePtr<u16>,
    v_cache: &impl DevicePtr<u16>,
    out: &mut impl DevicePtrMut<f32>,
) -> Result<(), LaunchError> {
    let hd = shape_.head_dim;
    let entry = prefill_mma_entry_point(hd).ok_or_else(|| {
        shape(OP, format!("prefill attention on tensor cores: no kernel for head_dim {hd} (64 or 128)"))
    })?;
    let group = shape_.n_q / shape_.n_kv;
    if PREFILL_MMA_ROWS % group != 0 {
        return Err(shape(
            OP,
            format!(
                "prefill attention on tensor cores: GQA group {group} does not divide {PREFILL_MMA_ROWS}"
            ),
        ));
    }
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
    let f = lib.function(entry)?;
    opt_in_shared_memory(OP, stream, f, prefill_mma_shared_bytes(hd), &format!("head_dim {hd}"))?;
    // log2(e) / sqrt(hd) in f64, rounded once to f32 (the error bound counts that rounding).
    let scale_log2 = (std::f64::consts::LOG2_E / (hd as f64).sqrt()) as f32;
    let (q_p, _a) = read_ptr(qkv, stream);
    let (p0, _b) = read_ptr(pos0, stream);
    let (k_p, _c) = read_ptr(k_cache, stream);
    let (v_p, _d) = read_ptr(v_cache, stream);
    // q is read as float4, the caches by 16-byte cp.async pieces (rows of hd halves, hd a
    // multiple of 8), out written as float2.
    for (what, p) in [("qkv", q_p), ("k_cache", k_p), ("v_cache", v_p)] {
        expect_aligned16(OP, what, p)?;
    }
    let (o_p, _e) = write_ptr(out, stream);
    if o_p % 8 != 0 {
        return Err(shape(OP, "out must start on an 8-byte boundary".into()));
    }
    let cfg = LaunchConfig {
        grid_dim: (shape_.n_kv as u32, blocks, 1),
        block_dim: (PREFILL_MMA_THREADS, 1, 1),
        shared_mem_bytes: prefill_mma_shared_bytes(hd) as u32,
    };
    let mut l = Launch::new(lib, stream, f);
    l.arg(&q_p)
        .arg(&m_i)
        .arg(&n_q)
        .arg(&n_kv)
        .arg(&p0)
        .arg(&max_seq_i)
        .arg(&k_p)
        .arg(&v_p)
        .arg(&o_p)
        .arg(&scale_log2);
    // SAFETY: matches attention_prefill_mma_hd*'s signature; qkv holds m rows, the caches n_kv *
    // max_seq * hd halves, out m * n_q * hd floats (checked above), alignment checked, and the
    // dynamic shared memory size was allowed for the function just before.
    unsafe { l.launch(cfg) }?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tensor_core_kernel_takes_head_dims_64_and_128_and_groups_dividing_its_rows() {
        let shape_ = |n_q, n_kv, head_dim| HeadShape { n_q, n_kv, head_dim };
        assert!(prefill_mma_fits(shape_(32, 8, 128)));
        assert!(prefill_mma_fits(shape_(16, 16, 64)));
        assert!(!prefill_mma_fits(shape_(6, 2, 128)), "group 3 does not divide 64");
        assert!(!prefill_mma_fits(shape_(32, 8, 256)), "no head_dim 256 kernel");
        assert!(!prefill_mma_fits(shape_(32, 0, 128)));
    }

    #[test]
    fn shared_memory_fits_two_ctas_per_h200_sm() {
        // 228 KB per SM on Hopper, 1 KB reserved per CTA.
        assert_eq!(prefill_mma_shared_bytes(128), 104_448);
        assert!(2 * (prefill_mma_shared_bytes(128) + 1024) <= 228 * 1024);
    }
}

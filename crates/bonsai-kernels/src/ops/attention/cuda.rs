//! Launcher of the attention. Every head shape the CPU op takes with an even head_dim up to
//! [`WIDE_MAX_HEAD_DIM`] runs; [`choose_kernel`] (pure, unit-tested) picks, in order:
//! - one token (decode): `attention_decode_g*_hd*` (attention_decode.cu, cuda_decode.rs) where it
//!   has an entry point for the GQA group and head_dim (groups 1..=8 at head_dim 64 and 128,
//!   groups 1, 2 and 6 at 256);
//! - more than [`DECODE_MAX_TOKENS`] tokens (prefill): the tensor-core
//!   `attention_prefill_mma_hd*` (cuda_prefill_mma.rs) at head_dim 64, 128 or 256 and a group up
//!   to 64, where the device lets a CTA opt in to its shared memory (104 KB at head_dim 128: not on
//!   the 99 KB sm_86 / sm_89 / sm_120 parts; 198 KB at head_dim 256: sm_90 only);
//! - anything else: one `attention_split_keys` launch (attention.cu: `_any_group` for groups not
//!   dividing 16, `_hd256` for head_dims above 128 or of 2 mod 4) whose last CTA per (token
//!   group, kv head, head chunk) merges the splits.
//!
//! The decode and split-key kernels use caller-owned scratch (partials) and counters
//! (zero-initialised, left zero by every launch) so they can be captured in a CUDA graph (no
//! allocation per call).


use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut, LaunchConfig};

use crate::launch::matmul::B1Planes;
use crate::launch_ex::Launch;
use crate::launch::{Gpu, KvCache, QkvRows,
    as_i32, check_kv_cache, device_attribute, expect_at_least, opt_in_shared_memory, read_ptr, shape, write_ptr, HeadShape,
    LaunchError,
};
use cudarc::driver::sys::CUdevice_attribute;

#[path = "cuda_decode.rs"]
mod decode;
pub use decode::{
    decode_entry_point, decode_heads_entry_point, decode_planes_entry_point, decode_scratch_len, decode_splits,
    DECODE_CTAS_PER_SM, DECODE_HEADS_MAX_LEN, DECODE_HEADS_WARPS, DECODE_MAX_SPLITS, DECODE_MIN_SPLIT_KEYS, DECODE_WARPS,
};
#[path = "cuda_prefill_mma.rs"]
mod prefill_mma;
pub use prefill_mma::{
    prefill_mma_entry_point, prefill_mma_fits, prefill_mma_fits_in, prefill_mma_fits_on, prefill_mma_kernel,
    prefill_mma_shared_bytes, PrefillKernel, PREFILL_MMA_BLOCK_K, PREFILL_MMA_ROWS,
};

/// Keys per split (ATT_SPLIT_KEYS in attention.cu).
pub const SPLIT_KEYS: usize = 128;
/// Keys per split for decode-sized batches at short contexts (`ATT_DECODE_SPLIT_KEYS`): decode
/// has one query row per head, so only short splits give it enough CTAs there. On the H200 they
/// win at a short context but lose at depth to the longer combine pass, so long contexts keep
/// 128-key splits (docs/kernel-notes.md, Decode attention, Measured and removed).
pub const DECODE_SPLIT_KEYS: usize = 32;
/// Largest batch that uses [`DECODE_SPLIT_KEYS`].
pub const DECODE_MAX_TOKENS: usize = 8;
/// Longest sequence bound that uses [`DECODE_SPLIT_KEYS`] (a multiple of both split sizes).
pub const SHORT_CONTEXT_KEYS: usize = 2048;

/// Keys per split the launcher uses for `m` tokens attending to at most `seq_bound` positions.
pub fn split_keys(m: usize, seq_bound: usize) -> usize {
    if m <= DECODE_MAX_TOKENS && seq_bound <= SHORT_CONTEXT_KEYS {
        DECODE_SPLIT_KEYS
    } else {
        SPLIT_KEYS
    }
}

/// Query rows per CTA of `attention_split_keys` (ATT_ROWS): [`split_rows`] lays any GQA group over
/// them.
pub const ROWS_PER_CTA: usize = 16;
/// Largest head_dim of `attention_split_keys` and `_any_group` (ATT_MAX_HD), which take multiples
/// of 4.
pub const MAX_HEAD_DIM: usize = 128;
/// Largest head_dim of `attention_split_keys_hd256` (ATT_WIDE_MAX_HD), which takes any even one
/// and any group, and so of any attention launch.
pub const WIDE_MAX_HEAD_DIM: usize = 256;
/// Keys staged per step (ATT_CHUNK) and the staged keys' row padding in floats (ATT_K_PAD).
const SPLIT_CHUNK: usize = 32;
const SPLIT_K_PAD: usize = 4;
const SPLIT_THREADS: u32 = 128;

/// How `attention_split_keys` lays one kv head's GQA group over CTAs: `chunks` CTAs per (kv head,
/// token block), each taking `heads` q heads (the last chunk possibly fewer) of `tokens_per_cta`
/// tokens, `tokens_per_cta * heads <= ROWS_PER_CTA` rows in use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitRows {
    pub chunks: usize,
    pub heads: usize,
    pub tokens_per_cta: usize,
}

/// The layout for GQA group `group` (as attention.cu computes it): the whole group in one CTA up
/// to [`ROWS_PER_CTA`] heads, with as many tokens as fit; a larger group in near-equal chunks.
pub fn split_rows(group: usize) -> SplitRows {
    let group = group.max(1);
    let chunks = group.div_ceil(ROWS_PER_CTA);
    let heads = group.div_ceil(chunks);
    SplitRows { chunks, heads, tokens_per_cta: ROWS_PER_CTA / heads }
}

/// The `attention_split_keys*` entry point for GQA group `group` and `head_dim`: head_dims that
/// are multiples of 4 up to [`MAX_HEAD_DIM`] take the static-shared-memory ones, the plain one for
/// groups dividing [`ROWS_PER_CTA`] (compiled without the general layout's bookkeeping) and
/// `_any_group` for the others; other even head_dims up to [`WIDE_MAX_HEAD_DIM`] take `_hd256`
/// (any group). None beyond, for group 0, or for head_dim 0 and odd ones (which RoPE excludes).
pub fn split_keys_entry_point(group: usize, head_dim: usize) -> Option<&'static str> {
    match head_dim {
        _ if group == 0 => None,
        0 => None,
        hd if hd % 4 == 0 && hd <= MAX_HEAD_DIM && ROWS_PER_CTA % group == 0 => Some("attention_split_keys"),
        hd if hd % 4 == 0 && hd <= MAX_HEAD_DIM => Some("attention_split_keys_any_group"),
        hd if hd % 2 == 0 && hd <= WIDE_MAX_HEAD_DIM => Some("attention_split_keys_hd256"),
        _ => None,
    }
}

/// Dynamic shared memory of an `attention_split_keys*` launch at `head_dim` (0: the static 41 KB
/// of the head_dim <= 128 entry points): q [ROWS_PER_CTA] and V [32] rows of 256 floats, K [32]
/// rows of 260.
pub fn split_keys_shared_bytes(head_dim: usize) -> usize {
    match split_keys_entry_point(1, head_dim) {
        Some("attention_split_keys_hd256") => {
            ((ROWS_PER_CTA + SPLIT_CHUNK) * WIDE_MAX_HEAD_DIM + SPLIT_CHUNK * (WIDE_MAX_HEAD_DIM + SPLIT_K_PAD))
                * std::mem::size_of::<f32>()
        }
        _ => 0,
    }
}

/// The kernel one attention launch runs, with its entry point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttentionKernel {
    /// `attention_decode_g*_hd*` (one token).
    Decode(&'static str),
    /// `attention_prefill_mma_hd*` (more than [`DECODE_MAX_TOKENS`] tokens).
    PrefillMma(&'static str),
    /// `attention_split_keys*`.
    SplitKeys(&'static str),
}

impl AttentionKernel {
    pub fn entry_point(self) -> &'static str {
        match self {
            AttentionKernel::Decode(e) | AttentionKernel::PrefillMma(e) | AttentionKernel::SplitKeys(e) => e,
        }
    }
}

/// [`choose_kernel`] on the stream's device.
pub fn choose_kernel_on(gpu: Gpu<'_>, m: usize, shape_: HeadShape, prefill: PrefillKernel) -> Result<AttentionKernel, LaunchError> {
    let smem_optin = device_attribute(gpu.stream, CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?;
    choose_kernel(m, shape_, prefill, smem_optin).map_err(|detail| shape("attention", detail))
}

/// The kernel for `m` tokens of `shape_` on a device whose CTAs may opt in to `smem_optin` bytes
/// of shared memory (CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN), or why none runs it.
/// `prefill`: [`PrefillKernel::SplitKeys`] keeps batches of more than [`DECODE_MAX_TOKENS`]
/// tokens off the tensor-core kernel. The fastest kernel that applies: the decode kernel for one
/// token where it has an entry point; the tensor-core kernel for a prefill batch where it has one
/// and its shared memory fits; `attention_split_keys` otherwise, which takes every valid head
/// shape up to [`WIDE_MAX_HEAD_DIM`].
pub fn choose_kernel(m: usize, shape_: HeadShape, prefill: PrefillKernel, smem_optin: usize) -> Result<AttentionKernel, String> {
    let hd = shape_.head_dim;
    if m == 0 || shape_.n_q == 0 || shape_.n_kv == 0 || shape_.n_q % shape_.n_kv != 0 {
        return Err(format!("unsupported shape m={m} {shape_:?} (n_q a non-zero multiple of n_kv)"));
    }
    let group = shape_.n_q / shape_.n_kv;
    let split = split_keys_entry_point(group, hd)
        .ok_or_else(|| format!("unsupported head_dim {hd} (an even head_dim up to {WIDE_MAX_HEAD_DIM})"))?;
    if m == 1 {
        if let Some(entry) = decode_entry_point(group, hd) {
            return Ok(AttentionKernel::Decode(entry));
        }
    }
    if m > DECODE_MAX_TOKENS && prefill == PrefillKernel::Mma && prefill_mma_fits_in(shape_, smem_optin) {
        if let Some(entry) = prefill_mma_kernel(shape_) {
            return Ok(AttentionKernel::PrefillMma(entry));
        }
    }
    let bytes = split_keys_shared_bytes(hd);
    if bytes > smem_optin {
        return Err(format!("head_dim {hd} needs {bytes} bytes of shared memory per CTA; this device allows {smem_optin}"));
    }
    Ok(AttentionKernel::SplitKeys(split))
}

fn n_splits(m: usize, seq_bound: usize) -> usize {
    seq_bound.div_ceil(split_keys(m, seq_bound))
}

/// f32 elements of scratch a launch for `m` tokens needs with any sequence bound up to `seq_bound`.
pub fn scratch_len(m: usize, shape_: HeadShape, seq_bound: usize) -> usize {
    // The most splits any bound up to `seq_bound` needs: a caller that sizes the buffer for the
    // whole cache may launch with the live length, which can pick the shorter splits.
    let most = n_splits(m, seq_bound).max(n_splits(m, seq_bound.min(SHORT_CONTEXT_KEYS)));
    let split_keys_len = m * shape_.n_q * most * (shape_.head_dim + 2);
    // One token may run the decode kernel, whose split count depends on the device, not the bound.
    if m == 1 {
        split_keys_len.max(decode_scratch_len(shape_))
    } else {
        split_keys_len
    }
}

/// What an attention launch may write besides its output: the split-key partials (at least
/// [`scratch_len`] values) and the arrival counters (at least [`counters_len`], zeroed).
pub struct AttentionScratch<'a> {
    pub partials: &'a mut CudaSlice<f32>,
    pub counters: &'a mut CudaSlice<u32>,
}

/// u32 counters any launch of up to `m` tokens uses (one per (token group, kv head, head chunk);
/// one per q head for the decode kernel's `_heads` entry points, which a buffer sized for a
/// larger `m` serves too: the length never shrinks as `m` grows); the buffer must start zeroed
/// (every launch leaves it zeroed).
pub fn counters_len(m: usize, shape_: HeadShape) -> usize {
    let rows = split_rows(shape_.n_q / shape_.n_kv.max(1));
    let split_keys = m.div_ceil(rows.tokens_per_cta) * shape_.n_kv * rows.chunks;
    split_keys.max(shape_.n_q)
}

/// Causal GQA attention of `m` tokens at positions `pos0[0] + i` over the f16 caches.
/// `seq_bound` is a host-side upper bound on `pos0 + m` (e.g. max_seq for a captured decode
/// graph); a token beyond it, or beyond max_seq, gets NaN output rather than a wrong answer.
/// (The decode kernel, m == 1, does not need the bound: its grid covers any position below
/// max_seq, and only a position >= max_seq gives NaN.)
/// The kernel: [`choose_kernel`] with this device's opt-in shared memory and the caller's
/// `kernel` (the model runs [`PrefillKernel::Mma`], verify both):
/// [`PrefillKernel::SplitKeys`] keeps prefill batches on `attention_split_keys`;
/// [`PrefillKernel::Mma`] runs the tensor-core kernel where [`choose_kernel`] allows it (there a
/// batch of more than [`DECODE_MAX_TOKENS`] tokens needs neither scratch nor counters and
/// computes every position below max_seq, no NaN past `seq_bound`), else `attention_split_keys`.
#[allow(clippy::too_many_arguments)]
pub fn attention(
    gpu: Gpu<'_>,
    rows: QkvRows<'_, impl DevicePtr<f32>, &impl DevicePtr<u32>>,
    cache: KvCache<&impl DevicePtr<u16>, &impl DevicePtr<u32>>,
    seq_bound: usize,
    work: AttentionScratch<'_>,
    out: &mut impl DevicePtrMut<f32>,
    kernel: PrefillKernel,
) -> Result<(), LaunchError> {
    let QkvRows { qkv, m, shape: shape_, pos0 } = rows;
    const OP: &str = "attention";
    let KvCache { k: k_cache, v: v_cache, table, max_seq } = cache;
    let hd = shape_.head_dim;
    let chosen = choose_kernel_on(gpu, m, shape_, kernel)?;
    if seq_bound == 0 {
        return Err(shape(OP, "zero sequence bound".into()));
    }
    let max_seq_i = check_buffers(m, shape_, &cache, [qkv.len(), pos0.len(), out.len()])?;
    let entry = match chosen {
        AttentionKernel::Decode(_) => {
            return decode::attention_decode(gpu, rows, cache, work, out, None, false);
        }
        AttentionKernel::PrefillMma(entry) => {
            return prefill_mma::attention_prefill_mma(gpu, rows, cache, out, entry);
        }
        AttentionKernel::SplitKeys(entry) => entry,
    };
    let bound = seq_bound.min(max_seq);
    let keys_per_split = split_keys(m, bound);
    let n_splits = n_splits(m, bound);
    let AttentionScratch { partials: scratch, counters } = work;
    expect_at_least(OP, "scratch", scratch.len(), m * shape_.n_q * n_splits * (hd + 2))?;
    expect_at_least(OP, "counters", counters.len(), counters_len(m, shape_))?;
    let rows = split_rows(shape_.n_q / shape_.n_kv);
    let (m_i, n_q, n_kv, hd_i) = (as_i32(OP, "m", m)?, as_i32(OP, "n_q", shape_.n_q)?, as_i32(OP, "n_kv", shape_.n_kv)?, as_i32(OP, "hd", hd)?);
    let n_splits_i = as_i32(OP, "n_splits", n_splits)?;
    let split_keys_i = as_i32(OP, "split_keys", keys_per_split)?;
    let z = u32::try_from(m.div_ceil(rows.tokens_per_cta)).ok().filter(|&z| z <= 65_535).ok_or_else(|| shape(OP, "too many tokens".into()))?;
    if n_splits > 65_535 {
        return Err(shape(OP, "too many splits".into()));
    }
    let columns = as_i32(OP, "kv heads x head chunks", shape_.n_kv * rows.chunks)? as u32;
    let smem = split_keys_shared_bytes(hd);
    let split_cfg = LaunchConfig {
        grid_dim: (columns, n_splits as u32, z),
        block_dim: (SPLIT_THREADS, 1, 1),
        shared_mem_bytes: smem as u32,
    };
    let split = gpu.function(entry)?;
    if smem > 0 {
        opt_in_shared_memory(OP, gpu.stream, &split, smem, &format!("attention_split_keys at head_dim {hd}"))?;
    }
    let (q_p, _a) = read_ptr(qkv, gpu.stream);
    let (p0, _b) = read_ptr(pos0, gpu.stream);
    let (t_p, _t) = read_ptr(table, gpu.stream);
    let (k_p, _c) = read_ptr(k_cache, gpu.stream);
    let (v_p, _d) = read_ptr(v_cache, gpu.stream);
    // The kernel reads the caches 4 halves (8 bytes) at a time, or, at a head_dim of 2 mod 4
    // (whose rows start on 4-byte boundaries), 2 halves.
    let align = if hd % 4 == 0 { 8 } else { 4 };
    if k_p % align != 0 || v_p % align != 0 {
        return Err(shape(OP, format!("k_cache and v_cache must start on a {align}-byte boundary")));
    }
    let (s_p, _e) = write_ptr(scratch, gpu.stream);
    let (c_p, _f) = write_ptr(counters, gpu.stream);
    let (o_p, _g) = write_ptr(out, gpu.stream);
    let mut l = Launch::new(gpu, split);
    l.arg(&q_p).arg(&m_i).arg(&n_q).arg(&n_kv).arg(&hd_i).arg(&p0).arg(&max_seq_i).arg(&t_p).arg(&k_p).arg(&v_p).arg(&s_p).arg(&n_splits_i).arg(&split_keys_i);
    l.arg(&c_p).arg(&o_p);
    // SAFETY: matches attention_split_keys*'s signature; qkv/scratch/counter lengths checked
    // above for m tokens and n_splits splits (counters_len covers the grid's z * x slots), the
    // pools are whole blocks and the table covers max_seq, whose entries up to the live length
    // name pool blocks (the caller's contract, KvCache); out holds m * n_q * hd values; the
    // dynamic shared memory (the _hd256 entry point) was allowed for the function just before.
    unsafe { l.launch(split_cfg) }?;
    Ok(())
}

/// Checks what every attention launch relies on: the paged cache (pools and table,
/// `check_kv_cache`) and the lengths of qkv, pos0 and out, in that order (m qkv rows, one
/// position, m output rows). Returns max_seq as a kernel int.
fn check_buffers(
    m: usize,
    shape_: HeadShape,
    cache: &KvCache<&impl DevicePtr<u16>, &impl DevicePtr<u32>>,
    [qkv, pos0, out]: [usize; 3],
) -> Result<i32, LaunchError> {
    const OP: &str = "attention";
    let max_seq = check_kv_cache(OP, shape_, cache.max_seq, (cache.k.len(), cache.v.len()), cache.table.len())?;
    expect_at_least(OP, "qkv", qkv, m * shape_.qkv_row_len())?;
    expect_at_least(OP, "pos0", pos0, 1)?;
    expect_at_least(OP, "out", out, m * shape_.q_len())?;
    Ok(max_seq)
}

/// One token's decode attention (as [`attention`] at m = 1) that also quantizes its output into
/// `planes` for [`crate::launch::matmul::matmul_from_planes`] (the output projection without its
/// prepare launch): the planes are bit-identical to `prepare_planes` of `out`. Needs head_dim 128,
/// a GQA group with a planes decode kernel (1, 2, 4, 8) and `planes.k() == n_q * 128`. `per_q_head`: the
/// `_heads` kernel (a CTA per q head), which groups 2 and 4 have ([`decode_heads_entry_point`]);
/// else the kv-head one.
#[allow(clippy::too_many_arguments)]
pub fn attention_decode_planes(
    gpu: Gpu<'_>,
    rows: QkvRows<'_, impl DevicePtr<f32>, &impl DevicePtr<u32>>,
    cache: KvCache<&impl DevicePtr<u16>, &impl DevicePtr<u32>>,
    work: AttentionScratch<'_>,
    out: &mut impl DevicePtrMut<f32>,
    planes: &mut B1Planes,
    per_q_head: bool,
) -> Result<(), LaunchError> {
    let QkvRows { qkv, shape: shape_, pos0, .. } = rows;
    if rows.m != 1 {
        return Err(shape("attention", format!("one token's decode attention given {} rows", rows.m)));
    }
    const OP: &str = "attention";
    let hd = shape_.head_dim;
    let group = if shape_.n_kv == 0 || shape_.n_q % shape_.n_kv != 0 { 0 } else { shape_.n_q / shape_.n_kv };
    if decode_planes_entry_point(group, hd).is_none() {
        return Err(shape(OP, format!("no decode kernel with planes for {shape_:?} (head_dim 128, group 1/2/4/8)")));
    }
    if planes.k() != shape_.n_q * hd {
        return Err(shape(OP, format!("planes of K = {} for an output of {} values", planes.k(), shape_.n_q * hd)));
    }
    check_buffers(1, shape_, &cache, [qkv.len(), pos0.len(), out.len()])?;
    let (ptrs, _guards) = planes.write_ptrs(gpu.stream);
    decode::attention_decode(gpu, rows, cache, work, out, Some(ptrs), per_q_head)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::registry::entry_points;
    use crate::launch::tests::cu_define;

    /// Opt-in shared memory per CTA: sm_86 / sm_89 / sm_120, sm_80, sm_90.
    const SMEM_99KB: usize = 99 * 1024;
    const SMEM_SM80: usize = 163 * 1024;
    const SMEM_SM90: usize = 227 * 1024;

    fn hs(n_q: usize, n_kv: usize, head_dim: usize) -> HeadShape {
        HeadShape { n_q, n_kv, head_dim }
    }

    #[test]
    fn constants_match_attention_cu() {
        let cu = "ops/attention/attention.cu";
        assert_eq!(cu_define(cu, "ATT_WIDE_MAX_HD"), WIDE_MAX_HEAD_DIM);
        assert_eq!(cu_define(cu, "ATT_CHUNK"), SPLIT_CHUNK);
        assert_eq!(cu_define(cu, "ATT_K_PAD"), SPLIT_K_PAD);
        assert_eq!(cu_define(cu, "ATT_WARPS") * 32, SPLIT_THREADS as usize);
    }

    #[test]
    fn split_rows_cover_every_group_within_one_cta_of_rows() {
        assert_eq!(split_rows(1), SplitRows { chunks: 1, heads: 1, tokens_per_cta: 16 });
        assert_eq!(split_rows(3), SplitRows { chunks: 1, heads: 3, tokens_per_cta: 5 });
        assert_eq!(split_rows(4), SplitRows { chunks: 1, heads: 4, tokens_per_cta: 4 });
        assert_eq!(split_rows(5), SplitRows { chunks: 1, heads: 5, tokens_per_cta: 3 });
        assert_eq!(split_rows(16), SplitRows { chunks: 1, heads: 16, tokens_per_cta: 1 });
        assert_eq!(split_rows(17), SplitRows { chunks: 2, heads: 9, tokens_per_cta: 1 });
        assert_eq!(split_rows(24), SplitRows { chunks: 2, heads: 12, tokens_per_cta: 1 });
        assert_eq!(split_rows(64), SplitRows { chunks: 4, heads: 16, tokens_per_cta: 1 });
        for group in 1..=300 {
            let r = split_rows(group);
            assert!(r.heads >= 1 && r.heads <= ROWS_PER_CTA && r.tokens_per_cta >= 1, "group {group}: {r:?}");
            assert!(r.tokens_per_cta * r.heads <= ROWS_PER_CTA, "group {group}: {r:?}");
            // Every head has a chunk and no chunk is empty.
            assert!(r.chunks * r.heads >= group && (r.chunks - 1) * r.heads < group, "group {group}: {r:?}");
            if ROWS_PER_CTA % group == 0 {
                // The groups the kernel always took keep their layout (and counter slots).
                assert_eq!(r, SplitRows { chunks: 1, heads: group, tokens_per_cta: ROWS_PER_CTA / group });
            }
        }
    }

    #[test]
    fn counters_cover_the_split_grid_and_grow_with_m() {
        for (n_q, n_kv) in [(32, 8), (6, 2), (5, 1), (16, 1), (34, 2), (48, 1), (4, 4)] {
            let shape_ = hs(n_q, n_kv, 128);
            let r = split_rows(n_q / n_kv);
            let mut last = 0;
            for m in 1..=600 {
                let len = counters_len(m, shape_);
                assert!(len >= m.div_ceil(r.tokens_per_cta) * n_kv * r.chunks, "{shape_:?} m={m}");
                assert!(len >= last, "{shape_:?} m={m}: not monotone");
                last = len;
            }
            // The decode kernel's `_heads` entry points count per q head.
            assert!(counters_len(1, shape_) >= n_q);
        }
        // Unchanged for groups dividing 16: ceil(m / (16 / G)) per kv head (at least n_q).
        assert_eq!(counters_len(512, hs(32, 8, 128)), 128 * 8);
        assert_eq!(counters_len(33, hs(6, 3, 64)), 5 * 3);
        assert_eq!(counters_len(2, hs(32, 8, 128)), 32);
    }

    #[test]
    fn split_keys_entry_points_take_every_group_and_even_head_dim_up_to_256() {
        for group in [1, 2, 4, 8, 16] {
            for hd in [4, 64, 96, 128] {
                assert_eq!(split_keys_entry_point(group, hd), Some("attention_split_keys"), "G {group} hd {hd}");
            }
        }
        for group in [3, 5, 6, 7, 9, 17, 24, 64, 200] {
            assert_eq!(split_keys_entry_point(group, 128), Some("attention_split_keys_any_group"), "G {group}");
            assert_eq!(split_keys_entry_point(group, 80), Some("attention_split_keys_any_group"), "G {group}");
        }
        for group in [1, 3, 4, 16, 17] {
            assert_eq!(split_keys_entry_point(group, 256), Some("attention_split_keys_hd256"));
            assert_eq!(split_keys_entry_point(group, 130), Some("attention_split_keys_hd256"));
            assert_eq!(split_keys_entry_point(group, 6), Some("attention_split_keys_hd256"), "2 mod 4");
            assert_eq!(split_keys_entry_point(group, 2), Some("attention_split_keys_hd256"));
        }
        for hd in [0, 3, 127, 258, 512] {
            assert_eq!(split_keys_entry_point(4, hd), None, "head_dim {hd}");
        }
        assert_eq!(split_keys_entry_point(0, 128), None);
        assert_eq!(split_keys_shared_bytes(128), 0);
        assert_eq!(split_keys_shared_bytes(80), 0);
        assert_eq!(split_keys_shared_bytes(256), 82_432);
        assert_eq!(split_keys_shared_bytes(130), 82_432);
        // Every device bonsai supports (sm_80+, at least 99 KB per CTA) opts in to it.
        assert!(split_keys_shared_bytes(256) <= SMEM_99KB);
        for name in ["attention_split_keys", "attention_split_keys_any_group", "attention_split_keys_hd256"] {
            assert!(entry_points().any(|e| e == name), "{name} not in the registry");
        }
    }

    #[test]
    fn launcher_picks_the_fastest_kernel_that_applies() {
        use AttentionKernel::{Decode, PrefillMma, SplitKeys};
        let pick = |m, shape_, smem| choose_kernel(m, shape_, PrefillKernel::Mma, smem).expect("a valid shape");
        // Bonsai-8B: decode kernel, split keys for small batches, tensor cores for prefill unless
        // the device's 99 KB per CTA cannot hold the head_dim 128 tiles.
        let b8 = hs(32, 8, 128);
        assert_eq!(pick(1, b8, SMEM_SM90), Decode("attention_decode_g4_hd128"));
        assert_eq!(pick(2, b8, SMEM_SM90), SplitKeys("attention_split_keys"));
        assert_eq!(pick(8, b8, SMEM_SM90), SplitKeys("attention_split_keys"));
        assert_eq!(pick(9, b8, SMEM_SM90), PrefillMma("attention_prefill_mma_hd128"));
        assert_eq!(pick(512, b8, SMEM_SM80), PrefillMma("attention_prefill_mma_hd128"));
        assert_eq!(pick(512, b8, SMEM_99KB), SplitKeys("attention_split_keys"));
        assert_eq!(pick(512, hs(32, 8, 64), SMEM_99KB), PrefillMma("attention_prefill_mma_hd64"));
        // GQA group 3 (6 q heads, 2 kv heads): its decode entry point, the any-group tensor-core one.
        let g3 = hs(6, 2, 128);
        assert_eq!(pick(1, g3, SMEM_SM90), Decode("attention_decode_g3_hd128"));
        assert_eq!(pick(5, g3, SMEM_SM90), SplitKeys("attention_split_keys_any_group"));
        assert_eq!(pick(33, g3, SMEM_SM90), PrefillMma("attention_prefill_mma_hd128_any_group"));
        assert_eq!(pick(33, g3, SMEM_99KB), SplitKeys("attention_split_keys_any_group"));
        assert_eq!(pick(1, hs(40, 8, 128), SMEM_SM90), Decode("attention_decode_g5_hd128"));
        assert_eq!(pick(1, hs(16, 1, 64), SMEM_SM90), SplitKeys("attention_split_keys"), "no group 16 decode kernel");
        assert_eq!(pick(33, hs(16, 1, 64), SMEM_SM90), PrefillMma("attention_prefill_mma_hd64"));
        assert_eq!(pick(5, hs(16, 1, 64), SMEM_SM90), SplitKeys("attention_split_keys"));
        assert_eq!(pick(33, hs(96, 1, 64), SMEM_SM90), SplitKeys("attention_split_keys_any_group"), "group 96 > 64 rows");
        // head_dim 256: the decode kernel at groups 1, 2 and 6; the tensor cores for prefill on
        // sm_90 (198 KB of shared memory); split keys for other groups' decode, small batches and
        // prefill on smaller devices.
        assert_eq!(pick(1, hs(4, 2, 256), SMEM_SM90), Decode("attention_decode_g2_hd256"));
        assert_eq!(pick(5, hs(4, 2, 256), SMEM_SM90), SplitKeys("attention_split_keys_hd256"));
        assert_eq!(pick(33, hs(4, 2, 256), SMEM_SM90), PrefillMma("attention_prefill_mma_hd256"));
        assert_eq!(pick(33, hs(4, 2, 256), SMEM_SM80), SplitKeys("attention_split_keys_hd256"));
        // Bonsai 2: 24 q / 4 kv heads of 256 (G 6).
        let bonsai2 = hs(24, 4, 256);
        assert_eq!(pick(1, bonsai2, SMEM_SM90), Decode("attention_decode_g6_hd256"));
        assert_eq!(pick(1, bonsai2, SMEM_99KB), Decode("attention_decode_g6_hd256"));
        assert_eq!(pick(8, bonsai2, SMEM_SM90), SplitKeys("attention_split_keys_hd256"));
        assert_eq!(pick(512, bonsai2, SMEM_SM90), PrefillMma("attention_prefill_mma_hd256_any_group"));
        assert_eq!(pick(512, bonsai2, SMEM_SM80), SplitKeys("attention_split_keys_hd256"));
        for m in [1, 5, 33, 512] {
            let g8_prefill = if m > DECODE_MAX_TOKENS { PrefillMma("attention_prefill_mma_hd256") } else { SplitKeys("attention_split_keys_hd256") };
            assert_eq!(pick(m, hs(8, 1, 256), SMEM_SM90), g8_prefill);
            assert_eq!(pick(m, hs(8, 1, 256), SMEM_99KB), SplitKeys("attention_split_keys_hd256"));
            assert_eq!(pick(m, hs(4, 2, 96), SMEM_SM90), SplitKeys("attention_split_keys"));
            assert_eq!(pick(m, hs(4, 2, 6), SMEM_SM90), SplitKeys("attention_split_keys_hd256"));
        }
        // The caller can keep prefill off the tensor cores (verify's split-key rows).
        let forced = choose_kernel(33, b8, PrefillKernel::SplitKeys, SMEM_SM90);
        assert_eq!(forced, Ok(SplitKeys("attention_split_keys")));
        assert_eq!(choose_kernel(1, b8, PrefillKernel::SplitKeys, SMEM_SM90), Ok(Decode("attention_decode_g4_hd128")));
    }

    #[test]
    fn every_shape_the_cpu_op_takes_up_to_head_dim_256_runs() {
        for smem in [SMEM_99KB, SMEM_SM80, SMEM_SM90] {
            for group in 1..=70 {
                for n_kv in [1, 3] {
                    for hd in (2..=WIDE_MAX_HEAD_DIM).step_by(2) {
                        let shape_ = hs(group * n_kv, n_kv, hd);
                        for m in [1, 2, 8, 9, 33] {
                            for prefill in [PrefillKernel::Mma, PrefillKernel::SplitKeys] {
                                let k = choose_kernel(m, shape_, prefill, smem)
                                    .unwrap_or_else(|e| panic!("{shape_:?} m={m} smem={smem}: {e}"));
                                let want = if m == 1 && decode_entry_point(group, hd).is_some() {
                                    AttentionKernel::Decode(decode_entry_point(group, hd).unwrap())
                                } else if m > DECODE_MAX_TOKENS && prefill == PrefillKernel::Mma && prefill_mma_fits_in(shape_, smem) {
                                    AttentionKernel::PrefillMma(prefill_mma_kernel(shape_).unwrap())
                                } else {
                                    AttentionKernel::SplitKeys(split_keys_entry_point(group, hd).unwrap())
                                };
                                assert_eq!(k, want, "{shape_:?} m={m} smem={smem}");
                                assert!(entry_points().any(|e| e == k.entry_point()), "{k:?} not registered");
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn shapes_outside_the_kernels_are_errors_not_panics() {
        let err = |m, shape_| choose_kernel(m, shape_, PrefillKernel::Mma, SMEM_SM90).unwrap_err();
        assert!(err(1, hs(8, 1, 258)).contains("head_dim 258"));
        assert!(err(33, hs(8, 1, 512)).contains("head_dim 512"));
        assert!(err(1, hs(8, 1, 0)).contains("head_dim 0"));
        assert!(err(1, hs(8, 1, 7)).contains("head_dim 7"));
        assert!(err(1, hs(6, 4, 128)).contains("multiple"));
        assert!(err(1, hs(8, 0, 128)).contains("multiple"));
        assert!(err(0, hs(8, 1, 128)).contains("m=0"));
        // A device below every supported one's opt-in limit cannot stage head_dim 256.
        assert!(choose_kernel(1, hs(8, 1, 256), PrefillKernel::Mma, 64 * 1024).unwrap_err().contains("shared memory"));
    }
}

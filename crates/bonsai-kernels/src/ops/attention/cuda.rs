//! Launcher of the attention: one token (decode) goes to `attention_decode_g*_hd*`
//! (attention_decode.cu, cuda_decode.rs) when it has an entry point for the GQA group and
//! head_dim; anything else to one `attention_split_keys` launch (attention.cu) whose last CTA per
//! (token group, kv head) merges the splits. Both use caller-owned scratch (partials) and
//! counters (zero-initialised, left zero by every launch) so they can be captured in a CUDA graph
//! (no allocation per call).

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut, LaunchConfig};

use crate::cuda::KernelLibrary;
use crate::launch::matmul::B1Planes;
use crate::launch_ex::Launch;
use crate::launch::{as_i32, expect_at_least, read_ptr, shape, write_ptr, HeadShape, LaunchError};

#[path = "cuda_decode.rs"]
mod decode;
pub use decode::{
    decode_entry_point, decode_heads_entry_point, decode_planes_entry_point, decode_scratch_len, decode_splits,
    DECODE_CTAS_PER_SM, DECODE_HEADS_MAX_LEN, DECODE_HEADS_WARPS, DECODE_MAX_SPLITS, DECODE_WARPS,
};
#[path = "cuda_prefill_mma.rs"]
mod prefill_mma;
pub use prefill_mma::{
    prefill_mma_entry_point, prefill_mma_fits, prefill_mma_shared_bytes, PrefillKernel, PREFILL_MMA_BLOCK_K,
    PREFILL_MMA_ROWS,
};

/// Keys per split (ATT_SPLIT_KEYS in attention.cu).
pub const SPLIT_KEYS: usize = 128;
/// Keys per split for decode-sized batches at short contexts (`ATT_DECODE_SPLIT_KEYS`): decode
/// has one query row per head, so only short splits give it enough CTAs there. Measured on the
/// H200 (docs/PERFORMANCE.md): 32-key splits took Bonsai-8B decode at a 512-token context from
/// 372 to 423 tok/s, but at 8K/32K cached tokens they lost 22%/41% to the longer combine pass,
/// so long contexts keep 128-key splits.
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

/// Query rows per CTA (ATT_ROWS): n_q / n_kv must divide it.
pub const ROWS_PER_CTA: usize = 16;
/// Largest head_dim the kernel holds (ATT_MAX_HD); it must also be a multiple of 32.
pub const MAX_HEAD_DIM: usize = 128;
const SPLIT_THREADS: u32 = 128;

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

/// u32 counters any launch of up to `m` tokens uses (one per (token group, kv head); one per q
/// head for the decode kernel's `_heads` entry points); the buffer must start zeroed (every
/// launch leaves it zeroed).
pub fn counters_len(m: usize, shape_: HeadShape) -> usize {
    let group = (shape_.n_q / shape_.n_kv.max(1)).max(1);
    let tokens_per_cta = (ROWS_PER_CTA / group).max(1);
    let split_keys = m.div_ceil(tokens_per_cta) * shape_.n_kv;
    if m == 1 {
        split_keys.max(shape_.n_q)
    } else {
        split_keys
    }
}

/// Causal GQA attention of `m` tokens at positions `pos0[0] + i` over the f16 caches.
/// `seq_bound` is a host-side upper bound on `pos0 + m` (e.g. max_seq for a captured decode
/// graph); a token beyond it, or beyond max_seq, gets NaN output rather than a wrong answer.
/// (The decode kernel, m == 1, does not need the bound: its grid covers any position below
/// max_seq, and only a position >= max_seq gives NaN.)
/// Batches of more than [`DECODE_MAX_TOKENS`] tokens run the tensor-core kernel where it has an
/// entry point for the head shape ([`prefill_mma_fits`]), `attention_split_keys` otherwise.
#[allow(clippy::too_many_arguments)]
pub fn attention(
    lib: &KernelLibrary,
    stream: &Arc<CudaStream>,
    qkv: &impl DevicePtr<f32>,
    m: usize,
    shape_: HeadShape,
    pos0: &impl DevicePtr<u32>,
    max_seq: usize,
    seq_bound: usize,
    k_cache: &impl DevicePtr<u16>,
    v_cache: &impl DevicePtr<u16>,
    scratch: &mut CudaSlice<f32>,
    counters: &mut CudaSlice<u32>,
    out: &mut impl DevicePtrMut<f32>,
) -> Result<(), LaunchError> {
    let kernel = if prefill_mma_fits(shape_) { PrefillKernel::Mma } else { PrefillKernel::SplitKeys };
    attention_with(lib, stream, qkv, m, shape_, pos0, max_seq, seq_bound, k_cache, v_cache, scratch, counters, out, kernel)
}

/// [`attention`] with the prefill kernel chosen by the caller (verify runs both). With
/// [`PrefillKernel::Mma`] a batch of more than [`DECODE_MAX_TOKENS`] tokens needs neither scratch
/// nor counters and computes every position below max_seq (no NaN past `seq_bound`).
#[allow(clippy::too_many_arguments)]
pub fn attention_with(
    lib: &KernelLibrary,
    stream: &Arc<CudaStream>,
    qkv: &impl DevicePtr<f32>,
    m: usize,
    shape_: HeadShape,
    pos0: &impl DevicePtr<u32>,
    max_seq: usize,
    seq_bound: usize,
    k_cache: &impl DevicePtr<u16>,
    v_cache: &impl DevicePtr<u16>,
    scratch: &mut CudaSlice<f32>,
    counters: &mut CudaSlice<u32>,
    out: &mut impl DevicePtrMut<f32>,
    kernel: PrefillKernel,
) -> Result<(), LaunchError> {
    const OP: &str = "attention";
    let hd = shape_.head_dim;
    if m == 0 || shape_.n_kv == 0 || shape_.n_q % shape_.n_kv != 0 || hd == 0 || hd % 32 != 0 || hd > MAX_HEAD_DIM {
        return Err(shape(OP, format!("unsupported shape m={m} {shape_:?} (head_dim a multiple of 32, <= {MAX_HEAD_DIM})")));
    }
    let group = shape_.n_q / shape_.n_kv;
    if ROWS_PER_CTA % group != 0 {
        return Err(shape(OP, format!("GQA group {group} does not divide {ROWS_PER_CTA}")));
    }
    if seq_bound == 0 || max_seq == 0 {
        return Err(shape(OP, "zero sequence bound".into()));
    }
    let cache = check_buffers(m, shape_, max_seq, [qkv.len(), k_cache.len(), v_cache.len(), pos0.len(), out.len()])?;
    if m == 1 && decode_entry_point(group, hd).is_some() {
        return decode::attention_decode(lib, stream, qkv, shape_, pos0, max_seq, k_cache, v_cache, scratch, counters, out, None, false);
    }
    if m > DECODE_MAX_TOKENS && kernel == PrefillKernel::Mma {
        return prefill_mma::attention_prefill_mma(lib, stream, qkv, m, shape_, pos0, max_seq, k_cache, v_cache, out);
    }
    let bound = seq_bound.min(max_seq);
    let keys_per_split = split_keys(m, bound);
    let n_splits = n_splits(m, bound);
    expect_at_least(OP, "scratch", scratch.len(), m * shape_.n_q * n_splits * (hd + 2))?;
    expect_at_least(OP, "counters", counters.len(), counters_len(m, shape_))?;
    let tokens_per_cta = ROWS_PER_CTA / group;
    let (m_i, n_q, n_kv, hd_i) = (as_i32(OP, "m", m)?, as_i32(OP, "n_q", shape_.n_q)?, as_i32(OP, "n_kv", shape_.n_kv)?, as_i32(OP, "hd", hd)?);
    let (max_seq_i, n_splits_i) = (as_i32(OP, "max_seq", max_seq)?, as_i32(OP, "n_splits", n_splits)?);
    let split_keys_i = as_i32(OP, "split_keys", keys_per_split)?;
    as_i32(OP, "cache len", cache)?;
    let z = u32::try_from(m.div_ceil(tokens_per_cta)).ok().filter(|&z| z <= 65_535).ok_or_else(|| shape(OP, "too many tokens".into()))?;
    if n_splits > 65_535 {
        return Err(shape(OP, "too many splits".into()));
    }
    let split_cfg = LaunchConfig {
        grid_dim: (shape_.n_kv as u32, n_splits as u32, z),
        block_dim: (SPLIT_THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    let split = lib.function("attention_split_keys")?;
    let (q_p, _a) = read_ptr(qkv, stream);
    let (p0, _b) = read_ptr(pos0, stream);
    let (k_p, _c) = read_ptr(k_cache, stream);
    let (v_p, _d) = read_ptr(v_cache, stream);
    // The kernel reads the caches 4 halves (8 bytes) at a time.
    if k_p % 8 != 0 || v_p % 8 != 0 {
        return Err(shape(OP, "k_cache and v_cache must start on an 8-byte boundary".into()));
    }
    let (s_p, _e) = write_ptr(scratch, stream);
    let (c_p, _f) = write_ptr(counters, stream);
    let (o_p, _g) = write_ptr(out, stream);
    let mut l = Launch::new(lib, stream, split);
    l.arg(&q_p).arg(&m_i).arg(&n_q).arg(&n_kv).arg(&hd_i).arg(&p0).arg(&max_seq_i).arg(&k_p).arg(&v_p).arg(&s_p).arg(&n_splits_i).arg(&split_keys_i);
    l.arg(&c_p).arg(&o_p);
    // SAFETY: matches attention_split_keys' signature; qkv/cache/scratch/counter lengths checked
    // above for m tokens, n_splits splits and max_seq positions; out holds m * n_q * hd values.
    unsafe { l.launch(split_cfg) }?;
    Ok(())
}

/// Checks the lengths every attention launch relies on (qkv, k_cache, v_cache, pos0, out, in
/// that order): m qkv rows, both caches of max_seq positions, one position, m output rows.
/// Returns the elements of one cache.
fn check_buffers(m: usize, shape_: HeadShape, max_seq: usize, lens: [usize; 5]) -> Result<usize, LaunchError> {
    const OP: &str = "attention";
    let cache = shape_.n_kv * max_seq * shape_.head_dim;
    let [qkv, k_cache, v_cache, pos0, out] = lens;
    expect_at_least(OP, "qkv", qkv, m * shape_.qkv_row_len())?;
    expect_at_least(OP, "k_cache", k_cache, cache)?;
    expect_at_least(OP, "v_cache", v_cache, cache)?;
    expect_at_least(OP, "pos0", pos0, 1)?;
    expect_at_least(OP, "out", out, m * shape_.q_len())?;
    Ok(cache)
}

/// One token's decode attention (as [`attention`] at m = 1) that also quantizes its output into
/// `planes` for [`crate::launch::matmul::matmul_from_planes`] (the output projection without its
/// prepare launch): the planes are bit-identical to `prepare_planes` of `out`. Needs head_dim 128,
/// a GQA group with a decode kernel (1, 2, 4, 8) and `planes.k() == n_q * 128`. `per_q_head`: the
/// `_heads` kernel (a CTA per q head), which groups 2 and 4 have ([`decode_heads_entry_point`]);
/// else the kv-head one.
#[allow(clippy::too_many_arguments)]
pub fn attention_decode_planes(
    lib: &KernelLibrary,
    stream: &Arc<CudaStream>,
    qkv: &impl DevicePtr<f32>,
    shape_: HeadShape,
    pos0: &impl DevicePtr<u32>,
    max_seq: usize,
    k_cache: &impl DevicePtr<u16>,
    v_cache: &impl DevicePtr<u16>,
    scratch: &mut CudaSlice<f32>,
    counters: &mut CudaSlice<u32>,
    out: &mut impl DevicePtrMut<f32>,
    planes: &mut B1Planes,
    per_q_head: bool,
) -> Result<(), LaunchError> {
    const OP: &str = "attention";
    let hd = shape_.head_dim;
    let group = if shape_.n_kv == 0 || shape_.n_q % shape_.n_kv != 0 { 0 } else { shape_.n_q / shape_.n_kv };
    if decode_planes_entry_point(group, hd).is_none() {
        return Err(shape(OP, format!("no decode kernel with planes for {shape_:?} (head_dim 128, group 1/2/4/8)")));
    }
    if max_seq == 0 {
        return Err(shape(OP, "zero sequence bound".into()));
    }
    if planes.k() != shape_.n_q * hd {
        return Err(shape(OP, format!("planes of K = {} for an output of {} values", planes.k(), shape_.n_q * hd)));
    }
    check_buffers(1, shape_, max_seq, [qkv.len(), k_cache.len(), v_cache.len(), pos0.len(), out.len()])?;
    let (ptrs, _guards) = planes.write_ptrs(stream);
    decode::attention_decode(lib, stream, qkv, shape_, pos0, max_seq, k_cache, v_cache, scratch, counters, out, Some(ptrs), per_q_head)
}

//! Launch of gemm_f32 on wgmma (ops/gemm_f32/gemm_f32_wgmma.cu, sm_90a): the split pass over A
//! and over W into a scratch buffer, then the GEMM over (M tile, N tile) CTAs.
//!
//! Scratch (u32, [`scratch_len`] elements): A_big, A_small `[M][K_pad]`, W_big, W_small
//! `[N][K_pad]`, K_pad = K rounded up to whole 32-wide K tiles, so any K runs (the split pass
//! reads K % 4 != 0 or unaligned rows with scalar loads and zero-fills the padding).
//! [`gemm_f32_wgmma_with_scratch`] takes the caller's; [`gemm_f32_wgmma`] allocates one
//! stream-ordered for the call. The split pass moves 12 bytes per element (4 read, 8 written)
//! and the GEMM reads 8 per element per reuse: at M=4608 N=27648 K=3072 the pass is ~1.0 GB,
//! ~0.25 ms at 4.3 TB/s, ~2.5% of a 10 ms GEMM at the 78 TFLOP/s target.

use std::sync::Arc;

use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut, LaunchConfig};

use super::{check_operands, expect_aligned8, optional_read_ptr, tile_grid_of};
use crate::launch::matmul::require_wgmma;
use crate::launch::{Gpu, 
    as_i32, expect_at_least, grid_stride_blocks, opt_in_shared_memory, read_ptr, shape, sm_count, write_ptr,
    LaunchError,
};
use crate::launch_ex::Launch;
use crate::ops::gemm_f32::{GemmDims, Inputs};

/// CTA tile (GW_TILE_M / _N / _K), ring depth, threads and fold period of gemm_f32_wgmma.cu.
pub const TILE_M: usize = 128;
pub const TILE_N: usize = 128;
pub const TILE_K: usize = 32;
pub const STAGES: usize = 3;
pub const THREADS: u32 = 256;
/// k8 steps summed in one tensor-core partial before its f32 fold (GW_FOLD_STEPS).
pub const FOLD_STEPS: usize = 4;
/// Bytes of one ring stage: A_big, A_small, W_big, W_small tiles of [128][32] f32.
const STAGE_BYTES: usize = 4 * TILE_M * TILE_K * 4;
/// The alignment the kernel rounds its shared window up to (GW_ALIGN: the 128-byte swizzle
/// repeats every 1024 bytes).
const SWIZZLE_ALIGN: usize = 1024;
/// Dynamic shared memory of one GEMM CTA: the ring plus the alignment slack.
pub const SMEM_BYTES: usize = STAGES * STAGE_BYTES + SWIZZLE_ALIGN;
/// Split pass: threads per CTA (GW_SPLIT_THREADS), columns per thread.
const SPLIT_THREADS: u32 = 256;
const SPLIT_COLUMNS_PER_THREAD: usize = 4;
/// Row CTAs (grid y, below its 65,535 limit) of the split pass when there are more rows: each
/// loops over rows, and this many already fill the GPU.
const SPLIT_ROW_CTAS: usize = 1024;

const OP: &str = "gemm_f32_wgmma";
const SPLIT: &str = "gemm_f32_tf32_split";

/// The GEMM's entry point.
const GEMM: &str = "gemm_f32_3xtf32_wgmma";
/// The split-K merge's entry point.
const MERGE: &str = "gemm_f32_split_merge";
/// Most K splits, and the fewest K tiles a split may have.
const MAX_SPLITS: usize = 3;
const MIN_K_TILES_PER_SPLIT: usize = 16;
/// Below this many waves of CTAs (one CTA per SM) the last partial wave costs enough to split K.
const SPLIT_BELOW_WAVES: usize = 4;
/// Threads per CTA of the merge.
const MERGE_THREADS: u32 = 256;

/// K splits for `dims` on `sms` SMs (1: none). One CTA runs per SM, so a grid of C CTAs takes
/// ceil(C / sms) waves with the last one C mod sms full: at M=1536 N=3072 (288 CTAs on 132 SMs)
/// the third wave is 18% full and the GEMM runs at 73% of the full-wave rate. Splitting K s ways
/// multiplies the CTAs by s; the split with the fullest waves wins (ties: fewer splits), as long
/// as every split keeps MIN_K_TILES_PER_SPLIT K tiles. Each split adds one f32 round-to-nearest
/// add per output in the merge (the bound counts it: `verify/image_gemm.rs`) and s·M·N·4 bytes
/// written and read once more.
pub fn split_k(dims: GemmDims, sms: usize) -> usize {
    let ctas = dims.m.div_ceil(TILE_M) * dims.n.div_ceil(TILE_N);
    let k_tiles = padded_k(dims.k) / TILE_K;
    if sms == 0 || ctas >= SPLIT_BELOW_WAVES * sms {
        return 1;
    }
    let fill = |s: usize| (ctas * s) as f64 / ((ctas * s).div_ceil(sms) * sms) as f64;
    let mut best = 1;
    for s in 2..=MAX_SPLITS {
        if k_tiles / s >= MIN_K_TILES_PER_SPLIT && fill(s) > fill(best) + 1e-9 {
            best = s;
        }
    }
    best
}

/// [`split_k`] on the device of `stream`.
pub fn split_k_on(stream: &Arc<CudaStream>, dims: GemmDims) -> Result<usize, LaunchError> {
    let sms = sm_count(stream)?;
    Ok(split_k(dims, sms))
}

/// K rounded up to whole K tiles: the row length of the split operands.
pub fn padded_k(k: usize) -> usize {
    k.div_ceil(TILE_K) * TILE_K
}

/// u32 elements of the scratch the wgmma path needs for `dims`: 2·(M + N)·K_pad.
pub fn scratch_len(dims: GemmDims) -> Result<usize, LaunchError> {
    dims.m
        .checked_add(dims.n)
        .and_then(|rows| rows.checked_mul(2 * padded_k(dims.k)))
        .ok_or_else(|| shape(OP, format!("shape {dims:?} overflows")))
}

/// `out[M, N] = a[M, K] · w[N, K]^T (+ bias[N])` on wgmma with a scratch allocated (stream-ordered)
/// for this call and freed after it.
pub fn gemm_f32_wgmma(
    gpu: Gpu<'_>,
    inputs: Inputs<'_, impl DevicePtr<f32>>,
    out: &mut impl DevicePtrMut<f32>,
) -> Result<(), LaunchError> {
    let dims = inputs.dims;
    check(gpu.stream, dims)?;
    // SAFETY: uninitialised device memory; the split pass writes every element of it (all K_pad
    // columns of all M + N rows of both parts) before the GEMM, the only reader, runs on the
    // same gpu.stream.
    let mut scratch = unsafe { gpu.stream.alloc::<u32>(scratch_len(dims)?) }?;
    gemm_f32_wgmma_with_scratch(gpu, inputs, &mut scratch, out)
}

/// The device and shape checks shared by both forms.
fn check(stream: &Arc<CudaStream>, dims: GemmDims) -> Result<(), LaunchError> {
    require_wgmma(stream, OP)?;
    if dims.m == 0 || dims.n == 0 || dims.k == 0 {
        return Err(shape(OP, format!("empty shape {dims:?}")));
    }
    Ok(())
}

/// As [`gemm_f32_wgmma`] with the caller's scratch (at least [`scratch_len`] u32; its contents
/// are overwritten).
pub fn gemm_f32_wgmma_with_scratch(
    gpu: Gpu<'_>,
    inputs: Inputs<'_, impl DevicePtr<f32>>,
    scratch: &mut impl DevicePtrMut<u32>,
    out: &mut impl DevicePtrMut<f32>,
) -> Result<(), LaunchError> {
    let Inputs { dims, a, w, bias } = inputs;
    check(gpu.stream, dims)?;
    let (m_i, n_i, _) = check_operands(OP, &inputs, out.len(), (TILE_M, TILE_N))?;
    expect_at_least(OP, "scratch", scratch.len(), scratch_len(dims)?)?;
    let GemmDims { m, n, k } = dims;
    let k_pad = padded_k(k);
    let k_pad_i = as_i32(OP, "K (padded)", k_pad)?;
    let gemm = gpu.function(GEMM)?;
    // Before any work: a device without the room fails here.
    opt_in_shared_memory(OP, gpu.stream, gemm, SMEM_BYTES, "the wgmma gemm_f32")?;
    let mut cfg = tile_grid_of(OP, m, n, (TILE_M, TILE_N), THREADS, SMEM_BYTES)?;
    let splits = split_k_on(gpu.stream, dims)?;
    cfg.grid_dim.1 = splits as u32;
    let splits_i = splits as i32;

    let (s_ptr, _gs) = write_ptr(scratch, gpu.stream);
    let [a_big, a_small, w_big, w_small] = split_operands_at(gpu, dims, a, w, s_ptr)?;
    let (bias_ptr, _gb) = optional_read_ptr(bias, gpu.stream);
    let (out_ptr, _go) = write_ptr(out, gpu.stream);
    expect_aligned8(OP, "out", out_ptr)?;
    let partial = if splits > 1 {
        // SAFETY: gpu.stream-ordered f32 scratch of splits·M·N, never read before written: every
        // split CTA row stores all M x N outputs of its partial (zeros for an empty K range).
        Some(unsafe { gpu.stream.alloc::<f32>(splits * m * n) }?)
    } else {
        None
    };
    let (gemm_out, _gp) = match &partial {
        Some(p) => {
            let (ptr, guard) = p.device_ptr(gpu.stream);
            (ptr, Some(guard))
        }
        None => (out_ptr, None),
    };
    let mut b = Launch::new(gpu, gemm);
    b.arg(&a_big).arg(&a_small).arg(&w_big).arg(&w_small).arg(&bias_ptr).arg(&gemm_out);
    b.arg(&m_i).arg(&n_i).arg(&k_pad_i).arg(&splits_i);
    // SAFETY: argument order and types match gemm_f32_3xtf32_wgmma (a_big, a_small, w_big,
    // w_small, bias or null, out, m, n, k_padded, splits); the four split operands are disjoint
    // [rows][k_pad] ranges of the checked scratch, written by the split launches before this one
    // on the same gpu.stream; the kernel bounds rows by m and n and reads k_pad columns (a multiple
    // of the K tile); its output (`out`, checked to hold m x n, or the splits·m·n partial buffer
    // when gridDim.y = splits > 1; m·n·4 bytes apart, a multiple of 8 when n is even, and the
    // kernel stores pairs only when n is even) takes 8-byte stores, and the CTA was granted
    // SMEM_BYTES of shared memory.
    unsafe { b.launch(cfg) }?;
    if splits > 1 {
        let f = gpu.function(MERGE)?;
        let cfg = LaunchConfig {
            grid_dim: (grid_stride_blocks(m * n / 4 + 1, MERGE_THREADS), 1, 1),
            block_dim: (MERGE_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut b = Launch::new(gpu, f);
        b.arg(&gemm_out).arg(&bias_ptr).arg(&out_ptr).arg(&m_i).arg(&n_i).arg(&splits_i);
        // SAFETY: matches gemm_f32_split_merge(partial, bias or null, out, m, n, splits); the
        // partial buffer holds splits·m·n floats written by the GEMM just queued on this gpu.stream,
        // bias n floats (checked), out m·n floats (checked).
        unsafe { b.launch(cfg) }?;
    }
    Ok(())
}

/// The split pass alone: big / small parts of a and w into `scratch` (at least [`scratch_len`]
/// u32), as [`gemm_f32_wgmma_with_scratch`] runs it before the GEMM (bench times it alone).
pub fn split_operands(
    gpu: Gpu<'_>,
    inputs: Inputs<'_, impl DevicePtr<f32>>,
    scratch: &mut impl DevicePtrMut<u32>,
) -> Result<(), LaunchError> {
    let Inputs { dims, a, w, .. } = inputs;
    check(gpu.stream, dims)?;
    expect_at_least(SPLIT, "a", a.len(), dims.m.saturating_mul(dims.k))?;
    expect_at_least(SPLIT, "w", w.len(), dims.n.saturating_mul(dims.k))?;
    expect_at_least(SPLIT, "scratch", scratch.len(), scratch_len(dims)?)?;
    let (s_ptr, _gs) = write_ptr(scratch, gpu.stream);
    split_operands_at(gpu, dims, a, w, s_ptr).map(|_| ())
}

/// Both split launches into the scratch at device address `s_ptr` (lengths checked by the
/// callers); returns the four operand addresses: A_big, A_small, W_big, W_small.
fn split_operands_at(
    gpu: Gpu<'_>,
    dims: GemmDims,
    a: &impl DevicePtr<f32>,
    w: &impl DevicePtr<f32>,
    s_ptr: u64,
) -> Result<[u64; 4], LaunchError> {
    let GemmDims { m, n, k } = dims;
    let part_bytes = |rows: usize| (rows * padded_k(k) * std::mem::size_of::<u32>()) as u64;
    let (a_big, a_small) = (s_ptr, s_ptr + part_bytes(m));
    let (w_big, w_small) = (s_ptr + 2 * part_bytes(m), s_ptr + 2 * part_bytes(m) + part_bytes(n));
    {
        let (a_ptr, _ga) = read_ptr(a, gpu.stream);
        split(gpu, a_ptr, m, k, (a_big, a_small))?;
    }
    {
        let (w_ptr, _gw) = read_ptr(w, gpu.stream);
        split(gpu, w_ptr, n, k, (w_big, w_small))?;
    }
    Ok([a_big, a_small, w_big, w_small])
}

/// One split launch: `src[rows][k]` into `(big, small)` `[rows][K_pad]` (device addresses).
fn split(
    gpu: Gpu<'_>,
    src: u64,
    rows: usize,
    k: usize,
    (big, small): (u64, u64),
) -> Result<(), LaunchError> {
    let k_pad = padded_k(k);
    let (rows_i, k_i, k_pad_i) =
        (as_i32(SPLIT, "rows", rows)?, as_i32(SPLIT, "K", k)?, as_i32(SPLIT, "K (padded)", k_pad)?);
    let vec4 = i32::from(k % 4 == 0 && src % 16 == 0);
    let column_ctas = k_pad.div_ceil(SPLIT_THREADS as usize * SPLIT_COLUMNS_PER_THREAD);
    let row_ctas = rows.min(SPLIT_ROW_CTAS);
    let cfg = LaunchConfig {
        grid_dim: (column_ctas as u32, row_ctas as u32, 1),
        block_dim: (SPLIT_THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    let f = gpu.function(SPLIT)?;
    let mut b = Launch::new(gpu, f);
    b.arg(&src).arg(&rows_i).arg(&k_i).arg(&k_pad_i).arg(&vec4).arg(&big).arg(&small);
    // SAFETY: argument order and types match gemm_f32_tf32_split (src, rows, k, k_padded, vec4,
    // big, small); src holds rows x k f32 (checked by the caller), big and small rows x k_pad u32
    // (16-byte aligned: scratch base + multiples of 128 bytes); vec4 only when every row starts
    // on a 16-byte boundary; column_ctas x 1024 columns cover k_pad.
    unsafe { b.launch(cfg) }?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::smem_limits::{H200_SMEM_PER_SM, RESERVED_SMEM_PER_CTA};

    #[test]
    fn one_cta_fits_an_sm_and_the_ring_stays_aligned() {
        const { assert!(SMEM_BYTES + RESERVED_SMEM_PER_CTA <= H200_SMEM_PER_SM) };
        assert_eq!(STAGE_BYTES % SWIZZLE_ALIGN, 0);
    }

    #[test]
    fn scratch_covers_padded_rows_and_rejects_overflow() {
        assert_eq!(padded_k(1), 32);
        assert_eq!(padded_k(32), 32);
        assert_eq!(padded_k(1029), 1056);
        let dims = GemmDims { m: 3, n: 5, k: 7 };
        assert_eq!(scratch_len(dims).expect("fits"), 2 * 8 * 32);
        assert!(scratch_len(GemmDims { m: usize::MAX, n: 1, k: 1 }).is_err());
    }

    #[test]
    fn k_splits_only_where_the_last_wave_is_poorly_filled() {
        let d = |m, n, k| GemmDims { m, n, k };
        const H200_SMS: usize = 132;
        // 288 CTAs: 2.2 waves; 3 splits fill 93.5% of 7 waves.
        assert_eq!(split_k(d(1536, 3072, 3072), H200_SMS), 3);
        assert_eq!(split_k(d(1536, 3072, 12288), H200_SMS), 3);
        // The text encoder's down projection: 80 CTAs, 3 splits fill 240 of 264 slots.
        assert_eq!(split_k(d(512, 2560, 9728), H200_SMS), 3);
        // 864 CTAs and more: at least 4 waves, no split.
        assert_eq!(split_k(d(4608, 3072, 3072), H200_SMS), 1);
        assert_eq!(split_k(d(1536, 9216, 3072), H200_SMS), 1);
        assert_eq!(split_k(d(4608, 27648, 3072), H200_SMS), 1);
        // Too short a K for 2 splits of 16 tiles; 33 tiles give 2, not 3.
        assert_eq!(split_k(d(64, 64, 900), H200_SMS), 1);
        assert_eq!(split_k(d(64, 64, 1029), H200_SMS), 2);
        assert_eq!(split_k(d(64, 64, 1029), 0), 1);
    }

    #[test]
    fn the_split_pass_and_the_gemm_are_registered() {
        let names: Vec<&str> = crate::cuda::library::entry_points().collect();
        for name in ["gemm_f32_tf32_split", GEMM, MERGE] {
            assert!(names.contains(&name), "{name} is not a registered entry point");
        }
    }
}

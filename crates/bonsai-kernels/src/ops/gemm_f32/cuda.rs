//! Launchers of the 3xTF32 tensor-core kernels (ops/gemm_f32/tile_3xtf32.cu): `gemm_f32` here,
//! `conv3x3` in ops/conv3x3/cuda.rs. Both check every length, alignment and index range on the
//! host, pick the 16-byte-copy variant where K % 4 == 0 and the K-contiguous operands are 16-byte
//! aligned (else the 4-byte-copy variant, same arithmetic), and opt in to the dynamic shared
//! memory the 3-stage ring needs. gemm_f32's wgmma path (Hopper): [`wgmma`]; [`gemm_f32`] picks
//! the path ([`chosen_path`]).

use std::sync::Arc;

use cudarc::driver::sys::CUfunction_attribute;
use cudarc::driver::{CudaFunction, CudaStream, DevicePtr, DevicePtrMut, LaunchConfig};

use crate::launch::matmul::device_has_wgmma;
use cudarc::driver::SyncOnDrop;
use crate::launch::{Gpu, as_i32, expect_at_least, read_ptr, shape, write_ptr, LaunchError};
use crate::launch_ex::Launch;
use crate::ops::gemm_f32::{GemmDims, Inputs};

/// CTA tile (TF32X3_TILE_M / _N / _K), ring depth and threads of tile_3xtf32.cu.
pub const TILE_M: usize = 128;
pub const TILE_N: usize = 128;
pub const TILE_K: usize = 32;
pub const STAGES: usize = 3;
pub const THREADS: u32 = 256;
/// k8 steps summed in one tensor-core partial before its f32 fold (TF32X3_FOLD_STEPS).
pub const FOLD_STEPS: usize = 2;
/// Bytes of one [128][32] f32 operand tile in shared memory.
pub(crate) const ROWS_TILE_BYTES: usize = TILE_M * TILE_K * 4;
/// Dynamic shared memory of one gemm_f32 CTA: A and W tiles per stage.
pub const GEMM_SMEM_BYTES: usize = STAGES * 2 * ROWS_TILE_BYTES;

const OP: &str = "gemm_f32";

#[path = "cuda_wgmma.rs"]
pub mod wgmma;

/// The entry point for a K-contiguous operand pair: 16-byte copies when every row starts on a
/// 16-byte boundary (K % 4 == 0 and aligned bases).
pub(crate) fn variant(
    k: usize,
    ptrs: &[u64],
    vec16: &'static str,
    scalar: &'static str,
) -> &'static str {
    if k % 4 == 0 && ptrs.iter().all(|p| p % 16 == 0) {
        vec16
    } else {
        scalar
    }
}

/// A 1-D grid of one CTA per (M tile, N tile), as the kernels' rasterisation expects.
pub(crate) fn tile_grid(
    op: &'static str,
    m: usize,
    n: usize,
    smem_bytes: usize,
) -> Result<LaunchConfig, LaunchError> {
    tile_grid_of(op, m, n, (TILE_M, TILE_N), THREADS, smem_bytes)
}

/// As [`tile_grid`] for CTA tiles of `tile_m` x `tile_n` outputs and `threads` threads.
pub(crate) fn tile_grid_of(
    op: &'static str,
    m: usize,
    n: usize,
    (tile_m, tile_n): (usize, usize),
    threads: u32,
    smem_bytes: usize,
) -> Result<LaunchConfig, LaunchError> {
    let ctas = m.div_ceil(tile_m) * n.div_ceil(tile_n);
    let ctas = u32::try_from(ctas)
        .ok()
        .filter(|&c| c <= i32::MAX as u32)
        .ok_or_else(|| shape(op, format!("{m} x {n} outputs need {ctas} CTAs, beyond the grid")))?;
    Ok(LaunchConfig {
        grid_dim: (ctas, 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: smem_bytes as u32,
    })
}

/// Opts `func` in to `smem_bytes` of dynamic shared memory (above the 48 KiB default).
pub(crate) fn allow_smem(func: &CudaFunction, smem_bytes: usize) -> Result<(), LaunchError> {
    let attr = CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
    func.set_attribute(attr, smem_bytes as i32)?;
    Ok(())
}

/// Errors unless the output can take the kernels' 8-byte paired stores.
pub(crate) fn expect_aligned8(op: &'static str, what: &str, ptr: u64) -> Result<(), LaunchError> {
    if ptr % 8 != 0 {
        return Err(shape(
            op,
            format!("{what} must start on an 8-byte boundary (a view at an even offset)"),
        ));
    }
    Ok(())
}

/// The kernels of gemm_f32.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GemmF32Path {
    /// mma.sync m16n8k8 (tile_3xtf32.cu): every architecture from sm_80.
    MmaSync,
    /// wgmma, both operands from shared memory, after a split pass (gemm_f32_wgmma.cu):
    /// compute capability 9.0 only.
    Wgmma,
    /// One CTA per output column, plain f32 FMA (gemm_f32_rows_column_cta_*): M <=
    /// [`ROWS_PATH_MAX_M`] only (a decode step), where the tiled kernels run one CTA over all of K.
    Rows,
    /// Warp blocks of 4 x 6 outputs in CTA tiles of 16 x 12, plain f32 FMA
    /// (gemm_f32_small_n_*): any shape; [`model_path`] takes it for N <= [`SMALL_N_MAX_N`]
    /// (a prefill's alpha/beta), where 128-wide tensor-core tiles leave the grid M/128 CTAs.
    SmallN,
}

impl GemmF32Path {
    /// The name verify and bench rows carry.
    pub fn op_name(self) -> &'static str {
        match self {
            GemmF32Path::MmaSync => "gemm_f32_3xtf32",
            GemmF32Path::Wgmma => "gemm_f32_3xtf32_wgmma",
            GemmF32Path::Rows => "gemm_f32_rows",
            GemmF32Path::SmallN => "gemm_f32_small_n",
        }
    }
}

/// The path [`gemm_f32`] takes on this stream's device: wgmma where the device has it (compute
/// capability 9.0), mma.sync elsewhere.
pub fn chosen_path(stream: &Arc<CudaStream>) -> Result<GemmF32Path, LaunchError> {
    Ok(if device_has_wgmma(stream)? {
        GemmF32Path::Wgmma
    } else {
        GemmF32Path::MmaSync
    })
}

/// `out[M, N] = a[M, K] · w[N, K]^T (+ bias[N])` on tensor cores, 3xTF32 (error bound in
/// ops/gemm_f32/mod.rs), on `path` (None: [`chosen_path`]; verify runs every path the device has,
/// and a wgmma path on a device without wgmma is an error); the wgmma path allocates its split
/// scratch per call ([`wgmma::gemm_f32_wgmma_with_scratch`] takes the caller's). Buffers may be
/// longer than the shape needs.
pub fn gemm_f32(
    gpu: Gpu<'_>,
    path: Option<GemmF32Path>,
    inputs: Inputs<'_, impl DevicePtr<f32>>,
    out: &mut impl DevicePtrMut<f32>,
) -> Result<(), LaunchError> {
    match path.map_or_else(|| chosen_path(gpu.stream), Ok)? {
        GemmF32Path::MmaSync => gemm_f32_mma(gpu, inputs, out),
        GemmF32Path::Wgmma => wgmma::gemm_f32_wgmma(gpu, inputs, out),
        GemmF32Path::Rows => gemm_f32_rows(gpu, inputs, out),
        GemmF32Path::SmallN => gemm_f32_small_n(gpu, inputs, out),
    }
}

/// The path for a model's f32 projection of `m` rows to `n` outputs inside a captured step (no
/// allocation, so never wgmma, whose split scratch is allocated per call): the column-per-CTA
/// kernel for a decode step's few rows, the small-N kernel for narrow outputs, mma.sync
/// otherwise.
pub fn model_path(m: usize, n: usize) -> GemmF32Path {
    if m <= ROWS_PATH_MAX_M {
        GemmF32Path::Rows
    } else if n <= SMALL_N_MAX_N {
        GemmF32Path::SmallN
    } else {
        GemmF32Path::MmaSync
    }
}

/// Most rows of `a` the column-per-CTA path takes (GEMM_F32_COLUMN_MAX_M: its shared sums).
pub const ROWS_PATH_MAX_M: usize = 16;
/// Threads per CTA of gemm_f32_rows_column_cta_* (GEMM_F32_COLUMN_THREADS).
pub(crate) const COLUMN_THREADS: usize = 256;
/// Widest output [`model_path`] sends to the small-N kernel: up to here a 128-wide tensor-core
/// tile would be at least half padding and its grid only M/128 CTAs.
pub const SMALL_N_MAX_N: usize = 64;
/// One warp's block of outputs (GEMM_F32_SMALL_N_WARP_M / _N) and the warps of a CTA along M and
/// N (GEMM_F32_SMALL_N_WARPS_M / _N) in gemm_f32_small_n_*.
pub(crate) const SMALL_N_WARP: (usize, usize) = (4, 6);
pub(crate) const SMALL_N_WARPS: (usize, usize) = (4, 2);
/// The CTA tile of the small-N kernel (rows of M, columns of N).
pub const SMALL_N_TILE: (usize, usize) = (SMALL_N_WARP.0 * SMALL_N_WARPS.0, SMALL_N_WARP.1 * SMALL_N_WARPS.1);
const SMALL_N_THREADS: u32 = (SMALL_N_WARPS.0 * SMALL_N_WARPS.1 * 32) as u32;

/// Height of the summation tree behind every output of a plain-f32 path (no bias; the error bound
/// is γ_h·Σ|a·w|, ops/gemm_f32/mod.rs): one thread's FMA chain (the `_vec16` variants' chains are
/// 4 products per float4 of their stride, at least as long as the scalar variants'), the warp's
/// 5 butterfly adds, and on the column path the sequential sum of the CTA's warps. Panics on a
/// tensor-core path (their bound is not a tree height).
pub fn plain_tree_height(path: GemmF32Path, k: usize) -> usize {
    const BUTTERFLY: usize = 5;
    match path {
        GemmF32Path::Rows => 4 * k.div_ceil(4 * COLUMN_THREADS) + BUTTERFLY + (COLUMN_THREADS / 32 - 1),
        GemmF32Path::SmallN => 4 * k.div_ceil(4 * 32) + BUTTERFLY,
        GemmF32Path::MmaSync | GemmF32Path::Wgmma => panic!("{path:?} is not a plain-f32 path"),
    }
}

/// The column-per-CTA path: `out[M, N] = a[M, K] · w[N, K]^T (+ bias[N])` in plain f32, for
/// M <= [`ROWS_PATH_MAX_M`]; N CTAs of [`COLUMN_THREADS`] threads, each over one weight row's K.
pub fn gemm_f32_rows<T: DevicePtr<f32>>(
    gpu: Gpu<'_>,
    inputs: Inputs<'_, T>,
    out: &mut impl DevicePtrMut<f32>,
) -> Result<(), LaunchError> {
    launch_plain::<T, _>(gpu, GemmF32Path::Rows, inputs, out, None)
}

/// The small-N path: `out[M, N] = a[M, K] · w[N, K]^T (+ bias[N])` in plain f32, any shape; CTA
/// tiles of [`SMALL_N_TILE`] outputs, each warp's lanes over all of K.
pub fn gemm_f32_small_n<T: DevicePtr<f32>>(
    gpu: Gpu<'_>,
    inputs: Inputs<'_, T>,
    out: &mut impl DevicePtrMut<f32>,
) -> Result<(), LaunchError> {
    launch_plain::<T, _>(gpu, GemmF32Path::SmallN, inputs, out, None)
}

/// Two projections of the same activations: `outs[i][M, N] = a[M, K] · ws[i][N, K]^T`, no bias
/// (Bonsai 2's alpha and beta). On the plain-f32 paths one launch covers both (2N columns: the
/// same per-output arithmetic, so the same bits, as two launches); the tensor-core paths run one
/// launch per matrix.
pub fn gemm_f32_pair<T: DevicePtr<f32>, O: DevicePtrMut<f32>>(
    gpu: Gpu<'_>,
    path: GemmF32Path,
    dims: GemmDims,
    a: &T,
    ws: [&T; 2],
    outs: [&mut O; 2],
) -> Result<(), LaunchError> {
    let [out0, out1] = outs;
    let first = Inputs { dims, a, w: ws[0], bias: None };
    match path {
        GemmF32Path::Rows | GemmF32Path::SmallN => launch_plain(gpu, path, first, out0, Some((ws[1], out1))),
        GemmF32Path::MmaSync | GemmF32Path::Wgmma => {
            gemm_f32(gpu, Some(path), first, out0)?;
            gemm_f32(gpu, Some(path), Inputs { dims, a, w: ws[1], bias: None }, out1)
        }
    }
}

/// One launch of a plain-f32 kernel (`path` Rows or SmallN) over `inputs`' matrix and, when
/// given, a second matrix of the same shape into its own output.
fn launch_plain<T: DevicePtr<f32>, O: DevicePtrMut<f32>>(
    gpu: Gpu<'_>,
    path: GemmF32Path,
    inputs: Inputs<'_, T>,
    out: &mut O,
    second: Option<(&T, &mut O)>,
) -> Result<(), LaunchError> {
    let op = path.op_name();
    let tile = match path {
        GemmF32Path::Rows => (1, 1),
        GemmF32Path::SmallN => SMALL_N_TILE,
        GemmF32Path::MmaSync | GemmF32Path::Wgmma => {
            return Err(shape(op, "not a plain-f32 path".to_string()));
        }
    };
    let (m_i, n_i, k_i) = check_operands(op, &inputs, out.len(), tile)?;
    let Inputs { dims: GemmDims { m, n, k }, a, w, bias } = inputs;
    if path == GemmF32Path::Rows && m > ROWS_PATH_MAX_M {
        return Err(shape(op, format!("M = {m} rows; this path takes at most {ROWS_PATH_MAX_M}")));
    }
    if let Some((w2, out2)) = &second {
        if bias.is_some() {
            return Err(shape(op, "a bias with a second matrix (the kernels add it to the first only)".to_string()));
        }
        expect_at_least(op, "second w", w2.len(), n * k)?;
        expect_at_least(op, "second out", out2.len(), m * n)?;
    }
    // Output columns of the grid: both matrices' side by side.
    let cols = if second.is_some() { 2 * n } else { n };
    as_i32(op, "columns of both matrices + one tile", cols + tile.1)?;
    let (a_ptr, _ga) = read_ptr(a, gpu.stream);
    let (w_ptr, _gw) = read_ptr(w, gpu.stream);
    let (bias_ptr, _gb) = optional_read_ptr(bias, gpu.stream);
    let (out_ptr, _go) = write_ptr(out, gpu.stream);
    let (w2_ptr, _gw2, out2_ptr, _go2) = match second {
        Some((w2, out2)) => {
            let (w2_ptr, gw2) = read_ptr(w2, gpu.stream);
            let (out2_ptr, go2) = write_ptr(out2, gpu.stream);
            (w2_ptr, Some(gw2), out2_ptr, Some(go2))
        }
        None => (0, None, 0, None),
    };
    let cfg = match path {
        GemmF32Path::Rows => {
            let ctas = u32::try_from(cols).map_err(|_| shape(op, format!("{cols} columns need as many CTAs")))?;
            LaunchConfig { grid_dim: (ctas, 1, 1), block_dim: (COLUMN_THREADS as u32, 1, 1), shared_mem_bytes: 0 }
        }
        // One CTA per tile, row tile major (the kernel's blockIdx.x / tiles_n).
        _ => tile_grid_of(op, m, cols, SMALL_N_TILE, SMALL_N_THREADS, 0)?,
    };
    let k_operands: &[u64] = if w2_ptr != 0 { &[a_ptr, w_ptr, w2_ptr] } else { &[a_ptr, w_ptr] };
    let name = match path {
        GemmF32Path::Rows => variant(k, k_operands, "gemm_f32_rows_column_cta_vec16", "gemm_f32_rows_column_cta_any_k"),
        _ => variant(k, k_operands, "gemm_f32_small_n_vec16", "gemm_f32_small_n_any_k"),
    };
    let func = gpu.function(name)?;
    let mut b = Launch::new(gpu, func);
    b.arg(&a_ptr).arg(&w_ptr).arg(&bias_ptr).arg(&out_ptr).arg(&w2_ptr).arg(&out2_ptr);
    b.arg(&m_i).arg(&n_i).arg(&k_i);
    // SAFETY: argument order and types match gemm_f32_rows_column_cta_* and gemm_f32_small_n_*
    // (a, w, bias or null, out, w2 or null, out2 or null, m, n, k); check_operands and the checks
    // above covered a (m x k), w and w2 (n x k), bias (n), out and out2 (m x n), and that the
    // columns of both matrices plus one tile fit the kernels' ints; the grid covers `cols`
    // columns (Rows: one CTA each, M within its shared sums; SmallN: whole tiles, whose rows
    // and columns past the output read row M-1 / column cols-1 and store nothing); the vec16
    // variant is chosen only for K % 4 == 0 and 16-byte aligned a, w and w2.
    unsafe { b.launch(cfg) }?;
    Ok(())
}

/// The device address of an optional operand (0, the kernels' null, when absent) and its guard.
pub(crate) fn optional_read_ptr<'a>(
    buf: Option<&'a impl DevicePtr<f32>>,
    stream: &'a Arc<CudaStream>,
) -> (u64, Option<SyncOnDrop<'a>>) {
    match buf {
        Some(b) => {
            let (p, guard) = read_ptr(b, stream);
            (p, Some(guard))
        }
        None => (0, None),
    }
}

/// Checks a GEMM's operands and output against `dims` (buffers may be longer) and that M and N
/// rounded up to whole `(tile_m, tile_n)` tiles fit the kernels' ints; returns (M, N, K) as them.
pub(crate) fn check_operands(
    op: &'static str,
    inputs: &Inputs<'_, impl DevicePtr<f32>>,
    out_len: usize,
    (tile_m, tile_n): (usize, usize),
) -> Result<(i32, i32, i32), LaunchError> {
    let Inputs { dims, a, w, bias } = *inputs;
    let GemmDims { m, n, k } = dims;
    if m == 0 || n == 0 || k == 0 {
        return Err(shape(op, format!("empty shape {dims:?}")));
    }
    let elems = |x: usize, y: usize| x.checked_mul(y).ok_or_else(|| shape(op, format!("shape {dims:?} overflows")));
    expect_at_least(op, "a", a.len(), elems(m, k)?)?;
    expect_at_least(op, "w", w.len(), elems(n, k)?)?;
    expect_at_least(op, "out", out_len, elems(m, n)?)?;
    if let Some(b) = bias {
        expect_at_least(op, "bias", b.len(), n)?;
    }
    // The kernels round M and N up to whole tiles in 32-bit ints.
    as_i32(op, "M + one tile", m + tile_m)?;
    as_i32(op, "N + one tile", n + tile_n)?;
    Ok((as_i32(op, "M", m)?, as_i32(op, "N", n)?, as_i32(op, "K", k)?))
}

/// The mma.sync path: `out[M, N] = a[M, K] · w[N, K]^T (+ bias[N])`.
pub fn gemm_f32_mma(
    gpu: Gpu<'_>,
    inputs: Inputs<'_, impl DevicePtr<f32>>,
    out: &mut impl DevicePtrMut<f32>,
) -> Result<(), LaunchError> {
    let (m_i, n_i, k_i) = check_operands(OP, &inputs, out.len(), (TILE_M, TILE_N))?;
    let Inputs { dims: GemmDims { m, n, k }, a, w, bias } = inputs;
    let cfg = tile_grid(OP, m, n, GEMM_SMEM_BYTES)?;
    let (a_ptr, _ga) = read_ptr(a, gpu.stream);
    let (w_ptr, _gw) = read_ptr(w, gpu.stream);
    let (bias_ptr, _gb) = optional_read_ptr(bias, gpu.stream);
    let (out_ptr, _go) = write_ptr(out, gpu.stream);
    expect_aligned8(OP, "out", out_ptr)?;
    let name = variant(k, &[a_ptr, w_ptr], "gemm_f32_3xtf32_vec16", "gemm_f32_3xtf32_any_k");
    let func = gpu.function(name)?;
    allow_smem(func, GEMM_SMEM_BYTES)?;
    let mut b = Launch::new(gpu, func);
    b.arg(&a_ptr).arg(&w_ptr).arg(&bias_ptr).arg(&out_ptr).arg(&m_i).arg(&n_i).arg(&k_i);
    // SAFETY: argument order and types match gemm_f32_3xtf32_* (a, w, bias or null, out, m, n,
    // k); lengths were checked above to cover every index the kernel touches, the vec16 variant is
    // chosen only for 16-byte aligned rows, `out` takes 8-byte stores, and the CTA was granted
    // GEMM_SMEM_BYTES of shared memory.
    unsafe { b.launch(cfg) }?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_variants_of_both_ops_are_registered_and_chosen_by_alignment() {
        let names: Vec<&str> = crate::cuda::library::entry_points().collect();
        for name in [
            "gemm_f32_3xtf32_vec16",
            "gemm_f32_3xtf32_any_k",
            "conv3x3_3xtf32_vec16",
            "conv3x3_3xtf32_any_c",
        ] {
            assert!(names.contains(&name), "{name} is not a registered entry point");
        }
        assert_eq!(variant(64, &[256, 512], "v", "s"), "v");
        assert_eq!(variant(66, &[256, 512], "v", "s"), "s");
        assert_eq!(variant(64, &[256, 516], "v", "s"), "s");
    }

    #[test]
    fn the_plain_paths_are_registered_and_chosen_by_shape() {
        let names: Vec<&str> = crate::cuda::library::entry_points().collect();
        for name in [
            "gemm_f32_rows_column_cta_vec16",
            "gemm_f32_rows_column_cta_any_k",
            "gemm_f32_small_n_vec16",
            "gemm_f32_small_n_any_k",
        ] {
            assert!(names.contains(&name), "{name} is not a registered entry point");
        }
        // Bonsai 2's alpha/beta: decode (M = 1) and prefill (M = 512); a wide projection.
        assert_eq!(model_path(1, 48), GemmF32Path::Rows);
        assert_eq!(model_path(ROWS_PATH_MAX_M, 96), GemmF32Path::Rows);
        assert_eq!(model_path(ROWS_PATH_MAX_M + 1, 48), GemmF32Path::SmallN);
        assert_eq!(model_path(512, SMALL_N_MAX_N), GemmF32Path::SmallN);
        assert_eq!(model_path(512, SMALL_N_MAX_N + 1), GemmF32Path::MmaSync);
        // The 27B prefill (M = 512, N = 48) fills a 132-SM H200 with one wave of CTAs.
        let cfg = tile_grid_of(OP, 512, 48, SMALL_N_TILE, SMALL_N_THREADS, 0).expect("fits");
        assert_eq!((cfg.grid_dim.0, SMALL_N_TILE), (128, (16, 12)));
    }

    #[test]
    fn the_plain_trees_are_the_chains_plus_the_fixed_reductions() {
        // K = 5120: a column-CTA thread takes 5 float4s (20 products), + 5 butterfly + 7 warps;
        // a small-N lane 40 float4s (160 products) + 5.
        assert_eq!(plain_tree_height(GemmF32Path::Rows, 5120), 20 + 5 + 7);
        assert_eq!(plain_tree_height(GemmF32Path::SmallN, 5120), 160 + 5);
        // Scalar chains (K % 4 != 0) are no longer than the bound's float4 count: K = 5119 takes
        // ceil(5119/256) = 20 and ceil(5119/32) = 160 products.
        assert!(5119usize.div_ceil(COLUMN_THREADS) <= plain_tree_height(GemmF32Path::Rows, 5119) - 12);
        assert!(5119usize.div_ceil(32) <= plain_tree_height(GemmF32Path::SmallN, 5119) - 5);
        assert_eq!(plain_tree_height(GemmF32Path::SmallN, 1), 4 + 5);
    }

    #[test]
    fn shared_memory_fits_every_embedded_architecture() {
        // sm_86 / sm_89 grant at most 99 KiB of opt-in shared memory per CTA; two CTAs per
        // H200 SM (228 KiB, 1 KiB reserved per CTA) is what __launch_bounds__(256, 2) asks for.
        use crate::launch::smem_limits::{H200_SMEM_PER_SM, RESERVED_SMEM_PER_CTA};
        const SM86_MAX_SMEM: usize = 99 * 1024;
        for bytes in [GEMM_SMEM_BYTES, crate::launch::conv3x3::CONV_SMEM_BYTES] {
            assert!(bytes <= SM86_MAX_SMEM, "{bytes}");
            assert!(2 * (bytes + RESERVED_SMEM_PER_CTA) <= H200_SMEM_PER_SM, "{bytes}");
        }
    }

    #[test]
    fn the_grid_covers_every_tile_and_rejects_overflow() {
        let cfg = tile_grid(OP, 129, 257, GEMM_SMEM_BYTES).expect("fits");
        assert_eq!(cfg.grid_dim, (2 * 3, 1, 1));
        assert!(tile_grid(OP, 1 << 40, 1 << 20, GEMM_SMEM_BYTES).is_err());
    }
}

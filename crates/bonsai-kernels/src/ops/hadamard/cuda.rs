//! Launchers of `hadamard_block_in_smem`, `hadamard_blocks_in_warps` and `hadamard_rotate_planes`
//! (hadamard.cu), and `hadamard_rotate_f16_rows_q*` (hadamard_f16.cu).

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut, LaunchConfig, SyncOnDrop};

use crate::launch::matmul::{B1Planes, F16Rows};
use crate::launch::QuantBits;
use crate::launch::{as_i32, expect_at_least, read_ptr, shape, write_ptr, Gpu, LaunchError};
use crate::launch_ex::Launch;
use crate::ops::hadamard::VHeadPerm;
use crate::weights::GROUP;

/// `RMS_NORM_THREADS` of rms_norm.cu: at least this many threads per CTA of [`rotate_planes`]
/// take the row's partial sums of squares as `rms_norm` does.
const RMS_NORM_THREADS: usize = 256;
/// `ROTATE_PER_THREAD` of hadamard.cu: the most block values one thread of [`rotate_planes`]
/// holds in registers: two 128-groups' 4 values each in its first phase (the widest block's groups
/// over 32 warps), 8 group-strided values in its second (the widest block's groups over 8
/// threads per offset: 128 · 8 threads).
const ROTATE_PER_THREAD: usize = 8;
const _: () = assert!(
    MAX_BLOCK / GROUP <= ROTATE_PER_THREAD / 4 * 32 && MAX_BLOCK / GROUP <= ROTATE_PER_THREAD * 8,
    "hadamard_rotate_planes holds the widest block in 1024 threads' registers"
);
/// `HADAMARD_ROWS_PER_CTA` of hadamard.cu: rows per CTA of `hadamard_blocks_in_warps`.
const ROWS_PER_CTA: usize = 2;
/// `ROTATE_F16_THREADS` of hadamard_f16.cu: the norm's partial sums and the f16 pre-pass's threads.
const ROTATE_F16_THREADS: u32 = 256;
/// Static shared memory of `hadamard_rotate_f16_rows_q*` (the block reductions' 32 floats).
const ROTATE_F16_STATIC_BYTES: usize = 4 * 32;
/// Shared memory every device grants a CTA without opting in.
const DEFAULT_SHARED_BYTES: usize = 48 * 1024;

const OP: &str = "hadamard";
/// The widest block one CTA transforms: its values fit 1024 threads' registers, 8 each.
pub const MAX_BLOCK: usize = 8192;
/// Threads per CTA of `hadamard_block_in_smem` at most (one per butterfly pair up to this).
const MAX_THREADS: usize = 512;

/// The transform of `ops::hadamard` on `rows` rows of `signs.len()` values: forward
/// `y = BlockH(s ⊙ P(x))` or inverse `y = s ⊙ BlockH(x)`, blocks of `block` (a power of two
/// dividing the width, at most [`MAX_BLOCK`]). `width` is the sign vector's length. No rows:
/// nothing runs.
#[allow(clippy::too_many_arguments)]
pub fn hadamard(
    gpu: Gpu<'_>,
    x: &impl DevicePtr<f32>,
    signs: &impl DevicePtr<f32>,
    width: usize,
    block: usize,
    inverse: bool,
    tiled_to_grouped: Option<VHeadPerm>,
    rows: usize,
    y: &mut impl DevicePtrMut<f32>,
) -> Result<(), LaunchError> {
    launch_transform(gpu, x, signs, width, block, inverse, tiled_to_grouped, rows, y, block.is_multiple_of(GROUP))
}

/// [`hadamard`] through `hadamard_block_in_smem` at any block: the order every kernel keeps, for
/// `bonsai kernels verify` to compare `hadamard_blocks_in_warps` with bit for bit.
#[allow(clippy::too_many_arguments)]
pub(crate) fn hadamard_shared_loop(
    gpu: Gpu<'_>,
    x: &impl DevicePtr<f32>,
    signs: &impl DevicePtr<f32>,
    width: usize,
    block: usize,
    inverse: bool,
    tiled_to_grouped: Option<VHeadPerm>,
    rows: usize,
    y: &mut impl DevicePtrMut<f32>,
) -> Result<(), LaunchError> {
    launch_transform(gpu, x, signs, width, block, inverse, tiled_to_grouped, rows, y, false)
}

/// [`hadamard`]'s checks and launch: `hadamard_blocks_in_warps` when `in_warps` (the block whole
/// 128-groups), else `hadamard_block_in_smem`.
#[allow(clippy::too_many_arguments)]
fn launch_transform(
    gpu: Gpu<'_>,
    x: &impl DevicePtr<f32>,
    signs: &impl DevicePtr<f32>,
    width: usize,
    block: usize,
    inverse: bool,
    tiled_to_grouped: Option<VHeadPerm>,
    rows: usize,
    y: &mut impl DevicePtrMut<f32>,
    in_warps: bool,
) -> Result<(), LaunchError> {
    let (perm_hd, perm_k, perm_rep) = check_transform(width, block, inverse, tiled_to_grouped)?;
    expect_at_least(OP, "signs", signs.len(), width)?;
    if rows == 0 {
        return Ok(()); // as the CPU version: no rows, nothing to do
    }
    expect_at_least(OP, "x", x.len(), rows * width)?;
    expect_at_least(OP, "y", y.len(), rows * width)?;
    as_i32(OP, "rows x width", rows * width)?;
    // The CPU version's scale (1/sqrt(n) in f32), applied at the load.
    let scale = 1.0 / (block as f32).sqrt();
    let (width_i, block_i, inverse_i) = (as_i32(OP, "width", width)?, block as i32, i32::from(inverse));
    let (x_p, _a) = read_ptr(x, gpu.stream);
    let (s_p, _b) = read_ptr(signs, gpu.stream);
    let (y_p, _c) = write_ptr(y, gpu.stream);
    if in_warps {
        debug_assert!(block.is_multiple_of(GROUP), "hadamard_blocks_in_warps takes whole 128-groups");
        // Whole 128-groups: hadamard_blocks_in_warps, HADAMARD_ROWS_PER_CTA rows per CTA.
        let row_sets = rows.div_ceil(ROWS_PER_CTA);
        let ctas = u32::try_from(row_sets * (width / block)).map_err(|_| shape(OP, format!("{rows} rows exceed the grid")))?;
        let threads = (block / 4).min(1024) as u32;
        let smem = 4 * ROWS_PER_CTA * block;
        let func = gpu.function("hadamard_blocks_in_warps")?;
        if smem > DEFAULT_SHARED_BYTES {
            crate::launch::opt_in_shared_memory(OP, gpu.stream, func, smem, "the rows' blocks")?;
        }
        // 16-byte loads when every 4 values of a group are 4 aligned values of x and of the
        // signs: rows and heads of whole float4s, 16-byte aligned bases.
        let vec4 = i32::from(width.is_multiple_of(4) && perm_hd % 4 == 0 && (x_p | s_p).is_multiple_of(16));
        let rows_i = as_i32(OP, "rows", rows)?;
        // 1-D: `ctas` covers every row set already (the kernel finds its rows from blockIdx.x).
        let cfg = LaunchConfig { grid_dim: (ctas, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: smem as u32 };
        let mut l = Launch::new(gpu, func);
        l.arg(&x_p).arg(&s_p).arg(&y_p).arg(&rows_i).arg(&width_i).arg(&block_i).arg(&scale).arg(&inverse_i).arg(&vec4);
        l.arg(&perm_hd).arg(&perm_k).arg(&perm_rep);
        // SAFETY: matches hadamard_blocks_in_warps(x, signs, y, rows, width, block, scale, inverse,
        // vec4, perm_hd, perm_k_heads, perm_rep); x and y hold rows * width floats, signs width
        // (checked above), the CTA skips rows past `rows`; the permutation maps [0, width) onto
        // itself, moving runs of perm_hd (a multiple of 4 with vec4, as the width, and the bases
        // 16-byte aligned); ROWS_PER_CTA blocks of shared memory (opted in past the default);
        // block / threads = 4 (8 for MAX_BLOCK) values per thread, MAX_BLOCK / 128 groups over
        // 32 warps at most 2 per warp.
        unsafe { l.launch(cfg) }?;
        return Ok(());
    }
    // Blocks below a 128-group: the shared-memory loop, a thread per butterfly pair (up to 512).
    let ctas = u32::try_from(rows * (width / block)).map_err(|_| shape(OP, format!("{rows} rows exceed the grid")))?;
    let threads = (block / 2).clamp(32, MAX_THREADS) as u32;
    let cfg = LaunchConfig { grid_dim: (ctas, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: (block * 4) as u32 };
    let func = gpu.function("hadamard_block_in_smem")?;
    let mut l = Launch::new(gpu, func);
    l.arg(&x_p).arg(&s_p).arg(&y_p).arg(&width_i).arg(&block_i).arg(&scale).arg(&inverse_i);
    l.arg(&perm_hd).arg(&perm_k).arg(&perm_rep);
    // SAFETY: matches hadamard_block_in_smem(x, signs, y, width, block, scale, inverse, perm_hd,
    // perm_k_heads, perm_rep); x and y hold rows * width floats, signs width (checked above); the
    // permutation maps [0, width) onto itself; block * 4 bytes of shared memory <= 32 KB.
    unsafe { l.launch(cfg) }?;
    Ok(())
}

/// Checks a transform's width, block and permutation; returns the kernels' permutation arguments
/// (head_dim, k_heads, rep), zeros without one.
fn check_transform(width: usize, block: usize, inverse: bool, tiled_to_grouped: Option<VHeadPerm>) -> Result<(i32, i32, i32), LaunchError> {
    if width == 0 {
        return Err(shape(OP, "empty sign vector (row width 0)".into()));
    }
    if !block.is_power_of_two() || width % block != 0 || block > MAX_BLOCK {
        return Err(shape(OP, format!("block {block} must be a power of two dividing the width {width}, at most {MAX_BLOCK}")));
    }
    Ok(match tiled_to_grouped {
        None => (0, 0, 0),
        Some(_) if inverse => {
            return Err(shape(OP, "the tiled-to-grouped permutation applies to the forward transform only".into()))
        }
        Some(p) if p.width() != width || p.head_dim == 0 => {
            return Err(shape(OP, format!("V-head permutation {p:?} covers {} values, the row has {width}", p.width())))
        }
        Some(p) => (as_i32(OP, "head_dim", p.head_dim)?, as_i32(OP, "k_heads", p.k_heads)?, as_i32(OP, "rep", p.rep)?),
    })
}

/// The norm [`rotate_planes`] applies before the transform, its output written to `out` when
/// given (where it is still read later): `x / rms(x) · weight` over the whole row (`rms_norm`), or
/// with `gate` per head of `head_dim` values `x_h / rms(x_h) · weight ⊙ silu(z_h)`
/// (`gated_rms_norm`, `weight` of `head_dim`).
pub struct RotateNorm<'a> {
    pub weight: &'a CudaSlice<f32>,
    pub eps: f32,
    pub gate: Option<RotateGate<'a>>,
    pub out: Option<&'a mut CudaSlice<f32>>,
}

/// The gated form of [`RotateNorm`]: the gate z (a value per value of the row) and the head size.
pub struct RotateGate<'a> {
    pub z: &'a CudaSlice<f32>,
    pub head_dim: usize,
}

/// Whether [`rotate_planes`] takes blocks of `block`: a power of two of whole 128-groups (the
/// planes' groups never straddle two CTAs' blocks), at most [`MAX_BLOCK`].
pub fn rotate_planes_block_ok(block: usize) -> bool {
    block.is_power_of_two() && block % GROUP == 0 && block <= MAX_BLOCK
}

/// One row (a decode token's) of `width` values: `r = BlockH(s ⊙ P(n(x)))` with `n` the norm of
/// `norm` (the identity without one) and `P` the tiled-to-grouped permutation when given, r
/// written to `rot` when given, and r's bit planes into `planes` (K = `width`): in one launch,
/// bit for bit what `rms_norm` (or `gated_rms_norm`), the forward [`hadamard`] and
/// `prepare_planes` produce one after the other (ops/hadamard/mod.rs, "Fused with the norm and the planes").
/// Planes of m rows ([`B1Planes::new_rows`]: a batched decode step) take m rows of x (and of the
/// gate, the normed and the rotated rows), each row as one launch of its own would.
#[allow(clippy::too_many_arguments)]
pub fn rotate_planes(
    gpu: Gpu<'_>,
    x: &CudaSlice<f32>,
    norm: Option<RotateNorm<'_>>,
    signs: &CudaSlice<f32>,
    width: usize,
    block: usize,
    tiled_to_grouped: Option<VHeadPerm>,
    rot: Option<&mut CudaSlice<f32>>,
    planes: &mut B1Planes,
) -> Result<(), LaunchError> {
    const OP: &str = "hadamard_rotate_planes";
    if planes.k() != width {
        return Err(shape(OP, format!("planes of K = {} for a row of {width}", planes.k())));
    }
    let rows = planes.rows();
    let stream = gpu.stream;
    let a = rotate_args(OP, stream, x, norm, signs, (width, block, tiled_to_grouped), rot, rows)?;
    // rms_norm_row_per_block's 16-byte path, taken when the row and its weights (and its output)
    // start 16-byte aligned: the same path gives the same partial sums.
    let vec4 = i32::from(width % 4 == 0 && (a.x | a.w | a.xn) % 16 == 0);
    let ((planes_p, gsx_p, sq_p), _gp) = planes.write_ptrs(stream);
    let func = gpu.function(if rows > 1 { "hadamard_rotate_planes_rows" } else { "hadamard_rotate_planes" })?;
    // The block, the 32-float scratch and the block's heads' 1/rms: a few KB, so the CTA shares
    // its SM (a whole SM's shared memory would wait for an SM the previous kernel's CTAs have all
    // left).
    let heads = if a.head_dim > 0 { block / a.head_dim as usize } else { 0 };
    let smem = 4 * (block + 32 + heads);
    if smem > DEFAULT_SHARED_BYTES {
        crate::launch::opt_in_shared_memory(OP, stream, func, smem, "a block with its heads' norms")?;
    }
    // A thread per 4 values (a warp per 128-group), at least RMS_NORM_THREADS (the row norm's
    // partial sums), at most 1024: the widest block holds 8 values per thread.
    let threads = (block / 4).clamp(RMS_NORM_THREADS, 1024) as u32;
    let ctas = (width / block) as u32;
    let cfg = LaunchConfig { grid_dim: (ctas, rows as u32, 1), block_dim: (threads, 1, 1), shared_mem_bytes: smem as u32 };
    let scale = 1.0 / (block as f32).sqrt();
    let (width_i, block_i) = (as_i32(OP, "width", width)?, block as i32);
    let (perm_hd, perm_k, perm_rep) = a.perm;
    let mut l = Launch::new(gpu, func);
    l.arg(&a.x).arg(&a.w).arg(&a.eps).arg(&vec4).arg(&a.z).arg(&a.head_dim).arg(&a.xn).arg(&a.signs).arg(&a.rot).arg(&width_i);
    l.arg(&block_i).arg(&scale).arg(&perm_hd).arg(&perm_k).arg(&perm_rep).arg(&planes_p).arg(&gsx_p).arg(&sq_p);
    // SAFETY: matches hadamard_rotate_planes(x, norm_w, eps, vec4, z, head_dim, xn, signs, rot,
    // width, block, scale, perm_hd, perm_k_heads, perm_rep, planes, gsx, group_sq) and its `_rows`
    // twin: x, z, xn and rot (each or null) hold rows x width floats, signs width, the norm
    // weights width (head_dim when gated), the planes rows of K = width (checked above); the
    // permutation maps [0, width) onto itself and moves whole gated heads; the shared memory holds
    // block + 32 + block / head_dim floats (opted in past the default); the CTA's warps loop over
    // the block's heads and 128-groups, and its threads hold the block within ROTATE_PER_THREAD
    // values each (asserted above).
    unsafe { l.launch(cfg) }?;
    Ok(())
}

/// The checked arguments of a fused rotation (`rotate_planes`, `rotate_f16_rows`): device
/// pointers (0 where absent) and the guards that keep them.
struct RotateArgs<'a> {
    x: u64,
    w: u64,
    eps: f32,
    z: u64,
    head_dim: i32,
    xn: u64,
    signs: u64,
    rot: u64,
    /// The kernels' permutation arguments (head_dim, k_heads, rep), zeros without one.
    perm: (i32, i32, i32),
    _guards: Vec<SyncOnDrop<'a>>,
}

/// Checks `rows` rows of `width` values (x, the gate, the normed and rotated outputs), the norm
/// weights, the signs, the block and the permutation of a fused rotation, and takes their pointers.
#[allow(clippy::too_many_arguments)]
fn rotate_args<'a>(
    op: &'static str,
    stream: &'a Arc<CudaStream>,
    x: &'a CudaSlice<f32>,
    norm: Option<RotateNorm<'a>>,
    signs: &'a CudaSlice<f32>,
    (width, block, tiled_to_grouped): (usize, usize, Option<VHeadPerm>),
    rot: Option<&'a mut CudaSlice<f32>>,
    rows: usize,
) -> Result<RotateArgs<'a>, LaunchError> {
    let perm = check_transform(width, block, false, tiled_to_grouped)?;
    if !rotate_planes_block_ok(block) {
        return Err(shape(op, format!("block {block} must be a multiple of the {GROUP}-value planes group")));
    }
    let values = rows * width;
    expect_at_least(op, "signs", signs.len(), width)?;
    expect_at_least(op, "x", x.len(), values)?;
    let mut guards = Vec::new();
    let mut keep = |(p, g): (u64, SyncOnDrop<'a>)| {
        guards.push(g);
        p
    };
    let x_p = keep(read_ptr(x, stream));
    let s_p = keep(read_ptr(signs, stream));
    let r_p = match rot {
        Some(r) => {
            expect_at_least(op, "rot", r.len(), values)?;
            keep(write_ptr(r, stream))
        }
        None => 0,
    };
    let (mut w_p, mut eps, mut z_p, mut head_dim, mut xn_p) = (0, 0.0, 0, 0, 0);
    if let Some(RotateNorm { weight, eps: e, gate, out }) = norm {
        eps = e;
        match gate {
            Some(RotateGate { z, head_dim: d }) => {
                // Whole heads per block, moved whole by the permutation.
                if d == 0 || block % d != 0 || tiled_to_grouped.is_some_and(|p| p.head_dim % d != 0) {
                    return Err(shape(op, format!("gated heads of {d} must tile the block {block} and the permuted heads")));
                }
                expect_at_least(op, "norm weights", weight.len(), d)?;
                expect_at_least(op, "gate", z.len(), values)?;
                z_p = keep(read_ptr(z, stream));
                head_dim = as_i32(op, "head_dim", d)?;
            }
            None => expect_at_least(op, "norm weights", weight.len(), width)?,
        }
        if let Some(o) = out {
            expect_at_least(op, "normed x", o.len(), values)?;
            xn_p = keep(write_ptr(o, stream));
        }
        w_p = keep(read_ptr(weight, stream));
    }
    Ok(RotateArgs { x: x_p, w: w_p, eps, z: z_p, head_dim, xn: xn_p, signs: s_p, rot: r_p, perm, _guards: guards })
}

/// `rows` rows of `width` values: `r = BlockH(s ⊙ P(n(x)))` as [`rotate_planes`] computes it,
/// r written to `rot` when given, and r in the f16 GEMMs' input form for `bits`-bit weights into
/// `out` (K = `width`; [`crate::launch::matmul::matmul_f16_rows`] reads it): in one launch, a CTA
/// per row, bit for bit what `rms_norm` (or `gated_rms_norm`), the forward [`hadamard`] and the
/// f16 pre-pass produce one after the other (ops/hadamard/mod.rs, "Fused with the norm and the
/// f16 pre-pass"). Every row, the signs, the norm weights and the gate start 16-byte aligned;
/// permuted heads and gated heads are whole float4s.
#[allow(clippy::too_many_arguments)]
pub fn rotate_f16_rows(
    gpu: Gpu<'_>,
    x: &CudaSlice<f32>,
    norm: Option<RotateNorm<'_>>,
    signs: &CudaSlice<f32>,
    (width, block, tiled_to_grouped): (usize, usize, Option<VHeadPerm>),
    rot: Option<&mut CudaSlice<f32>>,
    rows: usize,
    bits: QuantBits,
    out: &mut F16Rows,
) -> Result<(), LaunchError> {
    const OP: &str = "hadamard_rotate_f16_rows";
    if rows == 0 {
        return Err(shape(OP, "no rows".into()));
    }
    let stream = gpu.stream;
    let a = rotate_args(OP, stream, x, norm, signs, (width, block, tiled_to_grouped), rot, rows)?;
    let (perm_hd, perm_k, perm_rep) = a.perm;
    if perm_hd % 4 != 0 || a.head_dim % 4 != 0 || (a.x | a.w | a.z | a.xn | a.signs) % 16 != 0 {
        return Err(shape(OP, "rows, signs, norm weights and gate must be whole, 16-byte aligned float4s (heads too)".into()));
    }
    as_i32(OP, "rows x width", rows * width)?;
    let (xh_p, unscale_p) = out.write_ptrs(stream, OP, (bits, rows, width))?;
    let func = gpu.function(if bits == QuantBits::One { "hadamard_rotate_f16_rows_q1" } else { "hadamard_rotate_f16_rows_q2" })?;
    // The row and its heads' 1/rms.
    let heads = if a.head_dim > 0 { width / a.head_dim as usize } else { 0 };
    let smem = 4 * (width + heads);
    // Past the default with the kernel's static 32-float scratch.
    if smem + ROTATE_F16_STATIC_BYTES > DEFAULT_SHARED_BYTES {
        crate::launch::opt_in_shared_memory(OP, stream, func, smem, "a row with its heads' norms")?;
    }
    let ctas = u32::try_from(rows).map_err(|_| shape(OP, format!("{rows} rows exceed the grid")))?;
    let cfg = LaunchConfig { grid_dim: (ctas, 1, 1), block_dim: (ROTATE_F16_THREADS, 1, 1), shared_mem_bytes: smem as u32 };
    let scale = 1.0 / (block as f32).sqrt();
    let (width_i, block_i) = (as_i32(OP, "width", width)?, block as i32);
    let mut l = Launch::new(gpu, func);
    l.arg(&a.x).arg(&a.w).arg(&a.eps).arg(&a.z).arg(&a.head_dim).arg(&a.xn).arg(&a.signs).arg(&a.rot).arg(&width_i).arg(&block_i);
    l.arg(&scale).arg(&perm_hd).arg(&perm_k).arg(&perm_rep).arg(&xh_p).arg(&unscale_p);
    // SAFETY: matches hadamard_rotate_f16_rows_q*(x, norm_w, eps, z, head_dim, xn, signs, rot,
    // width, block, scale, perm_hd, perm_k_heads, perm_rep, xh, row_unscale): x, z, xn and rot
    // (each or null) hold rows x width floats, signs width, the norm weights width (head_dim when
    // gated), xh rows x width halves and row_unscale rows floats (checked above and by
    // write_ptrs); the 16-byte loads and copies are aligned (checked above); the permutation maps
    // [0, width) onto itself moving whole heads of a multiple of 4 values; the shared memory holds
    // width + width / head_dim floats (opted in past the default); one CTA per row of
    // ROTATE_F16_THREADS threads (the pre-pass's and the norm's thread count).
    unsafe { l.launch(cfg) }?;
    Ok(())
}

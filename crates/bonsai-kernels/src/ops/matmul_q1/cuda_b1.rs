//! Launcher of the one-token binary GEMV (matmul_gemv_b1.cu): `gemv_b1_prepare` quantizes x into
//! bit planes in stream-ordered scratch ([`B1Planes::scratch`], a warp per 128-group), then `*_gemv_b1` runs the dot
//! products on the binary tensor core. Graph capture records the scratch allocation too.
//! [`prepare`] and [`launch_gemv`] are also the two halves cuda_planes.rs launches on its
//! caller-owned planes.

use std::sync::Arc;

use cudarc::driver::sys::CUfunction_attribute;
use cudarc::driver::{CudaFunction, CudaStream, LaunchConfig};

use super::matmul::{
    b1_geometry, b1_pair_geometry, b1_shape_ok, kernel_name, B1Planes, Epilogue, GemmKernel, GemvKernel, B1_GROUP_WORDS, DEFAULT_SMEM_LIMIT,
    MAX_WARPS_B1, TcGeometry, TILE_ROWS,
};
use crate::launch::{Gpu, as_i32, shape, sm_count, LaunchError, QuantBits};
use crate::launch_ex::Launch;
use crate::weights::GROUP;

/// The two launches of a one-token binary GEMV with `n_out` outputs (features for SwiGLU) of K
/// inputs; `norm`: the fused RMSNorm's weights (K floats, 8-byte aligned) and eps. The caller
/// checked every buffer's length and alignment.
#[allow(clippy::too_many_arguments)]
pub(crate) fn launch(
    gpu: Gpu<'_>,
    bits: QuantBits,
    epilogue: Epilogue,
    n_out: usize,
    k: usize,
    (scales, payload, x, y): (u64, u64, u64, u64),
    norm: Option<(u64, f32)>,
) -> Result<(), LaunchError> {
    let op = epilogue.op_name();
    // The GEMV's shape check before any allocation.
    if !b1_shape_ok(k, n_out) {
        return Err(shape(op, format!("{n_out} outputs x K = {k} exceed the GEMV grid")));
    }
    let mut scratch = B1Planes::scratch(gpu.stream, k)?;
    let (ptrs, _guards) = scratch.write_ptrs(gpu.stream);
    let norm_ptr = norm.map_or(0, |n| n.0);

    prepare(gpu, op, k, x, norm_ptr, ptrs)?;
    let call = B1Call { bits, n_out, k, weights_y: (scales, payload, y), planes: ptrs, norm_eps: norm.map(|n| n.1) };
    launch_gemv(gpu, call, epilogue, GemvOut::None, TilesChoice::Auto)
}

/// Most tokens of the multi-token binary GEMV (`*_gemv_b1_t8`).
pub const B1_MAX_TOKENS: usize = 8;

/// The multi-token kernel for m tokens: its token count and entry-point suffix.
pub(crate) fn tokens_kernel(m: usize) -> (usize, &'static str) {
    match m {
        ..=2 => (2, "_t2"),
        3..=4 => (4, "_t4"),
        _ => (8, "_t8"),
    }
}

/// The multi-token binary GEMV for 2..=[`B1_MAX_TOKENS`] tokens (a batched decode step): one
/// prepare launch quantizes all m rows of x ([token][group] scratch), then `*_gemv_b1_t2` (m = 2),
/// `_t4` (3..4) or `_t8` streams the weights once against every token's planes. Each token's y is bit
/// for bit what the one-token GEMV with the same geometry gives it. `io` and `norm` as [`launch`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn launch_tokens(
    gpu: Gpu<'_>,
    bits: QuantBits,
    epilogue: Epilogue,
    n_out: usize,
    k: usize,
    m: usize,
    (scales, payload, x, y): (u64, u64, u64, u64),
    norm: Option<(u64, f32)>,
) -> Result<(), LaunchError> {
    let op = epilogue.op_name();
    if !(2..=B1_MAX_TOKENS).contains(&m) {
        return Err(shape(op, format!("the multi-token GEMV takes 2..={B1_MAX_TOKENS} tokens, not {m}")));
    }
    if !b1_shape_ok(k, n_out) {
        return Err(shape(op, format!("{n_out} outputs x K = {k} exceed the GEMV grid")));
    }
    let mut scratch = B1Planes::scratch(gpu.stream, k * m)?;
    let (ptrs, _guards) = scratch.write_ptrs(gpu.stream);
    let norm_ptr = norm.map_or(0, |n| n.0);
    prepare_rows(gpu, op, k, m, x, norm_ptr, ptrs)?;
    let call = B1Call { bits, n_out, k, weights_y: (scales, payload, y), planes: ptrs, norm_eps: norm.map(|n| n.1) };
    launch_gemv_tokens(gpu, call, m, epilogue, GemvOut::None)
}

/// The `*_gemv_b1_t{2,4,8}` launch of `call` for m tokens on planes of m rows (token t's at group
/// t K / 128), with `out` None or the next GEMV's planes of m rows (`_out`: the grid must then fit
/// the device in one wave).
pub(crate) fn launch_gemv_tokens(gpu: Gpu<'_>, call: B1Call, m: usize, epilogue: Epilogue, out: GemvOut) -> Result<(), LaunchError> {
    let B1Call { bits, n_out, k, .. } = call;
    let op = epilogue.op_name();
    if !(2..=B1_MAX_TOKENS).contains(&m) {
        return Err(shape(op, format!("the multi-token GEMV takes 2..={B1_MAX_TOKENS} tokens, not {m}")));
    }
    let (tokens, _) = tokens_kernel(m);
    let mut name = kernel_name(bits, epilogue, m, GemvKernel::Binary, GemmKernel::BinaryTokens, false);
    match out {
        GemvOut::None => {}
        GemvOut::Planes(_) => name.push_str("_out"),
        GemvOut::Rope(_) => return Err(shape(op, "the rope epilogue is a one-token GEMV's".into())),
    }
    let func = gpu.function(&name)?;
    let (g, one_wave) = device_geometry(gpu, func, op, k, n_out, epilogue == Epilogue::SwiGlu, tokens)?;
    if matches!(out, GemvOut::Planes(_)) && !one_wave {
        return Err(shape(op, format!("a flag-polling epilogue needs one wave: {} CTAs are more than this device holds at once", g.ctas)));
    }
    let cfg = launch_config(func, &g)?;
    let args = EntryArgs::new(op, &call, &g)?;
    let m_i = as_i32(op, "m", m)?;
    let mut b = Launch::new(gpu, func);
    args.push(&mut b);
    b.arg(&m_i);
    if let GemvOut::Planes(p) = &out {
        b.arg(p);
    }
    // SAFETY: argument order and types match the *_gemv_b1_t2 / _t4 / _t8 entry points (the *_gemv_b1
    // arguments, then m, and for `_out` the B1PlanesOut block); the weights, the planes (m rows of
    // K / 128 groups) and y (m rows of n_out) were checked by the caller, an output planes buffer
    // sized for m rows of n_out, and b1_geometry sized the block and shared memory for `tokens`
    // tokens (m <= tokens).
    unsafe { b.launch(cfg) }?;
    Ok(())
}

/// The tiles GEMV ([`launch_tiles`]) for a one-token Store GEMV of more than one wave of
/// `gemv_b1` CTAs (the LM head): one CTA per SM, each warp streaming whole tiles one after
/// another, bit-identical to the plain GEMV (kernel notes: the LM head).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TilesChoice {
    /// Tiles where the plain grid is more than one wave (production).
    Auto,
    /// Tiles whenever its preconditions hold, one wave or less included (verify compares both).
    Always,
    /// Never (verify's plain reference).
    Never,
}

/// Warps of a `*_gemv_b1_tiles` CTA (its launch bound, B1_MAX_THREADS / 32).
const TILES_WARPS: usize = MAX_WARPS_B1;

/// One binary GEMV on planes already filled: the weight format, `n_out` outputs (features for
/// SwiGLU) of K inputs, the device addresses of the weights and y and of the planes (as in
/// [`prepare`]), and `norm_eps`: Some when the planes came from a fused RMSNorm (the kernel then
/// scales by 1 / rms). The caller checked every buffer.
#[derive(Clone, Copy, Debug)]
pub(crate) struct B1Call {
    pub bits: QuantBits,
    pub n_out: usize,
    pub k: usize,
    /// (scales, payload, y).
    pub weights_y: (u64, u64, u64),
    /// (planes, gsx, group_sq).
    pub planes: (u64, u64, u64),
    pub norm_eps: Option<f32>,
}

/// The `*_gemv_b1_tiles` launch when `tiles` lets it apply: a Store GEMV whose plain grid
/// (`plain`) has one K split and whose planes fit in shared memory at once (and, for
/// [`TilesChoice::Auto`], whose plain grid is more than one wave: `plain_one_wave` false).
/// Returns whether it launched.
fn launch_tiles(
    gpu: Gpu<'_>,
    call: B1Call,
    plain: &TcGeometry,
    plain_one_wave: bool,
    tiles: TilesChoice,
) -> Result<bool, LaunchError> {
    let B1Call { bits, n_out, k, weights_y: (scales, payload, y), planes: (planes_ptr, gsx_ptr, sq_ptr), norm_eps } = call;
    let op = Epilogue::Store.op_name();
    let smem = k / GROUP * (B1_GROUP_WORDS + 2) * 4;
    // Bit-identity with the plain GEMV needs its single K split (every many-wave grid has one).
    if tiles == TilesChoice::Never || plain.splits != 1 || smem > MAX_TILES_SMEM {
        return Ok(false);
    }
    if tiles == TilesChoice::Auto && plain_one_wave {
        return Ok(false);
    }
    let sms = crate::launch::sm_count(gpu.stream)?;
    let tiles = n_out.div_ceil(TILE_ROWS);
    let warps = TILES_WARPS;
    let ctas = tiles.div_ceil(warps).min(sms) as u32;
    let name = match bits {
        QuantBits::One => "matmul_q1_gemv_b1_tiles",
        QuantBits::Two => "matmul_q2_gemv_b1_tiles",
    };
    let func = gpu.function(name)?;
    if smem + B1_STATIC_SMEM_BOUND > DEFAULT_SMEM_LIMIT {
        func.set_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem as i32)?;
    }
    let cfg = LaunchConfig { grid_dim: (ctas, 1, 1), block_dim: (warps as u32 * 32, 1, 1), shared_mem_bytes: smem as u32 };
    let (n_i, k_i) = (as_i32(op, "n_out", n_out)?, as_i32(op, "K", k)?);
    let norm_flag = i32::from(norm_eps.is_some());
    let norm_eps = norm_eps.unwrap_or(0.0);
    let mut b = Launch::new(gpu, func);
    b.arg(&scales).arg(&payload).arg(&planes_ptr).arg(&gsx_ptr).arg(&sq_ptr).arg(&y).arg(&n_i).arg(&k_i);
    b.arg(&norm_flag).arg(&norm_eps);
    // SAFETY: argument order and types match `*_gemv_b1_tiles` (scales, payload, planes, gsx,
    // group_sq, y, n_out, k, norm, norm_eps); buffers as for the plain launch (checked by the
    // caller, scratch sized for K / 128 groups); shared memory holds every group's planes and (s, X).
    unsafe { b.launch(cfg) }?;
    Ok(true)
}

/// Shared memory the tiles GEMV may take for x's planes (the plain GEMV's limit).
const MAX_TILES_SMEM: usize = 96 * 1024;

/// At least gemv_b1's static shared memory (the fused norm's per-warp sums and staged group sums:
/// 2048 bytes by ptxas -v for the plain and `_out` kernels, nvcc 13.0 sm_90a).
const B1_STATIC_SMEM_BOUND: usize = 2048;

/// Where a `_gemv_b1_out` epilogue writes y's planes (`B1PlanesOut` in matmul_gemv_b1.cu: same
/// fields, same order; device pointers as u64, `norm_w` 0 for none).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct PlanesOutArgs {
    pub planes: u64,
    pub gsx: u64,
    pub group_sq: u64,
    pub norm_w: u64,
    pub staged: u64,
}

// SAFETY: plain old data with C layout, field for field the CUDA struct (u64 = pointer).
unsafe impl cudarc::driver::DeviceRepr for PlanesOutArgs {}

/// The `_gemv_b1_rope` epilogue's parameters (`B1RopeOut` in matmul_gemv_b1.cu: same fields, same
/// order; device pointers as u64): the decode qkv projection doing qk_norm_rope_kv_write's work.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct RopeOutArgs {
    pub staged: u64,
    pub pos0: u64,
    pub q_norm: u64,
    pub k_norm: u64,
    pub cos: u64,
    pub sin: u64,
    pub k_cache: u64,
    pub v_cache: u64,
    pub block_table: u64,
    pub eps: f32,
    pub max_pos: i32,
    pub max_seq: i32,
    pub n_q: i32,
    pub n_kv: i32,
}

// SAFETY: plain old data with C layout, field for field the CUDA struct (u64 = pointer, then
// f32 and four i32; both sides pad the end to 8 bytes).
unsafe impl cudarc::driver::DeviceRepr for RopeOutArgs {}

/// What a one-token binary GEMV's epilogue does after its stores: nothing, write the next GEMV's
/// planes (`_gemv_b1_out`), or the qkv projection's norm, RoPE and KV write (`_gemv_b1_rope`).
#[derive(Clone, Copy, Debug)]
pub(crate) enum GemvOut {
    None,
    Planes(PlanesOutArgs),
    Rope(RopeOutArgs),
}

/// CTAs of a prepare launch: a warp per group (up to 32 warps), each CTA taking all of an SM's
/// shared memory so that no GEMV CTA shares its SM (kernel notes: the prepare launch).
const PREPARE_FEW_CTAS: usize = 4;

/// One `gemv_b1_prepare` launch: x (K floats, times norm_w unless it is 0) into the planes, (s, X)
/// and sums of squares at `scratch` (K / 128 groups each). The caller checked every length.
pub(crate) fn prepare(
    gpu: Gpu<'_>,
    op: &'static str,
    k: usize,
    x: u64,
    norm_ptr: u64,
    planes: (u64, u64, u64),
) -> Result<(), LaunchError> {
    prepare_rows(gpu, op, k, 1, x, norm_ptr, planes)
}

/// [`prepare`] of m rows of K (grid row = token): the scratch holds m x K / 128 groups, token
/// t's at group t K / 128 (each row's planes as one row's prepare writes them).
pub(crate) fn prepare_rows(
    gpu: Gpu<'_>,
    op: &'static str,
    k: usize,
    m: usize,
    x: u64,
    norm_ptr: u64,
    (planes_ptr, gsx_ptr, sq_ptr): (u64, u64, u64),
) -> Result<(), LaunchError> {
    let k_i = as_i32(op, "K", k)?;
    let prepare = gpu.function("gemv_b1_prepare")?;
    let mut cfg = prepare_config(gpu.stream, op, k, prepare)?;
    cfg.grid_dim.1 = u32::try_from(m).ok().filter(|&r| r <= 65_535).ok_or_else(|| shape(op, format!("m = {m} exceeds the grid's y range")))?;
    let mut b = Launch::new(gpu, prepare);
    b.arg(&x).arg(&norm_ptr).arg(&k_i).arg(&planes_ptr).arg(&gsx_ptr).arg(&sq_ptr);
    // SAFETY: gemv_b1_prepare(const float* x, const float* norm_w, int k, u32* planes, u32* gsx,
    // float* group_sq): x holds m rows of K floats and norm_w (or null) K (checked by the caller),
    // the scratch m x K / 128 groups of each; one warp per group, grid row = token.
    unsafe { b.launch(cfg) }?;

    Ok(())
}

/// The grid of a prepare launch over K inputs (a warp per group, [`PREPARE_FEW_CTAS`] CTAs).
fn prepare_config(stream: &Arc<CudaStream>, op: &'static str, k: usize, func: &CudaFunction) -> Result<LaunchConfig, LaunchError> {
    let groups = k / GROUP;
    let warps = groups.div_ceil(PREPARE_FEW_CTAS).clamp(1, 32);
    let ctas = u32::try_from(groups.div_ceil(warps)).map_err(|_| shape(op, "K too large".into()))?;
    let smem = crate::launch::opt_in_all_shared_memory(stream, func)?;
    Ok(LaunchConfig { grid_dim: (ctas, 1, 1), block_dim: (warps as u32 * 32, 1, 1), shared_mem_bytes: smem as u32 })
}

/// One `gemv_b1_prepare_embed_q{1,2}` launch: x = row `ids[0]` of the embedding table (`vocab` rows
/// of K, `bits` per weight, at `scales` / `payload`) and its planes (times norm_w unless it is 0),
/// as embed_rows then [`prepare`]. The caller checked every length.
#[allow(clippy::too_many_arguments)]
pub(crate) fn prepare_embed(
    gpu: Gpu<'_>,
    op: &'static str,
    bits: QuantBits,
    (scales, payload, ids, vocab): (u64, u64, u64, usize),
    k: usize,
    norm_ptr: u64,
    x: u64,
    (planes_ptr, gsx_ptr, sq_ptr): (u64, u64, u64),
) -> Result<(), LaunchError> {
    let (k_i, vocab_i) = (as_i32(op, "K", k)?, as_i32(op, "vocab", vocab)?);
    let func = gpu.function(match bits {
        QuantBits::One => "gemv_b1_prepare_embed_q1",
        QuantBits::Two => "gemv_b1_prepare_embed_q2",
    })?;
    let cfg = prepare_config(gpu.stream, op, k, func)?;
    let mut b = Launch::new(gpu, func);
    b.arg(&scales).arg(&payload).arg(&ids).arg(&vocab_i).arg(&norm_ptr).arg(&k_i).arg(&x);
    b.arg(&planes_ptr).arg(&gsx_ptr).arg(&sq_ptr);
    // SAFETY: gemv_b1_prepare_embed_q*(const u16* scales, const u32* payload, const u32* ids, int
    // vocab, const float* norm_w, int k, float* x, u32* planes, u32* gsx, float* group_sq): the
    // table holds vocab rows of K weights in the device layout, ids at least one id (any value:
    // out of range gives NaN), norm_w (or null) and x K floats, the planes K / 128 groups (all
    // checked by the caller); one warp per group, the grid covers every group.
    unsafe { b.launch(cfg) }?;
    Ok(())
}

/// CTAs of `func` (a `gemv_b1` entry point) with `warps` warps and `smem` bytes of dynamic
/// shared memory that one SM holds at once: the driver's occupancy calculator, after the opt-in
/// such shared memory needs (asked once per library: `KernelLibrary::occupancy`).
fn resident_ctas(gpu: Gpu<'_>, func: &CudaFunction, warps: usize, smem: usize) -> Result<usize, LaunchError> {
    let threads = (warps * 32) as u32;
    gpu.lib.occupancy(func, threads, smem, || {
        if smem + B1_STATIC_SMEM_BOUND > DEFAULT_SMEM_LIMIT {
            func.set_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem as i32)?;
        }
        Ok(func.occupancy_max_active_blocks_per_multiprocessor(threads, smem, None)? as usize)
    })
}

/// The launch of `func` (a `gemv_b1` entry point of `tokens` tokens: 1, or the multi-token
/// kernel's 2, 4 or 8) for `n_out` outputs (features for SwiGLU) of K inputs on this device
/// ([`b1_geometry`] with the driver's occupancy of `func`), and whether the whole grid is resident
/// at once, as the flag-polling epilogues need (their quantizing CTAs
/// wait for lower-numbered ones of the same grid: b1_planes_epilogue).
pub(crate) fn device_geometry(
    gpu: Gpu<'_>,
    func: &CudaFunction,
    op: &'static str,
    k: usize,
    n_out: usize,
    swiglu: bool,
    tokens: usize,
) -> Result<(TcGeometry, bool), LaunchError> {
    let sms = sm_count(gpu.stream)?;
    let g = b1_geometry(k, n_out, swiglu, tokens, sms, |warps, smem| resident_ctas(gpu, func, warps, smem))?
        .ok_or_else(|| shape(op, format!("{n_out} outputs x K = {k} exceed the GEMV grid")))?;
    let per_sm = resident_ctas(gpu, func, (g.tiles_per_cta * g.splits) as usize, g.smem_bytes)?;
    Ok((g, g.ctas as usize <= per_sm * sms))
}

/// The launch configuration of geometry `g` for `func` (a `gemv_b1` entry point), after the
/// shared-memory opt-in it needs: dynamic plus the kernel's static shared memory must stay within
/// the default limit, and at exactly 48 KB of dynamic memory the launch already needs the opt-in.
fn launch_config(func: &CudaFunction, g: &TcGeometry) -> Result<LaunchConfig, LaunchError> {
    if g.smem_bytes + B1_STATIC_SMEM_BOUND > DEFAULT_SMEM_LIMIT {
        func.set_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, g.smem_bytes as i32)?;
    }
    Ok(LaunchConfig {
        grid_dim: (g.ctas, 1, 1),
        block_dim: (g.tiles_per_cta * g.splits * 32, 1, 1),
        shared_mem_bytes: g.smem_bytes as u32,
    })
}

/// The arguments every `*_gemv_b1` entry point starts with, in GEMV_B1_ENTRY_PARAMS' order
/// (matmul_q1.cu): `call`'s buffers and shape, then geometry `g` and the fused norm's flag and eps.
/// The variants add their own after [`EntryArgs::push`].
struct EntryArgs {
    scales: u64,
    payload: u64,
    planes: u64,
    gsx: u64,
    group_sq: u64,
    y: u64,
    n_out: i32,
    k: i32,
    tiles_per_cta: i32,
    splits: i32,
    chunk_groups: i32,
    norm: i32,
    norm_eps: f32,
}

impl EntryArgs {
    fn new(op: &'static str, call: &B1Call, g: &TcGeometry) -> Result<Self, LaunchError> {
        let B1Call { n_out, k, weights_y: (scales, payload, y), planes: (planes, gsx, group_sq), norm_eps, .. } = *call;
        Ok(Self {
            scales,
            payload,
            planes,
            gsx,
            group_sq,
            y,
            n_out: as_i32(op, "n_out", n_out)?,
            k: as_i32(op, "K", k)?,
            tiles_per_cta: g.tiles_per_cta as i32,
            splits: g.splits as i32,
            chunk_groups: g.chunk_groups as i32,
            norm: i32::from(norm_eps.is_some()),
            norm_eps: norm_eps.unwrap_or(0.0),
        })
    }
    fn push<'a>(&'a self, b: &mut Launch<'a>) {
        b.arg(&self.scales).arg(&self.payload).arg(&self.planes).arg(&self.gsx).arg(&self.group_sq).arg(&self.y);
        b.arg(&self.n_out).arg(&self.k).arg(&self.tiles_per_cta).arg(&self.splits).arg(&self.chunk_groups);
        b.arg(&self.norm).arg(&self.norm_eps);
    }
}

/// The `*_gemv_b1` launch of `call` with `epilogue` and the epilogue work `out` (or its tiles form,
/// as `tiles` allows).
pub(crate) fn launch_gemv(
    gpu: Gpu<'_>,
    call: B1Call,
    epilogue: Epilogue,
    out: GemvOut,
    tiles: TilesChoice,
) -> Result<(), LaunchError> {
    let B1Call { bits, n_out, k, .. } = call;
    let op = epilogue.op_name();
    // Each epilogue has its own entry points (`_out`, `_rope`): compiled into the plain ones the
    // planes epilogue slowed them even when skipped.
    let mut name = kernel_name(bits, epilogue, 1, GemvKernel::Binary, GemmKernel::TensorCoreBf16x3, false);
    let suffix = match out {
        GemvOut::None => None,
        GemvOut::Planes(_) => Some("_out"),
        GemvOut::Rope(_) if epilogue == Epilogue::Store => Some("_rope"),
        GemvOut::Rope(_) => return Err(shape(op, "the rope epilogue is the Store GEMV's".into())),
    };
    name.push_str(suffix.unwrap_or(""));
    let func = gpu.function(&name)?;
    let (g, one_wave) = device_geometry(gpu, func, op, k, n_out, epilogue == Epilogue::SwiGlu, 1)?;
    let plain = epilogue == Epilogue::Store && matches!(out, GemvOut::None);
    if plain && launch_tiles(gpu, call, &g, one_wave, tiles)? {
        return Ok(());
    }
    if !matches!(out, GemvOut::None) && !one_wave {
        return Err(shape(op, format!("a flag-polling epilogue needs one wave: {} CTAs are more than this device holds at once", g.ctas)));
    }
    let cfg = launch_config(func, &g)?;
    let args = EntryArgs::new(op, &call, &g)?;
    let mut b = Launch::new(gpu, func);
    args.push(&mut b);
    match &out {
        GemvOut::None => {}
        GemvOut::Planes(p) => {
            b.arg(p);
        }
        GemvOut::Rope(r) => {
            b.arg(r);
        }
    }
    // SAFETY: argument order and types match the *_gemv_b1 entry points (scales, payload, planes,
    // gsx, group_sq, y, n_out, k, tiles_per_cta, splits, chunk_groups, norm, norm_eps, and for the
    // `_out` / `_rope` ones the B1PlanesOut / B1RopeOut block); the weights and y were checked by
    // the caller (payload 16-byte, scales 8-byte aligned), the scratch was sized above (cudarc
    // allocations are 256-byte aligned: cp.async's 16 bytes), a planes output or the rope
    // epilogue's buffers were sized for n_out by the caller, and b1_geometry sized the block and
    // shared memory.
    unsafe { b.launch(cfg) }?;
    Ok(())
}

/// The second matrix of a pair launch (`_gemv_b1_pair`, `_gemm_wgmma*_pair`; `PairSecond` in
/// matmul_q1.cu: same fields, same order; device pointers as u64).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct PairArgs {
    pub scales: u64,
    pub payload: u64,
    pub y: u64,
    pub n_out: i32,
    pub first_ctas: i32,
}

// SAFETY: plain old data with C layout, field for field the CUDA struct (u64 = pointer, then two
// i32: 32 bytes, no padding).
unsafe impl cudarc::driver::DeviceRepr for PairArgs {}

impl PairArgs {
    /// The block of the second matrix `(n_out, scales, payload, y)`, whose CTAs start at
    /// `first_ctas` (the first matrix's CTAs, or row tiles of the GEMM grid's x).
    pub(crate) fn new(op: &'static str, (n_out, scales, payload, y): (usize, u64, u64, u64), first_ctas: usize) -> Result<Self, LaunchError> {
        Ok(PairArgs { scales, payload, y, n_out: as_i32(op, "n_out", n_out)?, first_ctas: as_i32(op, "CTAs", first_ctas)? })
    }
}

/// The `*_gemv_b1_pair` launch of two one-token Store GEMVs of the same format and K on the same
/// planes, or None where [`b1_pair_geometry`] finds no one-wave grid for them on this device (the
/// caller then launches them one by one).
fn pair_geometry<'a>(
    gpu: Gpu<'a>,
    bits: QuantBits,
    k: usize,
    n_first: usize,
    n_second: usize,
) -> Result<Option<(&'a CudaFunction, TcGeometry)>, LaunchError> {
    let name = kernel_name(bits, Epilogue::Store, 1, GemvKernel::Binary, GemmKernel::TensorCoreBf16x3, false) + "_pair";
    let func = gpu.function(&name)?;
    let sms = sm_count(gpu.stream)?;
    let g = b1_pair_geometry(k, n_first, n_second, sms, |warps, smem| resident_ctas(gpu, func, warps, smem))?;
    Ok(g.map(|g| (func, g)))
}

/// Whether [`launch_gemv_pair`] takes these two shapes on this device.
pub(crate) fn pair_fits(gpu: Gpu<'_>, bits: QuantBits, k: usize, n_first: usize, n_second: usize) -> Result<bool, LaunchError> {
    Ok(pair_geometry(gpu, bits, k, n_first, n_second)?.is_some())
}

/// Two one-token Store GEMVs on one set of planes in one `*_gemv_b1_pair` launch: `first` and
/// `second` as (n_out, scales, payload, y) (the caller checked every buffer); y of each is
/// bit-identical to its own [`launch_gemv`] with the same geometry.
pub(crate) fn launch_gemv_pair(
    gpu: Gpu<'_>,
    bits: QuantBits,
    k: usize,
    first: (usize, u64, u64, u64),
    second: (usize, u64, u64, u64),
    planes: (u64, u64, u64),
) -> Result<(), LaunchError> {
    let op = Epilogue::Store.op_name();
    let (n_first, scales, payload, y) = first;
    let Some((func, g)) = pair_geometry(gpu, bits, k, n_first, second.0)? else {
        return Err(shape(op, format!("no one-wave pair grid for {n_first} + {} outputs x K = {k}", second.0)));
    };
    let cfg = launch_config(func, &g)?;
    // b1_pair_geometry's tiles per CTA divide the first matrix's tiles.
    let first_ctas = n_first.div_ceil(TILE_ROWS) / g.tiles_per_cta as usize;
    let pair = PairArgs::new(op, second, first_ctas)?;
    let call = B1Call { bits, n_out: n_first, k, weights_y: (scales, payload, y), planes, norm_eps: None };
    let args = EntryArgs::new(op, &call, &g)?;
    let mut b = Launch::new(gpu, func);
    args.push(&mut b);
    b.arg(&pair);
    // SAFETY: argument order and types match the *_gemv_b1_pair entry points (the *_gemv_b1
    // arguments, then the PairSecond block); both matrices' weights and y were checked by the
    // caller (same format and K as the planes, payload 16-byte and scales 8-byte aligned), and
    // b1_pair_geometry sized the block and shared memory for the tiles of both.
    unsafe { b.launch(cfg) }?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `B1RopeOut` (matmul_gemv_b1.cu) as nvcc lays it out: 9 pointers, then eps and four ints
    /// from byte 72, the end padded to 96.
    #[test]
    fn pair_args_match_the_cuda_struct() {
        assert_eq!(std::mem::offset_of!(PairArgs, n_out), 24);
        assert_eq!(std::mem::size_of::<PairArgs>(), 32);
    }

    #[test]
    fn rope_out_args_match_the_cuda_struct() {
        assert_eq!(std::mem::offset_of!(RopeOutArgs, eps), 72);
        assert_eq!(std::mem::offset_of!(RopeOutArgs, n_kv), 88);
        assert_eq!(std::mem::size_of::<RopeOutArgs>(), 96);
    }
}

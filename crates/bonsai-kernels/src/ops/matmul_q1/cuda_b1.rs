//! Launcher of the one-token binary GEMV (matmul_gemv_b1.cu): `gemv_b1_prepare` quantizes x into
//! bit planes in stream-ordered scratch ([`B1Planes::scratch`], a warp per 128-group), then `*_gemv_b1` runs the dot
//! products on the binary tensor core. Graph capture records the scratch allocation too.
//! [`prepare`] and [`launch_gemv`] are also the two halves cuda_planes.rs launches on its
//! caller-owned planes.

use std::sync::Arc;

use cudarc::driver::sys::CUfunction_attribute;
use cudarc::driver::{CudaFunction, CudaStream, LaunchConfig};

use super::matmul::{
    b1_geometry, kernel_name, B1Planes, Epilogue, GemmKernel, GemvKernel, B1_GROUP_WORDS, B1_PREPARE_WARPS, DEFAULT_SMEM_LIMIT,
    MAX_WARPS_B1, TcGeometry, TILE_ROWS,
};
use crate::cuda::KernelLibrary;
use crate::launch::{as_i32, shape, sm_count, LaunchError, QuantBits};
use crate::launch_ex::Launch;
use crate::weights::GROUP;

/// The two launches of a one-token binary GEMV with `n_out` outputs (features for SwiGLU) of K
/// inputs; `norm`: the fused RMSNorm's weights (K floats, 8-byte aligned) and eps. The caller
/// checked every buffer's length and alignment.
#[allow(clippy::too_many_arguments)]
pub(crate) fn launch(
    lib: &KernelLibrary,
    stream: &Arc<CudaStream>,
    bits: QuantBits,
    epilogue: Epilogue,
    n_out: usize,
    k: usize,
    (scales, payload, x, y): (u64, u64, u64, u64),
    norm: Option<(u64, f32)>,
) -> Result<(), LaunchError> {
    let op = epilogue.op_name();
    // The GEMV's grid check before any allocation.
    b1_geometry(k, n_out, epilogue == Epilogue::SwiGlu)
        .ok_or_else(|| shape(op, format!("{n_out} outputs x K = {k} exceed the GEMV grid")))?;
    let mut scratch = B1Planes::scratch(stream, k)?;
    let (ptrs, _guards) = scratch.write_ptrs(stream);
    let norm_ptr = norm.map_or(0, |n| n.0);

    prepare(lib, stream, op, k, x, norm_ptr, ptrs)?;
    launch_gemv(lib, stream, bits, epilogue, n_out, k, (scales, payload, y), ptrs, norm.map(|n| n.1), GemvOut::None)
}

thread_local! {
    static EARLY_RESIDUAL: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with (`on`) every plain one-token binary GEMV with the Add epilogue that it launches
/// from this thread as `*_add_gemv_b1_early`, which reads the y it adds to before waiting for the
/// previous kernel (matmul_gemv_b1.cu, EARLY_Y): bit-identical results, one L2 round trip less at
/// the end of the GEMV. The caller promises that y was written two or more kernels before each
/// such GEMV (a decode layer's residual stream), never by the kernel just before it. With `on`
/// false, `f` runs as it would outside (the previous setting is restored either way).
pub fn with_early_residual<R>(on: bool, f: impl FnOnce() -> R) -> R {
    let before = EARLY_RESIDUAL.with(|c| c.replace(on));
    let out = f();
    EARLY_RESIDUAL.with(|c| c.set(before));
    out
}

thread_local! {
    static TILES_OVERRIDE: std::cell::Cell<Option<bool>> = const { std::cell::Cell::new(None) };
}

/// `BONSAI_GEMV_TILES` (default 1): a one-token Store GEMV of more than one wave of `gemv_b1`
/// CTAs (the LM head) runs as `*_gemv_b1_tiles` (matmul_gemv_b1_tiles.cu: one CTA per SM, each
/// warp streaming whole tiles one after another), bit-identical; 0 runs the plain GEMV. Measured
/// on the H200 (docs/PERFORMANCE.md, tenth session): Bonsai-8B LM head 43.8 -> 37.8 us in the
/// trace, tg128 +0.5%, Ternary-8B +0.35%.
pub const GEMV_TILES_ENV: &str = "BONSAI_GEMV_TILES";

fn gemv_tiles_on() -> Result<bool, String> {
    if let Some(on) = TILES_OVERRIDE.with(|c| c.get()) {
        return Ok(on);
    }
    static ON: std::sync::OnceLock<Result<bool, String>> = std::sync::OnceLock::new();
    crate::launch::env_switch(&ON, GEMV_TILES_ENV, true)
}

/// Runs `f` with the tiles GEMV switched on or off for the launches it makes from this thread,
/// whatever BONSAI_GEMV_TILES says (verify compares both; the previous setting is restored).
/// Switched on this way it also takes GEMVs of one wave or less, so small shapes exercise it.
pub fn with_gemv_tiles<R>(on: bool, f: impl FnOnce() -> R) -> R {
    let before = TILES_OVERRIDE.with(|c| c.replace(Some(on)));
    let out = f();
    TILES_OVERRIDE.with(|c| c.set(before));
    out
}

/// Warps of a `*_gemv_b1_tiles` CTA (its launch bound, B1_MAX_THREADS / 32).
const TILES_WARPS: usize = MAX_WARPS_B1;

/// `BONSAI_TILES_WARPS=N` (measurement knob, 1..=16, default 16): warps per `*_gemv_b1_tiles`
/// CTA. Each warp's tiles and arithmetic do not depend on it (bit-identical y). Measured on the
/// H200 (docs/PERFORMANCE.md, 2026-12-01 third session): Bonsai-8B LM head 36.0 / 39.4 / 49.6 us
/// at 16 / 12 / 8 warps, so more warps still help but not in proportion.
pub const TILES_WARPS_ENV: &str = "BONSAI_TILES_WARPS";

fn tiles_warps() -> Result<usize, String> {
    static WARPS: std::sync::OnceLock<Result<usize, String>> = std::sync::OnceLock::new();
    let parse = |v: &str| v.parse().ok().filter(|n| (1..=TILES_WARPS).contains(n));
    crate::launch::env_knob(&WARPS, TILES_WARPS_ENV, TILES_WARPS, TILES_WARPS_EXPECTED, parse)
}

/// What [`TILES_WARPS_ENV`] accepts, for its error message.
const TILES_WARPS_EXPECTED: &str = "1..=16";

/// The `*_gemv_b1_tiles` launch (see [`GEMV_TILES_ENV`]) when it applies: a Store GEMV whose plain
/// grid (`plain`) is more than one CTA per SM with one K split, and whose planes fit in shared
/// memory at once. Returns whether it launched.
#[allow(clippy::too_many_arguments)]
fn launch_tiles(
    lib: &KernelLibrary,
    stream: &Arc<CudaStream>,
    bits: QuantBits,
    plain: &TcGeometry,
    n_out: usize,
    k: usize,
    (scales, payload, y): (u64, u64, u64),
    (planes_ptr, gsx_ptr, sq_ptr): (u64, u64, u64),
    norm_eps: Option<f32>,
) -> Result<bool, LaunchError> {
    let op = Epilogue::Store.op_name();
    let smem = k / GROUP * (B1_GROUP_WORDS + 2) * 4;
    // Bit-identity with the plain GEMV needs its single K split (every many-wave grid has one).
    if !gemv_tiles_on().map_err(|e| shape(op, e))? || plain.splits != 1 || smem > MAX_TILES_SMEM {
        return Ok(false);
    }
    let sms = crate::launch::sm_count(stream)?;
    let forced = TILES_OVERRIDE.with(|c| c.get()) == Some(true);
    if !forced && plain.ctas as usize <= sms {
        return Ok(false);
    }
    let tiles = n_out.div_ceil(TILE_ROWS);
    let warps = tiles_warps().map_err(|e| shape(op, e))?;
    let ctas = tiles.div_ceil(warps).min(sms) as u32;
    let name = match bits {
        QuantBits::One => "matmul_q1_gemv_b1_tiles",
        QuantBits::Two => "matmul_q2_gemv_b1_tiles",
    };
    let func = lib.function(name)?;
    if smem + B1_STATIC_SMEM_BOUND > DEFAULT_SMEM_LIMIT {
        func.set_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem as i32)?;
    }
    let cfg = LaunchConfig { grid_dim: (ctas, 1, 1), block_dim: (warps as u32 * 32, 1, 1), shared_mem_bytes: smem as u32 };
    let (n_i, k_i) = (as_i32(op, "n_out", n_out)?, as_i32(op, "K", k)?);
    let norm_flag = i32::from(norm_eps.is_some());
    let norm_eps = norm_eps.unwrap_or(0.0);
    let mut b = Launch::new(stream, func);
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

/// `BONSAI_PREPARE_SHAPE`: `alone` (the default: PREPARE_FEW_CTAS CTAs of up to 32 warps, one
/// group per warp, each taking all of an SM's shared memory, so no GEMV CTA shares their SMs: the
/// 128-CTA GEMVs leave 4 of the H200's 132 SMs free), `four` (the same CTAs without the shared
/// memory) or `eight` (B1_PREPARE_WARPS warps per CTA, the shape before). Measured on the H200
/// (docs/PERFORMANCE.md, tenth session), tg128 against `eight`: `alone` +0.9% on Bonsai-8B and
/// -0.4 to +0.0% on Ternary-8B, `four` +0.1%: the gain is the SM to itself, not the CTA count.
pub const PREPARE_SHAPE_ENV: &str = "BONSAI_PREPARE_SHAPE";
const PREPARE_FEW_CTAS: usize = 4;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum PrepareShape {
    Eight,
    Four,
    Alone,
}

fn prepare_shape() -> Result<PrepareShape, String> {
    static SHAPE: std::sync::OnceLock<Result<PrepareShape, String>> = std::sync::OnceLock::new();
    crate::launch::env_knob(&SHAPE, PREPARE_SHAPE_ENV, PrepareShape::Alone, "alone, four or eight", |v| match v {
        "eight" => Some(PrepareShape::Eight),
        "four" => Some(PrepareShape::Four),
        "alone" => Some(PrepareShape::Alone),
        _ => None,
    })
}

/// One `gemv_b1_prepare` launch: x (K floats, times norm_w unless it is 0) into the planes, (s, X)
/// and sums of squares at `scratch` (K / 128 groups each). The caller checked every length.
pub(crate) fn prepare(
    lib: &KernelLibrary,
    stream: &Arc<CudaStream>,
    op: &'static str,
    k: usize,
    x: u64,
    norm_ptr: u64,
    (planes_ptr, gsx_ptr, sq_ptr): (u64, u64, u64),
) -> Result<(), LaunchError> {
    let k_i = as_i32(op, "K", k)?;
    let prepare = lib.function("gemv_b1_prepare")?;
    let cfg = prepare_config(stream, op, k, prepare)?;
    let mut b = Launch::new(stream, prepare);
    b.arg(&x).arg(&norm_ptr).arg(&k_i).arg(&planes_ptr).arg(&gsx_ptr).arg(&sq_ptr);
    // SAFETY: gemv_b1_prepare(const float* x, const float* norm_w, int k, u32* planes, u32* gsx,
    // float* group_sq): x (and norm_w, or null) hold K floats (checked by the caller), the scratch
    // above holds K / 128 groups of each; one warp per group, the grid covers every group.
    unsafe { b.launch(cfg) }?;

    Ok(())
}

/// The grid of a prepare launch over K inputs (a warp per group; [`PREPARE_SHAPE_ENV`]).
fn prepare_config(stream: &Arc<CudaStream>, op: &'static str, k: usize, func: &CudaFunction) -> Result<LaunchConfig, LaunchError> {
    let groups = k / GROUP;
    let layout = prepare_shape().map_err(|e| shape(op, e))?;
    let warps = match layout {
        PrepareShape::Eight => B1_PREPARE_WARPS,
        PrepareShape::Four | PrepareShape::Alone => groups.div_ceil(PREPARE_FEW_CTAS).clamp(1, 32),
    };
    let ctas = u32::try_from(groups.div_ceil(warps)).map_err(|_| shape(op, "K too large".into()))?;
    let smem = if layout == PrepareShape::Alone { crate::launch::opt_in_all_shared_memory(stream, func)? } else { 0 };
    Ok(LaunchConfig { grid_dim: (ctas, 1, 1), block_dim: (warps as u32 * 32, 1, 1), shared_mem_bytes: smem as u32 })
}

/// One `gemv_b1_prepare_embed_q{1,2}` launch: x = row `ids[0]` of the embedding table (`vocab` rows
/// of K, `bits` per weight, at `scales` / `payload`) and its planes (times norm_w unless it is 0),
/// as embed_rows then [`prepare`]. The caller checked every length.
#[allow(clippy::too_many_arguments)]
pub(crate) fn prepare_embed(
    lib: &KernelLibrary,
    stream: &Arc<CudaStream>,
    op: &'static str,
    bits: QuantBits,
    (scales, payload, ids, vocab): (u64, u64, u64, usize),
    k: usize,
    norm_ptr: u64,
    x: u64,
    (planes_ptr, gsx_ptr, sq_ptr): (u64, u64, u64),
) -> Result<(), LaunchError> {
    let (k_i, vocab_i) = (as_i32(op, "K", k)?, as_i32(op, "vocab", vocab)?);
    let func = lib.function(match bits {
        QuantBits::One => "gemv_b1_prepare_embed_q1",
        QuantBits::Two => "gemv_b1_prepare_embed_q2",
    })?;
    let cfg = prepare_config(stream, op, k, func)?;
    let mut b = Launch::new(stream, func);
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

/// Whether a GEMV grid of geometry `g` is resident at once on this device (one CTA per SM certainly
/// is), as the `_out` planes epilogue needs: its quantizing CTAs wait for lower-numbered ones of the
/// same grid (b1_planes_epilogue).
pub(crate) fn one_wave(stream: &Arc<CudaStream>, g: &TcGeometry) -> Result<bool, LaunchError> {
    Ok(g.ctas as usize <= sm_count(stream)?)
}

/// The `*_gemv_b1` launch on planes already in `scratch` (pointers as in [`prepare`]); `norm_eps`:
/// Some when the planes came from a fused RMSNorm (the kernel then scales by 1 / rms).
#[allow(clippy::too_many_arguments)]
pub(crate) fn launch_gemv(
    lib: &KernelLibrary,
    stream: &Arc<CudaStream>,
    bits: QuantBits,
    epilogue: Epilogue,
    n_out: usize,
    k: usize,
    (scales, payload, y): (u64, u64, u64),
    (planes_ptr, gsx_ptr, sq_ptr): (u64, u64, u64),
    norm_eps: Option<f32>,
    out: GemvOut,
) -> Result<(), LaunchError> {
    let op = epilogue.op_name();
    let g = b1_geometry(k, n_out, epilogue == Epilogue::SwiGlu)
        .ok_or_else(|| shape(op, format!("{n_out} outputs x K = {k} exceed the GEMV grid")))?;
    let plain = epilogue == Epilogue::Store && matches!(out, GemvOut::None);
    if plain && launch_tiles(lib, stream, bits, &g, n_out, k, (scales, payload, y), (planes_ptr, gsx_ptr, sq_ptr), norm_eps)? {
        return Ok(());
    }
    let (n_i, k_i) = (as_i32(op, "n_out", n_out)?, as_i32(op, "K", k)?);
    // Each epilogue has its own entry points (`_out`, `_rope`): compiled into the plain ones the
    // planes epilogue slowed them even when skipped.
    let mut name = kernel_name(bits, epilogue, 1, GemvKernel::Binary, GemmKernel::TensorCoreBf16x3, false);
    let suffix = match out {
        GemvOut::None => (epilogue == Epilogue::Add && EARLY_RESIDUAL.with(|c| c.get())).then_some("_early"),
        GemvOut::Planes(_) => Some("_out"),
        GemvOut::Rope(_) if epilogue == Epilogue::Store => Some("_rope"),
        GemvOut::Rope(_) => return Err(shape(op, "the rope epilogue is the Store GEMV's".into())),
    };
    if !matches!(out, GemvOut::None) && !one_wave(stream, &g)? {
        return Err(shape(op, format!("a flag-polling epilogue needs one wave: {} CTAs exceed the SMs", g.ctas)));
    }
    name.push_str(suffix.unwrap_or(""));
    let func = lib.function(&name)?;
    // Dynamic plus the kernel's static shared memory must stay within the default limit; at
    // exactly 48 KB of dynamic memory the launch already needs the opt-in.
    if g.smem_bytes + B1_STATIC_SMEM_BOUND > DEFAULT_SMEM_LIMIT {
        func.set_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, g.smem_bytes as i32)?;
    }
    let cfg = LaunchConfig {
        grid_dim: (g.ctas, 1, 1),
        block_dim: (g.tiles_per_cta * g.splits * 32, 1, 1),
        shared_mem_bytes: g.smem_bytes as u32,
    };
    let (tiles_per_cta, splits, chunk) = (g.tiles_per_cta as i32, g.splits as i32, g.chunk_groups as i32);
    let norm_flag = i32::from(norm_eps.is_some());
    let norm_eps = norm_eps.unwrap_or(0.0);
    let mut b = Launch::new(stream, func);
    b.arg(&scales).arg(&payload).arg(&planes_ptr).arg(&gsx_ptr).arg(&sq_ptr).arg(&y).arg(&n_i).arg(&k_i);
    b.arg(&tiles_per_cta).arg(&splits).arg(&chunk).arg(&norm_flag).arg(&norm_eps);
    match &out {
        GemvOut::None => {}
        GemvOut::Planes(p) => {
            b.arg(p);
        }
        GemvOut::Rope(r) => {
            b.arg(r);
        }
    }
    // SAFETY: argument order and types match the *_gemv_b1 (and `_early`) entry points (scales, payload, planes,
    // gsx, group_sq, y, n_out, k, tiles_per_cta, splits, chunk_groups, norm, norm_eps, and for the
    // `_out` / `_rope` ones the B1PlanesOut / B1RopeOut block); the weights and y were checked by
    // the caller (payload 16-byte, scales 8-byte aligned), the scratch was sized above (cudarc
    // allocations are 256-byte aligned: cp.async's 16 bytes), a planes output or the rope
    // epilogue's buffers were sized for n_out by the caller, and b1_geometry sized the block and
    // shared memory.
    unsafe { b.launch(cfg) }?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `B1RopeOut` (matmul_gemv_b1.cu) as nvcc lays it out: 8 pointers, then eps and four ints
    /// from byte 64, the end padded to 88.
    #[test]
    fn rope_out_args_match_the_cuda_struct() {
        assert_eq!(std::mem::offset_of!(RopeOutArgs, eps), 64);
        assert_eq!(std::mem::offset_of!(RopeOutArgs, n_kv), 80);
        assert_eq!(std::mem::size_of::<RopeOutArgs>(), 88);
    }

    #[test]
    fn tiles_warps_message_names_the_accepted_range() {
        assert_eq!(TILES_WARPS_EXPECTED, format!("1..={TILES_WARPS}"));
    }
}

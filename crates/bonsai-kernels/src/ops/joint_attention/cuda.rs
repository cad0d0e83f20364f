//! Launchers of joint_attention.cu: the f32 -> bf16 conversion pass and the tensor-core flash
//! kernel, together ([`joint_attention`]) or the flash kernel alone on bf16 inputs
//! ([`joint_attention_bf16`], for a caller that already holds bf16 q, k, v). The scratch buffer
//! is the caller's, so a call can be captured in a CUDA graph (no allocation per call).


use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut, LaunchConfig};

use crate::launch::{Gpu, 
    as_i32, expect_aligned16, expect_at_least, grid_stride_blocks, opt_in_shared_memory, read_ptr,
    shape, write_ptr, LaunchError,
};
use crate::launch_ex::Launch;
use crate::ops::joint_attention::{AttnDims, Inputs};

const OP: &str = "joint_attention";

/// bf16 elements of padding per shared-memory row (JA_ROW_PAD in joint_attention.cu).
pub const ROW_PAD: usize = 8;
/// Warps per CTA for hd 384 / 512 (JA_LARGE_HD_WARPS).
pub const LARGE_HD_WARPS: usize = 4;
/// Keys per streamed tile for hd 384 / 512 (JA_LARGE_HD_BLOCK_K).
pub const LARGE_HD_BLOCK_K: usize = 32;
/// Output dims per CTA for hd 384 / 512 (JA_LARGE_HD_CHUNK): gridDim.z = hd / this.
pub const LARGE_HD_CHUNK: usize = 128;
/// Warps and keys per tile of the compact hd 384 / 512 kernels (JA_COMPACT_WARPS,
/// JA_COMPACT_BLOCK_K): the ones whose CTA fits 99 KB of shared memory.
pub const COMPACT_WARPS: usize = 2;
pub const COMPACT_BLOCK_K: usize = 16;
/// Threads per CTA of the conversion pass (JA_CONVERT_THREADS).
pub const CONVERT_THREADS: usize = 256;
/// Query rows one warp of the hd 384 / 512 kernels owns (the mma M dimension).
const ROWS_PER_WARP: usize = 16;
/// Warps per CTA of the Q-in-registers kernels, hd 64 / 128 (JA_QREG_WARPS,
/// joint_attention_qreg.cu).
pub const QREG_WARPS: usize = 4;
/// Query rows one warp of the Q-in-registers kernels owns (16 x JA_QREG_ROW_BLOCKS).
pub const QREG_ROWS_PER_WARP: usize = 32;
/// Keys per streamed K/V tile of the Q-in-registers kernels (JA_QREG_BLOCK_K).
pub const QREG_BLOCK_K: usize = 64;
/// Keys per online-softmax step of the Q-in-registers kernel at hd 128 (JA_QREG_SOFTMAX_K): each
/// K/V tile is two steps (hd 64 steps over whole tiles).
pub const QREG_SOFTMAX_K: usize = 32;
/// Warpgroups per CTA of the wgmma kernel (JW_WARPGROUPS, joint_attention_wgmma.cu): 64 query
/// rows each.
pub const WGMMA_WARPGROUPS: usize = 2;
/// Keys per K/V tile and per online-softmax step of the wgmma kernel (JW_BLOCK_K).
pub const WGMMA_BLOCK_K: usize = 128;
/// Ring stages of the wgmma kernel (JW_STAGES).
pub const WGMMA_STAGES: usize = 3;
/// Alignment of the wgmma kernel's tiles (JW_ALIGN): the launcher adds it to the shared memory.
pub const WGMMA_ALIGN: usize = 1024;
/// The head dims the tensor-core kernel is instantiated for.
pub const HEAD_DIMS: [usize; 4] = [64, 128, 384, 512];
#[path = "variant.rs"]
mod variant;
pub use variant::{FlashVariant, SmallHeadKernel, WGMMA_HEAD_DIM};

/// u16 (bf16) elements of scratch [`joint_attention`] needs: bf16 copies of q, k and v.
pub fn scratch_len(dims: AttnDims) -> usize {
    3 * dims.heads * dims.seq * dims.head_dim
}

/// Elements of one of q, k, v, out, after checking the dims fit the kernels' index types.
fn tensor_len(dims: AttnDims) -> Result<usize, LaunchError> {
    let AttnDims { heads, seq, head_dim } = dims;
    if heads == 0 || seq == 0 {
        return Err(shape(OP, format!("empty shape {dims:?}")));
    }
    let n = heads
        .checked_mul(seq)
        .and_then(|v| v.checked_mul(head_dim))
        .ok_or_else(|| shape(OP, format!("{dims:?} overflows usize")))?;
    // The kernels index rows with 32-bit seq and 64-bit element offsets; keep every count an i32
    // except the element total.
    as_i32(OP, "seq", seq)?;
    as_i32(OP, "heads", heads)?;
    i64::try_from(n).map_err(|_| shape(OP, format!("{dims:?} overflows i64")))?;
    Ok(n)
}

/// softmax(q k^T / sqrt(hd)) v for f32 q, k, v `[H, seq, hd]` into f32 `out [seq, H·hd]`:
/// converts to bf16 in `scratch` (see [`scratch_len`]), then runs the flash kernel `variant` (None: the one the
/// device takes, [`FlashVariant::for_device`]; verify runs every hd 64 / 128 kernel the device has:
/// [`SmallHeadKernel::available`]; a given variant must be the one for `dims.head_dim`). When the kernel has an f32-q form
/// ([`FlashVariant::f32_q_entry`]) only k and v are converted and the kernel rounds q itself
/// (the same round to nearest even: identical results).
pub fn joint_attention(
    gpu: Gpu<'_>,
    variant: Option<FlashVariant>,
    inputs: Inputs<'_, impl DevicePtr<f32>>,
    scratch: &mut CudaSlice<u16>,
    out: &mut impl DevicePtrMut<f32>,
) -> Result<(), LaunchError> {
    let Inputs { dims, q, k, v } = inputs;
    let variant = variant_or_device(gpu, variant, dims)?;
    let n = check_qkv(&inputs)?;
    expect_at_least(OP, "scratch", scratch.len(), scratch_len(dims))?;
    let Some(f32_q_entry) = variant.f32_q_entry else {
        convert_to_bf16(gpu, n, q, k, v, scratch)?;
        let q16 = scratch.slice(0..n);
        let k16 = scratch.slice(n..2 * n);
        let v16 = scratch.slice(2 * n..3 * n);
        return joint_attention_bf16(gpu, Some(variant), Inputs { dims, q: &q16, k: &k16, v: &v16 }, out);
    };
    expect_at_least(OP, "out", out.len(), n)?;
    let (k_p, _a) = read_ptr(k, gpu.stream);
    let (v_p, _b) = read_ptr(v, gpu.stream);
    let (s_p, _c) = write_ptr(scratch, gpu.stream);
    let bytes = (n * std::mem::size_of::<u16>()) as u64;
    // scratch[0..n] (q's bf16 copy) stays unused; k and v take their usual places.
    let (k16, v16) = (s_p + bytes, s_p + 2 * bytes);
    convert_pass(gpu, n, &[(k_p, k16), (v_p, v16)])?;
    let (q_p, _d) = read_ptr(q, gpu.stream);
    launch_flash(gpu, variant, f32_q_entry, dims, [q_p, k16, v16], out)
}

/// [`joint_attention`] with a scratch buffer allocated (stream-ordered) for this call and freed
/// after it: for callers with no buffer of their own, such as the PyTorch comparison harness
/// (`verify/image_torch`), whose launch functions take only inputs and output.
pub fn joint_attention_alloc(
    gpu: Gpu<'_>,
    inputs: Inputs<'_, impl DevicePtr<f32>>,
    out: &mut impl DevicePtrMut<f32>,
) -> Result<(), LaunchError> {
    FlashVariant::for_device(gpu.stream, inputs.dims.head_dim)?;
    let n = tensor_len(inputs.dims)?;
    // SAFETY: uninitialised device memory of 3n u16; the conversion pass writes every part the
    // flash kernel (the only reader, same gpu.stream) reads: all of it, or k and v's parts when the
    // kernel reads f32 q itself.
    let mut scratch = unsafe { gpu.stream.alloc::<u16>(3 * n) }?;
    joint_attention(gpu, None, inputs, &mut scratch, out)
}

/// The conversion pass alone: bf16 copies of q, k, v (`n` elements each) into `scratch[0..3n]`.
pub fn convert_to_bf16(
    gpu: Gpu<'_>,
    n: usize,
    q: &impl DevicePtr<f32>,
    k: &impl DevicePtr<f32>,
    v: &impl DevicePtr<f32>,
    scratch: &mut CudaSlice<u16>,
) -> Result<(), LaunchError> {
    expect_at_least(CONVERT, "q", q.len(), n)?;
    expect_at_least(CONVERT, "k", k.len(), n)?;
    expect_at_least(CONVERT, "v", v.len(), n)?;
    expect_at_least(CONVERT, "scratch", scratch.len(), 3 * n)?;
    let (q_p, _a) = read_ptr(q, gpu.stream);
    let (k_p, _b) = read_ptr(k, gpu.stream);
    let (v_p, _c) = read_ptr(v, gpu.stream);
    let (s_p, _d) = write_ptr(scratch, gpu.stream);
    let bytes = (n * std::mem::size_of::<u16>()) as u64;
    convert_pass(gpu, n, &[(q_p, s_p), (k_p, s_p + bytes), (v_p, s_p + 2 * bytes)])
}

const CONVERT: &str = "joint_attention_to_bf16";

/// One launch of the conversion pass over 1-3 (f32 source, bf16 destination) pairs of `n`
/// elements each (device addresses; the callers checked the lengths).
fn convert_pass(
    gpu: Gpu<'_>,
    n: usize,
    pairs: &[(u64, u64)],
) -> Result<(), LaunchError> {
    if n % 8 != 0 {
        // 4 floats per load; a multiple of 8 also keeps each bf16 copy 16-byte aligned.
        return Err(shape(CONVERT, format!("{n} elements is not a multiple of 8")));
    }
    let (Some(&first), Some(&last)) = (pairs.first(), pairs.last()) else {
        return Err(shape(CONVERT, "no tensor to convert".into()));
    };
    if pairs.len() > 3 {
        return Err(shape(CONVERT, format!("{} tensors: the pass takes at most 3", pairs.len())));
    }
    for &(src, dst) in pairs {
        expect_aligned16(CONVERT, "source", src)?;
        expect_aligned16(CONVERT, "scratch", dst)?;
    }
    // The kernel's three (src, dst) slots, blockIdx.y choosing one; unused ones repeat the last.
    let slot = |i: usize| pairs.get(i).copied().unwrap_or(last);
    let (s0, s1, s2) = (first, slot(1), slot(2));
    let f = gpu.function(CONVERT)?;
    let quads = (n / 4) as i64;
    let cfg = LaunchConfig {
        grid_dim: (grid_stride_blocks(n / 4, CONVERT_THREADS as u32), pairs.len() as u32, 1),
        block_dim: (CONVERT_THREADS as u32, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut l = Launch::new(gpu, f);
    l.arg(&s0.0).arg(&s1.0).arg(&s2.0).arg(&s0.1).arg(&s1.1).arg(&s2.1).arg(&quads);
    // SAFETY: matches joint_attention_to_bf16(const float*, x3, u16*, x3, long long); every
    // source holds >= n floats and every destination >= n u16 (the callers checked), 16-byte
    // aligned (n / 4 float4 loads); gridDim.y = pairs.len() reads only the slots filled.
    unsafe { l.launch(cfg) }?;
    Ok(())
}

/// The flash kernel alone on bf16 (as u16 bits) q, k, v `[H, seq, hd]`; f32 `out [seq, H·hd]`;
/// `variant` as in [`joint_attention`] (verify and bench run every hd 64 / 128 kernel).
pub fn joint_attention_bf16(
    gpu: Gpu<'_>,
    variant: Option<FlashVariant>,
    inputs: Inputs<'_, impl DevicePtr<u16>>,
    out: &mut impl DevicePtrMut<f32>,
) -> Result<(), LaunchError> {
    let Inputs { dims, q, k, v } = inputs;
    let variant = variant_or_device(gpu, variant, dims)?;
    let n = check_qkv(&inputs)?;
    expect_at_least(OP, "out", out.len(), n)?;
    let (q_p, _a) = read_ptr(q, gpu.stream);
    let (k_p, _b) = read_ptr(k, gpu.stream);
    let (v_p, _c) = read_ptr(v, gpu.stream);
    launch_flash(gpu, variant, variant.entry, dims, [q_p, k_p, v_p], out)
}

/// `variant`, or the one this device takes for `dims.head_dim`.
fn variant_or_device(gpu: Gpu<'_>, variant: Option<FlashVariant>, dims: AttnDims) -> Result<FlashVariant, LaunchError> {
    match variant {
        Some(v) => Ok(v),
        None => FlashVariant::for_device(gpu.stream, dims.head_dim),
    }
}

/// Checks q, k, v hold the H·seq·hd elements of `dims`; returns that count.
fn check_qkv<E>(inputs: &Inputs<'_, impl DevicePtr<E>>) -> Result<usize, LaunchError> {
    let n = tensor_len(inputs.dims)?;
    for (what, t) in [("q", inputs.q), ("k", inputs.k), ("v", inputs.v)] {
        expect_at_least(OP, what, t.len(), n)?;
    }
    Ok(n)
}

/// Launches `entry` (`variant`'s bf16-q entry point or its f32-q one) on device addresses
/// q, k, v holding H·seq·hd elements each (the callers checked the lengths; q is bf16 or f32 as
/// `entry` takes it, k and v bf16) into `out` (checked to hold as many f32).
fn launch_flash(
    gpu: Gpu<'_>,
    variant: FlashVariant,
    entry: &'static str,
    dims: AttnDims,
    [q_p, k_p, v_p]: [u64; 3],
    out: &mut impl DevicePtrMut<f32>,
) -> Result<(), LaunchError> {
    if variant.head_dim != dims.head_dim {
        return Err(shape(
            OP,
            format!("{} is for head_dim {}, not {}", entry, variant.head_dim, dims.head_dim),
        ));
    }
    let cfg = variant.config(dims)?;
    let f = gpu.function(entry)?;
    opt_in_shared_memory(
        OP,
        gpu.stream,
        f,
        variant.shared_bytes(),
        &format!("head_dim {}", dims.head_dim),
    )?;
    // cp.async copies 16-byte pieces of every row (hd is a multiple of 16 bf16 = 32 bytes); f32
    // q is read as float2.
    for (what, p) in [("q", q_p), ("k", k_p), ("v", v_p)] {
        expect_aligned16(OP, what, p)?;
    }
    let (o_p, _d) = write_ptr(out, gpu.stream);
    // float2 stores.
    if o_p % 8 != 0 {
        return Err(shape(OP, "out must start on an 8-byte boundary".into()));
    }
    let (heads, seq) = (as_i32(OP, "heads", dims.heads)?, as_i32(OP, "seq", dims.seq)?);
    let scale_log2 = (std::f64::consts::LOG2_E / (dims.head_dim as f64).sqrt()) as f32;
    let mut l = Launch::new(gpu, f);
    l.arg(&q_p).arg(&k_p).arg(&v_p).arg(&o_p).arg(&heads).arg(&seq).arg(&scale_log2);
    // SAFETY: matches joint_attention_hdXX[_...](const u16* or const float* q, const u16* k, v,
    // float* out, int heads, int seq, float scale_log2); q, k, v hold H·seq·hd elements of the
    // types `entry` takes and out H·seq·hd floats (checked by the callers); the grid covers
    // exactly ceil(seq / block_q) x H x hd / out_chunk CTAs, each bounded by seq.
    unsafe { l.launch(cfg) }?;
    Ok(())
}

#[cfg(test)]
#[path = "cuda_tests.rs"]
mod tests;

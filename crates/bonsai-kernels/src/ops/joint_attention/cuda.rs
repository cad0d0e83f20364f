//! Launchers of joint_attention.cu: the f32 -> bf16 conversion pass and the tensor-core flash
//! kernel, together ([`joint_attention`]) or the flash kernel alone on bf16 inputs
//! ([`joint_attention_bf16`], for a caller that already holds bf16 q, k, v). The scratch buffer
//! is the caller's, so a call can be captured in a CUDA graph (no allocation per call).

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut, LaunchConfig};

use crate::cuda::KernelLibrary;
use crate::launch::{
    as_i32, expect_aligned16, expect_at_least, grid_stride_blocks, opt_in_shared_memory, read_ptr, shape,
    write_ptr, LaunchError,
};
use crate::launch_ex::Launch;
use crate::ops::joint_attention::AttnDims;

const OP: &str = "joint_attention";

/// bf16 elements of padding per shared-memory row (JA_ROW_PAD in joint_attention.cu).
pub const ROW_PAD: usize = 8;
/// Warps per CTA for hd <= 128 (JA_SMALL_HD_WARPS): 16 query rows each.
pub const SMALL_HD_WARPS: usize = 8;
/// Keys per streamed tile for hd <= 128 (JA_SMALL_HD_BLOCK_K).
pub const SMALL_HD_BLOCK_K: usize = 64;
/// Warps per CTA for hd 384 / 512 (JA_LARGE_HD_WARPS).
pub const LARGE_HD_WARPS: usize = 4;
/// Keys per streamed tile for hd 384 / 512 (JA_LARGE_HD_BLOCK_K).
pub const LARGE_HD_BLOCK_K: usize = 32;
/// Output dims per CTA for hd 384 / 512 (JA_LARGE_HD_CHUNK): gridDim.z = hd / this.
pub const LARGE_HD_CHUNK: usize = 128;
/// Threads per CTA of the conversion pass (JA_CONVERT_THREADS).
pub const CONVERT_THREADS: usize = 256;
/// Query rows one warp of the 16-row kernels owns (the mma M dimension).
const ROWS_PER_WARP: usize = 16;
/// Warps per CTA of the wide-warp kernels, hd 64 / 128 (JA_WIDE_WARPS, joint_attention_wide.cu).
pub const WIDE_WARPS: usize = 4;
/// Query rows one warp of the wide-warp kernels owns (16 x JA_WIDE_ROW_BLOCKS).
pub const WIDE_ROWS_PER_WARP: usize = 32;
/// Keys per streamed tile of the wide-warp kernels (JA_WIDE_BLOCK_K).
pub const WIDE_BLOCK_K: usize = 64;
/// Warps per CTA of the Q-in-registers kernels, hd 64 / 128 (JA_QREG_WARPS,
/// joint_attention_qreg.cu).
pub const QREG_WARPS: usize = 4;
/// Query rows one warp of the Q-in-registers kernels owns (16 x JA_QREG_ROW_BLOCKS).
pub const QREG_ROWS_PER_WARP: usize = 32;
/// Keys per streamed K/V tile of the Q-in-registers kernels (JA_QREG_BLOCK_K).
pub const QREG_BLOCK_K: usize = 64;
/// Keys per online-softmax step of the Q-in-registers kernels (JA_QREG_SOFTMAX_K): each K/V
/// tile is two steps.
pub const QREG_SOFTMAX_K: usize = 32;
/// The head dims the tensor-core kernel is instantiated for.
pub const HEAD_DIMS: [usize; 4] = [64, 128, 384, 512];
/// Environment variable choosing the hd 64 / 128 kernel: unset or `qregs` runs the
/// Q-in-registers kernels (the default), `wide` the previous default (32 rows per warp, Q re-read
/// from shared memory every tile), `old` the 16-row ones (kept so one GPU run can time them all;
/// `verify --bench` also times them side by side). Any other value is an error.
pub const KERNEL_ENV: &str = "BONSAI_JOINT_ATTENTION";

/// Which kernel serves hd 64 / 128 (hd 384 / 512 have one kernel each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SmallHeadKernel {
    /// joint_attention_hd{64,128}_q_regs: 4 warps x 32 query rows, Q's fragments in registers,
    /// the online softmax per 32 keys, two CTAs per SM.
    QRegs,
    /// joint_attention_hd{64,128}_wide_warp: 4 warps x 32 query rows, two CTAs per SM.
    WideWarp,
    /// joint_attention_hd{64,128}: 8 warps x 16 query rows, one CTA per SM.
    SixteenRowWarp,
}

impl SmallHeadKernel {
    /// Every choice, the default first.
    pub const ALL: [Self; 3] = [Self::QRegs, Self::WideWarp, Self::SixteenRowWarp];

    /// The choice [`KERNEL_ENV`] asks for (default [`SmallHeadKernel::QRegs`]).
    pub fn from_env() -> Result<Self, LaunchError> {
        match std::env::var(KERNEL_ENV) {
            Err(std::env::VarError::NotPresent) => Self::parse(None),
            Ok(v) => Self::parse(Some(&v)),
            Err(e) => Err(shape(OP, format!("{KERNEL_ENV}: {e}"))),
        }
    }

    /// The choice a [`KERNEL_ENV`] value (None: unset) names.
    pub fn parse(value: Option<&str>) -> Result<Self, LaunchError> {
        match value {
            None | Some("qregs") => Ok(Self::QRegs),
            Some("wide") => Ok(Self::WideWarp),
            Some("old") => Ok(Self::SixteenRowWarp),
            Some(v) => {
                Err(shape(OP, format!("{KERNEL_ENV}={v:?}: expected `qregs`, `wide` or `old`")))
            }
        }
    }
}

/// One instantiation of the flash kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlashVariant {
    pub entry: &'static str,
    pub head_dim: usize,
    pub warps: usize,
    /// Query rows each warp owns (16 or 32).
    pub rows_per_warp: usize,
    /// Keys per K/V tile in shared memory.
    pub block_k: usize,
    /// Keys per online-softmax step (one running-max update and O rescale at most): what the
    /// accuracy bound ([`crate::ops::joint_attention::bf16_check`]) counts rescales by.
    pub softmax_keys: usize,
    /// Output dims one CTA computes.
    pub out_chunk: usize,
}

impl FlashVariant {
    /// The kernel for `head_dim` ([`KERNEL_ENV`] picks among the hd 64 / 128 ones), or a shape
    /// error naming the supported head dims.
    pub fn for_head_dim(head_dim: usize) -> Result<Self, LaunchError> {
        Self::select(head_dim, SmallHeadKernel::from_env()?)
    }

    /// The kernel for `head_dim`, `small` choosing among the hd 64 / 128 ones.
    pub fn select(head_dim: usize, small: SmallHeadKernel) -> Result<Self, LaunchError> {
        let wide = small == SmallHeadKernel::WideWarp;
        let q_regs = small == SmallHeadKernel::QRegs;
        let (entry, warps, rows_per_warp, block_k, out_chunk) = match head_dim {
            64 if q_regs => {
                ("joint_attention_hd64_q_regs", QREG_WARPS, QREG_ROWS_PER_WARP, QREG_BLOCK_K, 64)
            }
            128 if q_regs => (
                "joint_attention_hd128_q_regs",
                QREG_WARPS,
                QREG_ROWS_PER_WARP,
                QREG_BLOCK_K,
                128,
            ),
            64 if wide => {
                ("joint_attention_hd64_wide_warp", WIDE_WARPS, WIDE_ROWS_PER_WARP, WIDE_BLOCK_K, 64)
            }
            128 if wide => (
                "joint_attention_hd128_wide_warp",
                WIDE_WARPS,
                WIDE_ROWS_PER_WARP,
                WIDE_BLOCK_K,
                128,
            ),
            64 => ("joint_attention_hd64", SMALL_HD_WARPS, ROWS_PER_WARP, SMALL_HD_BLOCK_K, 64),
            128 => ("joint_attention_hd128", SMALL_HD_WARPS, ROWS_PER_WARP, SMALL_HD_BLOCK_K, 128),
            384 => (
                "joint_attention_hd384",
                LARGE_HD_WARPS,
                ROWS_PER_WARP,
                LARGE_HD_BLOCK_K,
                LARGE_HD_CHUNK,
            ),
            512 => (
                "joint_attention_hd512",
                LARGE_HD_WARPS,
                ROWS_PER_WARP,
                LARGE_HD_BLOCK_K,
                LARGE_HD_CHUNK,
            ),
            _ => {
                return Err(shape(
                    OP,
                    format!("head_dim {head_dim} has no CUDA kernel (supported: {HEAD_DIMS:?})"),
                ))
            }
        };
        // Every kernel but the Q-in-registers one runs its softmax over whole K/V tiles.
        let softmax_keys = if q_regs && head_dim <= 128 { QREG_SOFTMAX_K } else { block_k };
        Ok(Self { entry, head_dim, warps, rows_per_warp, block_k, softmax_keys, out_chunk })
    }

    pub fn block_q(&self) -> usize {
        self.warps * self.rows_per_warp
    }

    /// Dynamic shared memory: q [block_q][hd + pad], k [2][block_k][hd + pad],
    /// v [2][block_k][out_chunk + pad], all bf16.
    pub fn shared_bytes(&self) -> usize {
        let qk_row = self.head_dim + ROW_PAD;
        let v_row = self.out_chunk + ROW_PAD;
        let elems = self.block_q() * qk_row + 2 * self.block_k * qk_row + 2 * self.block_k * v_row;
        elems * std::mem::size_of::<u16>()
    }

    /// Grid (query tiles, heads, output chunks).
    fn config(&self, dims: AttnDims) -> Result<LaunchConfig, LaunchError> {
        let tiles = u32::try_from(dims.seq.div_ceil(self.block_q()))
            .map_err(|_| shape(OP, format!("seq {} needs too many query tiles", dims.seq)))?;
        let heads =
            u32::try_from(dims.heads).ok().filter(|&h| h <= MAX_GRID_Y).ok_or_else(|| {
                shape(OP, format!("{} heads exceed the grid's {MAX_GRID_Y}", dims.heads))
            })?;
        Ok(LaunchConfig {
            grid_dim: (tiles, heads, (self.head_dim / self.out_chunk) as u32),
            block_dim: ((self.warps * 32) as u32, 1, 1),
            shared_mem_bytes: self.shared_bytes() as u32,
        })
    }
}

/// Largest gridDim.y (and z) CUDA allows.
const MAX_GRID_Y: u32 = 65_535;

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
/// converts q, k, v to bf16 in `scratch` (see [`scratch_len`]), then runs the flash kernel.
#[allow(clippy::too_many_arguments)]
pub fn joint_attention(
    lib: &KernelLibrary,
    stream: &Arc<CudaStream>,
    dims: AttnDims,
    q: &impl DevicePtr<f32>,
    k: &impl DevicePtr<f32>,
    v: &impl DevicePtr<f32>,
    scratch: &mut CudaSlice<u16>,
    out: &mut impl DevicePtrMut<f32>,
) -> Result<(), LaunchError> {
    FlashVariant::for_head_dim(dims.head_dim)?;
    let n = tensor_len(dims)?;
    expect_at_least(OP, "q", q.len(), n)?;
    expect_at_least(OP, "k", k.len(), n)?;
    expect_at_least(OP, "v", v.len(), n)?;
    expect_at_least(OP, "scratch", scratch.len(), scratch_len(dims))?;
    convert_to_bf16(lib, stream, n, q, k, v, scratch)?;
    let q16 = scratch.slice(0..n);
    let k16 = scratch.slice(n..2 * n);
    let v16 = scratch.slice(2 * n..3 * n);
    joint_attention_bf16(lib, stream, dims, &q16, &k16, &v16, out)
}

/// [`joint_attention`] with a scratch buffer allocated (stream-ordered) for this call and freed
/// after it: for callers with no buffer of their own, such as the PyTorch comparison harness
/// (`verify/image_torch`), whose launch functions take only inputs and output.
#[allow(clippy::too_many_arguments)]
pub fn joint_attention_alloc(
    lib: &KernelLibrary,
    stream: &Arc<CudaStream>,
    dims: AttnDims,
    q: &impl DevicePtr<f32>,
    k: &impl DevicePtr<f32>,
    v: &impl DevicePtr<f32>,
    out: &mut impl DevicePtrMut<f32>,
) -> Result<(), LaunchError> {
    FlashVariant::for_head_dim(dims.head_dim)?;
    let n = tensor_len(dims)?;
    // SAFETY: uninitialised device memory of 3n u16; the conversion pass writes all of it before
    // the flash kernel (the only reader) runs on the same stream.
    let mut scratch = unsafe { stream.alloc::<u16>(3 * n) }?;
    joint_attention(lib, stream, dims, q, k, v, &mut scratch, out)
}

/// The conversion pass alone: bf16 copies of q, k, v (`n` elements each) into `scratch[0..3n]`.
pub fn convert_to_bf16(
    lib: &KernelLibrary,
    stream: &Arc<CudaStream>,
    n: usize,
    q: &impl DevicePtr<f32>,
    k: &impl DevicePtr<f32>,
    v: &impl DevicePtr<f32>,
    scratch: &mut CudaSlice<u16>,
) -> Result<(), LaunchError> {
    const CONVERT: &str = "joint_attention_to_bf16";
    if n % 8 != 0 {
        // 4 floats per load; a multiple of 8 also keeps each bf16 copy 16-byte aligned.
        return Err(shape(CONVERT, format!("{n} elements is not a multiple of 8")));
    }
    expect_at_least(CONVERT, "q", q.len(), n)?;
    expect_at_least(CONVERT, "k", k.len(), n)?;
    expect_at_least(CONVERT, "v", v.len(), n)?;
    expect_at_least(CONVERT, "scratch", scratch.len(), 3 * n)?;
    let f = lib.function(CONVERT)?;
    let (q_p, _a) = read_ptr(q, stream);
    let (k_p, _b) = read_ptr(k, stream);
    let (v_p, _c) = read_ptr(v, stream);
    for (what, p) in [("q", q_p), ("k", k_p), ("v", v_p)] {
        expect_aligned16(CONVERT, what, p)?;
    }
    let (s_p, _d) = write_ptr(scratch, stream);
    expect_aligned16(CONVERT, "scratch", s_p)?;
    let bytes = (n * std::mem::size_of::<u16>()) as u64;
    let (q16, k16, v16) = (s_p, s_p + bytes, s_p + 2 * bytes);
    let quads = (n / 4) as i64;
    let cfg = LaunchConfig {
        grid_dim: (grid_stride_blocks(n / 4, CONVERT_THREADS as u32), 3, 1),
        block_dim: (CONVERT_THREADS as u32, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut l = Launch::new(stream, f);
    l.arg(&q_p).arg(&k_p).arg(&v_p).arg(&q16).arg(&k16).arg(&v16).arg(&quads);
    // SAFETY: matches joint_attention_to_bf16(const float*, x3, u16*, x3, long long); q, k, v
    // hold >= n floats (16-byte aligned, n / 4 float4 loads) and scratch >= 3n u16 (checked).
    unsafe { l.launch(cfg) }?;
    Ok(())
}

/// The flash kernel alone on bf16 (as u16 bits) q, k, v `[H, seq, hd]`; f32 `out [seq, H·hd]`.
pub fn joint_attention_bf16(
    lib: &KernelLibrary,
    stream: &Arc<CudaStream>,
    dims: AttnDims,
    q: &impl DevicePtr<u16>,
    k: &impl DevicePtr<u16>,
    v: &impl DevicePtr<u16>,
    out: &mut impl DevicePtrMut<f32>,
) -> Result<(), LaunchError> {
    let variant = FlashVariant::for_head_dim(dims.head_dim)?;
    joint_attention_bf16_with(lib, stream, variant, dims, q, k, v, out)
}

/// [`joint_attention_bf16`] with the kernel chosen by the caller (verify and bench run both
/// hd 64 / 128 kernels); `variant` must be the one for `dims.head_dim`.
#[allow(clippy::too_many_arguments)]
pub fn joint_attention_bf16_with(
    lib: &KernelLibrary,
    stream: &Arc<CudaStream>,
    variant: FlashVariant,
    dims: AttnDims,
    q: &impl DevicePtr<u16>,
    k: &impl DevicePtr<u16>,
    v: &impl DevicePtr<u16>,
    out: &mut impl DevicePtrMut<f32>,
) -> Result<(), LaunchError> {
    if variant.head_dim != dims.head_dim {
        return Err(shape(
            OP,
            format!(
                "{} is for head_dim {}, not {}",
                variant.entry, variant.head_dim, dims.head_dim
            ),
        ));
    }
    let n = tensor_len(dims)?;
    expect_at_least(OP, "q", q.len(), n)?;
    expect_at_least(OP, "k", k.len(), n)?;
    expect_at_least(OP, "v", v.len(), n)?;
    expect_at_least(OP, "out", out.len(), n)?;
    let cfg = variant.config(dims)?;
    let f = lib.function(variant.entry)?;
    opt_in_shared_memory(OP, stream, &f, variant.shared_bytes(), &format!("head_dim {}", dims.head_dim))?;
    let (q_p, _a) = read_ptr(q, stream);
    let (k_p, _b) = read_ptr(k, stream);
    let (v_p, _c) = read_ptr(v, stream);
    // cp.async copies 16-byte pieces of every row (hd is a multiple of 16 bf16 = 32 bytes).
    for (what, p) in [("q", q_p), ("k", k_p), ("v", v_p)] {
        expect_aligned16(OP, what, p)?;
    }
    let (o_p, _d) = write_ptr(out, stream);
    // float2 stores.
    if o_p % 8 != 0 {
        return Err(shape(OP, "out must start on an 8-byte boundary".into()));
    }
    let (heads, seq) = (as_i32(OP, "heads", dims.heads)?, as_i32(OP, "seq", dims.seq)?);
    let scale_log2 = (std::f64::consts::LOG2_E / (dims.head_dim as f64).sqrt()) as f32;
    let mut l = Launch::new(stream, f);
    l.arg(&q_p).arg(&k_p).arg(&v_p).arg(&o_p).arg(&heads).arg(&seq).arg(&scale_log2);
    // SAFETY: matches joint_attention_hdXX(const u16* q, k, v, float* out, int heads, int seq,
    // float scale_log2); q, k, v hold H·seq·hd bf16 and out H·seq·hd floats (checked above); the
    // grid covers exactly ceil(seq / block_q) x H x hd / out_chunk CTAs, each bounded by seq.
    unsafe { l.launch(cfg) }?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Largest opt-in dynamic shared memory per block: A100 (sm_80) and H100/H200 (sm_90).
    const SM80_SHARED_OPTIN: usize = 166_912;
    const SM90_SHARED_OPTIN: usize = 232_448;

    #[test]
    fn every_head_dim_has_a_variant_that_fits_ampere_and_hopper() {
        for hd in HEAD_DIMS {
            let v = FlashVariant::for_head_dim(hd).expect("supported");
            assert_eq!(v.head_dim % v.out_chunk, 0, "hd {hd}: chunks must tile the head");
            assert_eq!(v.out_chunk % 16, 0, "hd {hd}: mma column blocks");
            assert_eq!(v.block_k % 16, 0, "hd {hd}: mma k-steps over keys");
            assert!(v.shared_bytes() <= SM80_SHARED_OPTIN.min(SM90_SHARED_OPTIN), "hd {hd}");
        }
        // The doc's figures (mod.rs): 104,448 bytes at hd 128, 150,528 at hd 512.
        assert_eq!(FlashVariant::for_head_dim(128).map(|v| v.shared_bytes()).ok(), Some(104_448));
        assert_eq!(FlashVariant::for_head_dim(512).map(|v| v.shared_bytes()).ok(), Some(150_528));
    }

    #[test]
    fn every_small_head_kernel_fits_two_ctas_per_hopper_sm() {
        /// Shared memory per SM on sm_90 and what the driver reserves per CTA.
        const SM90_SHARED_PER_SM: usize = 233_472;
        const RESERVED_PER_CTA: usize = 1_024;
        for hd in [64, 128] {
            let variants = SmallHeadKernel::ALL
                .map(|kind| FlashVariant::select(hd, kind).expect("supported"));
            let [q_regs, wide, old] = variants;
            assert!(q_regs.entry != wide.entry && wide.entry != old.entry && q_regs.entry != old.entry);
            // All cover 128 queries per CTA with the same K/V tiles: the same shared layout.
            for v in variants {
                assert_eq!(v.block_q(), 128, "hd {hd} {}", v.entry);
                assert_eq!(v.shared_bytes(), wide.shared_bytes(), "hd {hd} {}", v.entry);
                assert!(2 * (v.shared_bytes() + RESERVED_PER_CTA) <= SM90_SHARED_PER_SM, "hd {hd}");
            }
            // The softmax step the accuracy bound counts rescales by.
            assert_eq!((q_regs.softmax_keys, wide.softmax_keys, old.softmax_keys), (32, 64, 64));
        }
        assert_eq!(SmallHeadKernel::parse(None).ok(), Some(SmallHeadKernel::QRegs));
        assert_eq!(SmallHeadKernel::parse(Some("qregs")).ok(), Some(SmallHeadKernel::QRegs));
        assert_eq!(SmallHeadKernel::parse(Some("wide")).ok(), Some(SmallHeadKernel::WideWarp));
        assert_eq!(SmallHeadKernel::parse(Some("old")).ok(), Some(SmallHeadKernel::SixteenRowWarp));
        assert!(SmallHeadKernel::parse(Some("OLD")).is_err());
        for hd in [384, 512] {
            let variants = SmallHeadKernel::ALL.map(|kind| FlashVariant::select(hd, kind).ok());
            assert!(variants.iter().all(|v| *v == variants[0]), "hd {hd}: one kernel");
            assert_eq!(variants[0].map(|v| v.softmax_keys), Some(LARGE_HD_BLOCK_K));
        }
    }

    #[test]
    fn unsupported_head_dims_and_empty_shapes_are_errors() {
        for hd in [0, 8, 96, 256, 1024] {
            assert!(FlashVariant::for_head_dim(hd).is_err(), "hd {hd}");
        }
        assert!(tensor_len(AttnDims { heads: 0, seq: 4, head_dim: 64 }).is_err());
        assert!(tensor_len(AttnDims { heads: 1, seq: 0, head_dim: 64 }).is_err());
        assert!(tensor_len(AttnDims { heads: 1, seq: 1 << 31, head_dim: 64 }).is_err());
        assert_eq!(scratch_len(AttnDims { heads: 2, seq: 3, head_dim: 64 }), 3 * 2 * 3 * 64);
    }
}

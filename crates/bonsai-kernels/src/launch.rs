//! Shared machinery of the CUDA launchers (`ops/<op>/cuda.rs`): the launch error, device views of
//! quantized weights, raw-pointer plumbing. Every launcher checks lengths, alignment and index
//! ranges on the host before touching the device, so a bad shape is a typed error, never an
//! out-of-bounds kernel.

use std::sync::Arc;

use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, LaunchConfig, SyncOnDrop};

use crate::cuda::{KernelError, KernelLibrary};

pub use crate::ops::{HeadShape, ImageShape, KvCache, QkvRows, Store};

#[path = "ops/argmax/cuda.rs"]
pub mod argmax;
#[path = "ops/attention/cuda.rs"]
pub mod attention;
#[path = "ops/conv3x3/cuda.rs"]
pub mod conv3x3;
#[path = "ops/decode_seqs/cuda.rs"]
pub mod decode_seqs;
#[path = "ops/embed_rows/cuda.rs"]
pub mod embed_rows;
#[path = "ops/gated_delta/cuda.rs"]
pub mod gated_delta;
#[path = "ops/gated_rms_norm/cuda.rs"]
pub mod gated_rms_norm;
#[path = "ops/gemm_f32/cuda.rs"]
pub mod gemm_f32;
#[path = "ops/group_norm/cuda.rs"]
pub mod group_norm;
#[path = "ops/hadamard/cuda.rs"]
pub mod hadamard;
#[path = "ops/im2col/cuda.rs"]
pub mod im2col;
#[path = "ops/joint_attention/cuda.rs"]
pub mod joint_attention;
#[path = "ops/kv_write/cuda.rs"]
pub mod kv_write;
#[path = "ops/matmul_q1/cuda.rs"]
pub mod matmul;
#[path = "ops/matmul_q1/cuda_b1.rs"]
mod matmul_b1;
#[path = "ops/matmul_q1/cuda_f16.rs"]
mod matmul_f16;
#[path = "ops/matmul_q1/cuda_wgmma.rs"]
mod matmul_wgmma;
#[path = "ops/matmul_q1/cuda_small.rs"]
mod matmul_small;
#[path = "ops/position_advance/cuda.rs"]
pub mod position_advance;
#[path = "ops/qk_norm_rope/cuda.rs"]
pub mod qk_norm_rope;
#[path = "ops/rms_norm/cuda.rs"]
pub mod rms_norm;
#[path = "ops/residual_add/cuda.rs"]
pub mod residual_add;
#[path = "ops/silu/cuda.rs"]
pub mod silu;
#[path = "ops/sample_rows/cuda.rs"]
pub mod sample_rows;
#[path = "ops/sample_top_k/cuda.rs"]
pub mod sample_top_k;
#[path = "ops/sigmoid_gate/cuda.rs"]
pub mod sigmoid_gate;
#[path = "ops/softmax/cuda.rs"]
pub mod softmax;
#[path = "ops/ssm_conv/cuda.rs"]
pub mod ssm_conv;
#[path = "ops/swiglu/cuda.rs"]
pub mod swiglu;
#[path = "ops/upsample_nearest2x/cuda.rs"]
pub mod upsample_nearest2x;

/// Where a launcher's kernels run: the loaded library (entry points, launch policy) and the stream
/// they are queued on.
#[derive(Clone, Copy)]
pub struct Gpu<'a> {
    pub lib: &'a KernelLibrary,
    pub stream: &'a Arc<CudaStream>,
}

impl<'a> Gpu<'a> {
    pub fn new(lib: &'a KernelLibrary, stream: &'a Arc<CudaStream>) -> Self {
        Self { lib, stream }
    }

    /// The library's entry point `name`.
    pub fn function(&self, name: &str) -> Result<&'a CudaFunction, KernelError> {
        self.lib.function(name)
    }
}

/// Why a kernel could not be launched.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error(transparent)]
    Library(#[from] KernelError),
    #[error("CUDA launch failed: {0}")]
    Driver(#[from] cudarc::driver::DriverError),
    #[error("{op}: {detail}")]
    Shape { op: &'static str, detail: String },
}

/// Bits per weight of a quantized matrix on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuantBits {
    /// Q1: sign bits, 4 u32 words per 128-weight group.
    One,
    /// Q2: codes c -> (c - 1) d, 8 u32 words per group.
    Two,
}

impl QuantBits {
    pub fn words_per_group(self) -> usize {
        match self {
            QuantBits::One => crate::weights::Q1_WORDS,
            QuantBits::Two => crate::weights::Q2_WORDS,
        }
    }
}

/// A quantized matrix `W[N, K]` in device memory: the host `Q1Matrix` / `Q2Matrix` scales (f16
/// as u16) and their payload permuted into the device layout (`crate::cuda::weights`).
#[derive(Clone, Copy)]
pub struct QWeightsView<'a> {
    pub bits: QuantBits,
    pub n: usize,
    pub k: usize,
    pub scales: &'a CudaSlice<u16>,
    pub payload: &'a CudaSlice<u32>,
    /// Every weight is -d, 0 or +d: always for Q1 (+-d), for Q2 when no code is 3
    /// ([`crate::weights::Q2Matrix::is_ternary`]). The binary GEMV needs it.
    pub ternary: bool,
}

impl QWeightsView<'_> {
    /// Whether the binary GEMV (`*_gemv_b1*`, the decode chain) can serve this matrix: its Q2
    /// arithmetic takes ternary codes only (matmul_gemv_b1.cu, b1_group_sums).
    pub fn binary_gemv_ok(&self) -> bool {
        self.bits == QuantBits::One || self.ternary
    }

    /// [`Self::binary_gemv_ok`] as a launch precondition of the kernels that need it.
    pub fn require_binary_gemv(&self, op: &'static str) -> Result<(), LaunchError> {
        if self.binary_gemv_ok() {
            return Ok(());
        }
        Err(shape(
            op,
            format!(
                "weights {}x{} hold +2d weights (Q2 code 3); the binary GEMV takes ternary codes only (gemv_tc serves them)",
                self.n, self.k
            ),
        ))
    }

    /// Checks the buffers hold exactly `N x K` weights in group-128 layout.
    pub fn validate(&self, op: &'static str) -> Result<(), LaunchError> {
        let group = crate::weights::GROUP;
        if self.k == 0 || self.k % group != 0 || self.n == 0 {
            return Err(shape(op, format!("weights {}x{}: K must be a positive multiple of {group}", self.n, self.k)));
        }
        let groups = self.n * self.k / group;
        expect_len(op, "weight scales", self.scales.len(), groups)?;
        expect_len(op, "weight payload words", self.payload.len(), groups * self.bits.words_per_group())?;
        Ok(())
    }
}

/// An attribute of the stream's device (a negative value, which none we read has, as 0).
pub(crate) fn device_attribute(stream: &Arc<CudaStream>, attr: CUdevice_attribute) -> Result<usize, LaunchError> {
    Ok(stream.context().attribute(attr)?.max(0) as usize)
}

/// The device's SM count (the wave size of a one-CTA-per-SM grid).
pub(crate) fn sm_count(stream: &Arc<CudaStream>) -> Result<usize, LaunchError> {
    device_attribute(stream, CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
}

/// Lets `f` use `bytes` of dynamic shared memory per CTA, or a shape error naming `what` when the
/// device's opt-in limit is lower.
pub(crate) fn opt_in_shared_memory(
    op: &'static str,
    stream: &Arc<CudaStream>,
    f: &CudaFunction,
    bytes: usize,
    what: &str,
) -> Result<(), LaunchError> {
    let limit = device_attribute(stream, CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?;
    if bytes > limit {
        return Err(shape(op, format!("{what} needs {bytes} bytes of shared memory per CTA; this device allows {limit}")));
    }
    set_dynamic_shared_memory(stream, f, bytes)
}

/// Lets `f` use all the dynamic shared memory one CTA may opt in to on this device, and returns
/// those bytes (a CTA that asks for them has its SM to itself).
pub(crate) fn opt_in_all_shared_memory(stream: &Arc<CudaStream>, f: &CudaFunction) -> Result<usize, LaunchError> {
    let limit = device_attribute(stream, CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?;
    set_dynamic_shared_memory(stream, f, limit)?;
    Ok(limit)
}

fn set_dynamic_shared_memory(stream: &Arc<CudaStream>, f: &CudaFunction, bytes: usize) -> Result<(), LaunchError> {
    stream.context().bind_to_thread()?;
    f.set_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes as i32)?;
    Ok(())
}

/// Checks an image op's x `[C, H, W]` and its output (`out_name`, `out_per_input` values per input
/// value) against the buffer lengths (which may be larger), and that the output stays below 2^31
/// elements (the image kernels index with 32-bit ints); returns C·H·W.
pub(crate) fn check_image_op(
    op: &'static str,
    x_len: usize,
    (out_name, out_len): (&str, usize),
    image: ImageShape,
    out_per_input: usize,
) -> Result<usize, LaunchError> {
    let ImageShape { channels, height, width } = image;
    if channels == 0 || height == 0 || width == 0 {
        return Err(shape(op, format!("empty image {channels}x{height}x{width}")));
    }
    let input_len = channels
        .checked_mul(height)
        .and_then(|v| v.checked_mul(width))
        .filter(|v| v.checked_mul(out_per_input).is_some_and(|n| n <= i32::MAX as usize))
        .ok_or_else(|| shape(op, format!("image {channels}x{height}x{width} overflows")))?;
    expect_at_least(op, "x", x_len, input_len)?;
    expect_at_least(op, out_name, out_len, out_per_input * input_len)?;
    Ok(input_len)
}

pub(crate) fn shape(op: &'static str, detail: String) -> LaunchError {
    LaunchError::Shape { op, detail }
}

/// Errors unless `got >= need` (buffers may be larger than one call uses).
pub(crate) fn expect_at_least(op: &'static str, what: &str, got: usize, need: usize) -> Result<(), LaunchError> {
    if got < need {
        return Err(shape(op, format!("{what} holds {got} elements, needs {need}")));
    }
    Ok(())
}

pub(crate) fn expect_len(op: &'static str, what: &str, got: usize, want: usize) -> Result<(), LaunchError> {
    if got != want {
        return Err(shape(op, format!("{what} holds {got} elements, expected {want}")));
    }
    Ok(())
}

/// A dimension as the `int` the kernels take.
pub(crate) fn as_i32(op: &'static str, what: &str, v: usize) -> Result<i32, LaunchError> {
    i32::try_from(v).map_err(|_| shape(op, format!("{what} = {v} exceeds the kernels' 32-bit index range")))
}

/// The paged KV cache's checks of a launch at positions below `max_seq` ([`KvCache`]): both
/// pools whole blocks of `shape_` and of one length, and a block table covering max_seq. The
/// table's entries live on the device, so whether they name blocks of the pools is the caller's
/// contract. Returns max_seq as a kernel int.
pub(crate) fn check_kv_cache(
    op: &'static str,
    shape_: HeadShape,
    max_seq: usize,
    (k_len, v_len): (usize, usize),
    table_len: usize,
) -> Result<i32, LaunchError> {
    if max_seq == 0 {
        return Err(shape(op, "empty cache".into()));
    }
    check_kv_pools(op, shape_, k_len, v_len)?;
    check_kv_table(op, max_seq, table_len)?;
    as_i32(op, "max_seq", max_seq)
}

/// Errors unless the K and V pools hold the same whole number of (at least one) blocks of `shape_`.
pub(crate) fn check_kv_pools(op: &'static str, shape_: HeadShape, k_len: usize, v_len: usize) -> Result<(), LaunchError> {
    let block = crate::ops::kv_block_len(shape_);
    if block == 0 || k_len == 0 || !k_len.is_multiple_of(block) {
        return Err(shape(op, format!("a KV pool of {k_len} values is not whole blocks of {block}")));
    }
    expect_len(op, "v pool", v_len, k_len)
}

/// Errors unless a block table of `table_len` entries covers `max_seq` positions.
pub(crate) fn check_kv_table(op: &'static str, max_seq: usize, table_len: usize) -> Result<(), LaunchError> {
    expect_at_least(op, "block table", table_len, crate::ops::kv_table_len(max_seq))
}

/// Shared-memory figures the launchers' footprint tests check against: the H100/H200's per-SM
/// shared memory (228 KB) and what the driver holds back per CTA on sm_80+.
#[cfg(test)]
pub(crate) mod smem_limits {
    pub const H200_SMEM_PER_SM: usize = 228 * 1024;
    pub const RESERVED_SMEM_PER_CTA: usize = 1024;
}

/// The read pointer of a device buffer; keep the guard alive until after the launch.
pub(crate) fn read_ptr<'a, T>(buf: &'a impl DevicePtr<T>, stream: &'a Arc<CudaStream>) -> (u64, SyncOnDrop<'a>) {
    buf.device_ptr(stream)
}

/// The write pointer of a device buffer; keep the guard alive until after the launch.
pub(crate) fn write_ptr<'a, T>(buf: &'a mut impl DevicePtrMut<T>, stream: &'a Arc<CudaStream>) -> (u64, SyncOnDrop<'a>) {
    buf.device_ptr_mut(stream)
}

/// What the host wrote into a [`DeviceWords`]: its words and what they were checked against.
pub(crate) trait HostWords: PartialEq {
    fn words(&self) -> &[u64];
}

/// A device buffer of u64 words that the host rewrites between launches (the batched decode's
/// tables), copying only when the words change.
pub(crate) struct DeviceWords<H> {
    buf: CudaSlice<u64>,
    /// What the buffer holds now (None before the first upload).
    held: Option<H>,
}

impl<H: HostWords> DeviceWords<H> {
    /// Room for `len` words.
    pub(crate) fn new(stream: &Arc<CudaStream>, len: usize) -> Result<Self, LaunchError> {
        Ok(Self { buf: stream.alloc_zeros::<u64>(len.max(1))?, held: None })
    }

    /// Makes the buffer hold `words`, copying only when they differ from what it holds (queued
    /// on `stream`, ahead of the launches that read it).
    pub(crate) fn update(&mut self, stream: &Arc<CudaStream>, op: &'static str, words: H) -> Result<(), LaunchError> {
        if self.held.as_ref() == Some(&words) {
            return Ok(());
        }
        expect_at_least(op, "table", self.buf.len(), words.words().len())?;
        let mut dst = self.buf.slice_mut(0..words.words().len());
        stream.memcpy_htod(words.words(), &mut dst)?;
        self.held = Some(words);
        Ok(())
    }

    /// The words held, or the error of a launch before the first write.
    pub(crate) fn held(&self, op: &'static str) -> Result<&H, LaunchError> {
        self.held.as_ref().ok_or_else(|| shape(op, "launch before the table was written".into()))
    }

    /// The buffer's device address.
    pub(crate) fn ptr(&self, stream: &Arc<CudaStream>) -> u64 {
        read_ptr(&self.buf, stream).0
    }
}

/// Errors unless `ptr` is 16-byte aligned (kernels that use float4 loads need it).
pub(crate) fn expect_aligned16(op: &'static str, what: &str, ptr: u64) -> Result<(), LaunchError> {
    if ptr % 16 != 0 {
        return Err(shape(op, format!("{what} must start on a 16-byte boundary (a view at a multiple of 4 floats)")));
    }
    Ok(())
}

/// A 1-D launch of `blocks` CTAs of `threads`.
pub(crate) fn grid_1d(blocks: u32, threads: u32) -> LaunchConfig {
    LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 }
}

/// Grid-stride kernels: enough CTAs to fill the GPU several times over, at most one per 256 items.
pub(crate) fn grid_stride_blocks(items: usize, threads: u32) -> u32 {
    const MAX_GRID_STRIDE_BLOCKS: usize = 132 * 16;
    items.div_ceil(threads as usize).clamp(1, MAX_GRID_STRIDE_BLOCKS) as u32
}

#[cfg(test)]
pub(crate) mod tests {
    use crate::cuda::registry::all_sources;

    /// The value of `#define NAME value` in a registered kernel file (an unsigned `u` suffix
    /// allowed).
    pub(crate) fn cu_define(path: &str, name: &str) -> usize {
        let src = all_sources().find(|s| s.path == path).unwrap_or_else(|| panic!("{path} not registered"));
        let prefix = format!("#define {name} ");
        let line = src.text.lines().find(|l| l.starts_with(&prefix)).unwrap_or_else(|| panic!("{name} not in {path}"));
        let value = line[prefix.len()..].trim();
        value.strip_suffix('u').unwrap_or(value).parse().unwrap_or_else(|_| panic!("{name} in {path} is not a number"))
    }

    /// The image launchers (`im2col`: 9 outputs per input, `upsample_nearest2x`: 4) check every
    /// length, emptiness and the 2^31 output bound before any launch.
    #[test]
    fn image_shapes_are_checked_before_any_launch() {
        use super::{check_image_op, ImageShape};
        let check = |op, x, (out_name, out), (c, h, w), per| check_image_op(op, x, (out_name, out), ImageShape::new(c, h, w), per);
        let im2col = |x, cols, chw| check("im2col", x, ("cols", cols), chw, 9);
        assert_eq!(im2col(2 * 3 * 5, 9 * 30, (2, 3, 5)).ok(), Some(30));
        assert!(im2col(30, 9 * 30 - 1, (2, 3, 5)).expect_err("short cols").to_string().contains("im2col: cols"));
        assert!(im2col(29, 270, (2, 3, 5)).is_err());
        assert!(im2col(0, 0, (2, 0, 5)).is_err());
        assert!(im2col(usize::MAX, usize::MAX, (1, 1 << 14, 1 << 14)).is_err(), "9·C·H·W beyond 2^31");
        assert!(im2col(usize::MAX, usize::MAX, (96, 1024, 1024)).is_ok(), "the largest VAE conv input");
        let upsample = |x, y, chw| check("upsample_nearest2x", x, ("y", y), chw, 4);
        assert_eq!(upsample(3 * 5 * 7, 4 * 105, (3, 5, 7)).ok(), Some(105));
        assert!(upsample(105, 4 * 105 - 1, (3, 5, 7)).expect_err("short y").to_string().contains("upsample_nearest2x: y"));
        assert!(upsample(104, 420, (3, 5, 7)).is_err());
        assert!(upsample(0, 0, (0, 5, 7)).expect_err("empty").to_string().contains("empty image"));
        assert!(upsample(usize::MAX, usize::MAX, (1 << 40, 1 << 40, 2)).is_err());
        assert!(upsample(usize::MAX, usize::MAX, (1, 1 << 14, 1 << 15)).is_err(), "4·C·H·W beyond 2^31");
        assert!(upsample(usize::MAX, usize::MAX, (1, 1 << 14, (1 << 15) - 1)).is_ok());
    }

    #[test]
    fn launcher_constants_match_the_kernels() {
        let matmul = "ops/matmul_q1/matmul_gemv.cu";
        assert_eq!(cu_define(matmul, "GEMV_MAX_TOKENS"), super::matmul::GEMV_MAX_TOKENS);
        assert_eq!(cu_define(matmul, "GROUP_SIZE"), crate::weights::GROUP);
        let f16 = "ops/matmul_q1/matmul_gemm_f16.cu";
        assert_eq!(cu_define(f16, "QG_TILE_TOKENS"), super::matmul::QG_TILE_TOKENS);
        assert_eq!(cu_define(f16, "QG_WARP_ROWS"), super::matmul::QG_WARP_ROWS);
        assert_eq!(cu_define(f16, "QG_STAGES"), super::matmul::QG_STAGES);
        assert_eq!(cu_define(f16, "QG_PREP_THREADS"), super::matmul::QG_PREP_THREADS as usize);
        assert_eq!(cu_define(f16, "QG_WARPS_M") * cu_define(f16, "QG_WARP_TOKENS"), super::matmul::QG_TILE_TOKENS);
        let attention = "ops/attention/attention.cu";
        assert_eq!(cu_define(attention, "ATT_SPLIT_KEYS"), super::attention::SPLIT_KEYS);
        assert_eq!(cu_define(attention, "ATT_DECODE_SPLIT_KEYS"), super::attention::DECODE_SPLIT_KEYS);
        assert_eq!(cu_define(attention, "ATT_ROWS"), super::attention::ROWS_PER_CTA);
        assert_eq!(cu_define(attention, "ATT_MAX_HD"), super::attention::MAX_HEAD_DIM);
        let decode = "ops/attention/attention_decode.cu";
        assert_eq!(cu_define(decode, "ATT_DEC_MAX_SPLITS"), super::attention::DECODE_MAX_SPLITS);
        assert_eq!(cu_define(decode, "ATT_DEC_WARPS"), super::attention::DECODE_WARPS);
        assert_eq!(cu_define(decode, "ATT_DEC_HEADS_WARPS"), super::attention::DECODE_HEADS_WARPS);
        let joint = "ops/joint_attention/joint_attention.cu";
        use super::joint_attention as ja;
        assert_eq!(cu_define(joint, "JA_ROW_PAD"), ja::ROW_PAD);
        assert_eq!(cu_define(joint, "JA_LARGE_HD_WARPS"), ja::LARGE_HD_WARPS);
        assert_eq!(cu_define(joint, "JA_LARGE_HD_BLOCK_K"), ja::LARGE_HD_BLOCK_K);
        assert_eq!(cu_define(joint, "JA_LARGE_HD_CHUNK"), ja::LARGE_HD_CHUNK);
        assert_eq!(cu_define(joint, "JA_COMPACT_WARPS"), ja::COMPACT_WARPS);
        assert_eq!(cu_define(joint, "JA_COMPACT_BLOCK_K"), ja::COMPACT_BLOCK_K);
        assert_eq!(cu_define(joint, "JA_CONVERT_THREADS"), ja::CONVERT_THREADS);
        let q_regs = "ops/joint_attention/joint_attention_qreg.cu";
        assert_eq!(cu_define(q_regs, "JA_QREG_WARPS"), ja::QREG_WARPS);
        assert_eq!(cu_define(q_regs, "JA_QREG_ROW_BLOCKS") * 16, ja::QREG_ROWS_PER_WARP);
        assert_eq!(cu_define(q_regs, "JA_QREG_BLOCK_K"), ja::QREG_BLOCK_K);
        assert_eq!(cu_define(q_regs, "JA_QREG_SOFTMAX_K"), ja::QREG_SOFTMAX_K);
        let jw = "ops/joint_attention/joint_attention_wgmma.cu";
        assert_eq!(cu_define(jw, "JW_WARPGROUPS"), ja::WGMMA_WARPGROUPS);
        assert_eq!(cu_define(jw, "JW_BLOCK_K"), ja::WGMMA_BLOCK_K);
        assert_eq!(cu_define(jw, "JW_STAGES"), ja::WGMMA_STAGES);
        assert_eq!(cu_define(jw, "JW_ALIGN"), ja::WGMMA_ALIGN);
        assert_eq!(cu_define(jw, "JW_HD"), ja::WGMMA_HEAD_DIM);
        let tile = "ops/gemm_f32/tile_3xtf32.cu";
        assert_eq!(cu_define(tile, "TF32X3_TILE_M"), super::gemm_f32::TILE_M);
        assert_eq!(cu_define(tile, "TF32X3_TILE_N"), super::gemm_f32::TILE_N);
        assert_eq!(cu_define(tile, "TF32X3_TILE_K"), super::gemm_f32::TILE_K);
        assert_eq!(cu_define(tile, "TF32X3_STAGES"), super::gemm_f32::STAGES);
        assert_eq!(cu_define(tile, "TF32X3_THREADS"), super::gemm_f32::THREADS as usize);
        assert_eq!(cu_define(tile, "TF32X3_FOLD_STEPS"), super::gemm_f32::FOLD_STEPS);
        let gemm = "ops/gemm_f32/gemm_f32.cu";
        assert_eq!(cu_define(gemm, "GEMM_F32_COLUMN_THREADS"), super::gemm_f32::COLUMN_THREADS);
        assert_eq!(cu_define(gemm, "GEMM_F32_COLUMN_MAX_M"), super::gemm_f32::ROWS_PATH_MAX_M);
        let (warp, warps) = (super::gemm_f32::SMALL_N_WARP, super::gemm_f32::SMALL_N_WARPS);
        assert_eq!((cu_define(gemm, "GEMM_F32_SMALL_N_WARP_M"), cu_define(gemm, "GEMM_F32_SMALL_N_WARP_N")), warp);
        assert_eq!((cu_define(gemm, "GEMM_F32_SMALL_N_WARPS_M"), cu_define(gemm, "GEMM_F32_SMALL_N_WARPS_N")), warps);
        assert_eq!(cu_define("ops/conv3x3/conv3x3.cu", "CONV3X3_B_ROW_PAD"), super::conv3x3::B_ROW_PAD);
        let sample = "ops/sample_top_k/sample_top_k.cu";
        assert_eq!(cu_define(sample, "SAMPLE_MAX_TOP_K"), crate::ops::sample_top_k::MAX_DEVICE_TOP_K);
        assert_eq!(cu_define(sample, "SAMPLE_BLOCKS"), super::sample_top_k::BLOCKS);
        assert_eq!(cu_define(sample, "SAMPLE_SLICE_MAX"), super::sample_top_k::SLICE_MAX);
        assert_eq!(cu_define("ops/sample_rows/sample_rows.cu", "SAMPLE_ROWS_SETTING_WORDS"), crate::ops::sample_rows::SETTING_WORDS);
        assert_eq!(cu_define("cuda/prelude.cuh", "KV_BLOCK"), crate::ops::KV_BLOCK);
        assert_eq!(cu_define("ops/decode_seqs/decode_seqs.cu", "DECODE_SEQ_WORDS"), super::decode_seqs::SEQ_WORDS);
    }

    /// The paged cache's launch checks: whole blocks of one length in both pools, a table
    /// covering max_seq, a non-empty cache.
    #[test]
    fn paged_cache_checks() {
        use super::{check_kv_cache, HeadShape};
        let shape = HeadShape { n_q: 4, n_kv: 2, head_dim: 8 };
        let block = crate::ops::kv_block_len(shape);
        let check = |max_seq, k, v, table| check_kv_cache("test", shape, max_seq, (k, v), table);
        assert_eq!(check(130, 3 * block, 3 * block, 3).ok(), Some(130));
        assert_eq!(check(128, block, block, 2).ok(), Some(128), "the table covers max_seq, the pool may be smaller");
        assert!(check(130, 3 * block, 3 * block, 2).expect_err("short table").to_string().contains("block table"));
        assert!(check(64, 3 * block - 1, 3 * block - 1, 1).expect_err("partial block").to_string().contains("whole blocks"));
        assert!(check(64, 3 * block, 2 * block, 1).expect_err("pools differ").to_string().contains("v pool"));
        assert!(check(64, 0, 0, 1).is_err(), "an empty pool");
        assert!(check(0, block, block, 1).expect_err("no positions").to_string().contains("empty cache"));
    }
}

//! The backend interface the Qwen3 model is written against, once, for every device.
//!
//! A backend owns all memory the forward pass touches: activation buffers, uploaded weights,
//! token ids, the KV cache and the decode position. The model only holds handles, so on CUDA
//! everything stays on the device and one captured graph can replay every decode step:
//!
//! * weights are uploaded once ([`Backend::upload_matrix`]) in the kernels' layout;
//! * the position of the next token lives in a backend [`Backend::Position`]; position-dependent
//!   ops (RoPE, KV write, attention) read it there and [`Backend::advance_position`] moves it,
//!   so no per-token host scalar reaches an op;
//! * the decode step reads its input id from a backend [`Backend::Tokens`] buffer, which
//!   [`Backend::argmax`] can fill directly (greedy decoding without a logits download).
//!
//! Buffers are allocated with a capacity; an op with `m` rows uses the first `m` rows.

pub mod cpu;
pub mod cuda;
pub mod memory_plan;

use bonsai_kernels::ops::sample_top_k::SampleParams;
use bonsai_kernels::ops::{HeadShape, OpError, Store};
use bonsai_kernels::rope::RopeTable;
use bonsai_kernels::QMatrix;

pub use cpu::CpuBackend;
pub use cuda::CudaBackend;
pub use memory_plan::MemoryPlan;

/// Why a backend call failed.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error(transparent)]
    Op(#[from] OpError),
    #[error("{what}: needs {need} elements but the buffer holds {have}")]
    Capacity { what: &'static str, need: usize, have: usize },
    #[error("backend: {0}")]
    Device(String),
    #[error("{device}: the model needs {need} bytes of GPU memory ({plan}, plus a safety margin) but {free} are free; lower --ctx or use --cpu")]
    OutOfMemory { device: String, need: usize, free: usize, plan: MemoryPlan },
    #[error("{op} cannot run while a CUDA graph is being captured")]
    NotCapturable { op: &'static str },
}

/// Buffers, memory movement, and the op set of one Qwen3 forward pass.
///
/// Shapes follow `bonsai_kernels::ops`: activations are token-major `[m, len]` f32, a qkv row is
/// `[q | k | v]`, one layer's cache is `[n_kv][max_seq][head_dim]` f16.
pub trait Backend {
    /// f32 activations (and norm weights).
    type Buffer;
    /// A quantized weight matrix in kernel layout.
    type Matrix;
    /// u32 token ids.
    type Tokens;
    /// One layer's K and V cache.
    type KvCache;
    /// The position of the first token of the next forward call.
    type Position;
    /// The RoPE cos/sin table.
    type Rope;
    /// A recorded sequence of ops that can be replayed (a CUDA graph).
    type Graph;
    /// The sampler's generator state and scratch, where [`Backend::sample`] runs.
    type SamplerState;
    /// Per-sequence scratch of a fused [`Backend::layer_tail`] (the CUDA decode chain's planes
    /// and barrier counters; nothing on the CPU).
    type TailScratch;

    /// One line for users, e.g. "cpu (8 threads, avx2)".
    fn describe(&self) -> String;

    /// Checks that `plan` fits before anything is allocated (the CPU trusts the host allocator).
    fn reserve(&self, plan: &MemoryPlan) -> Result<(), BackendError> {
        let _ = plan;
        Ok(())
    }
    /// Waits for every queued op (for timing).
    fn synchronize(&self) -> Result<(), BackendError> {
        Ok(())
    }
    /// Whether [`Backend::capture`] records graphs (false on the CPU, or with `graphs=off`).
    fn graphs_enabled(&self) -> bool {
        false
    }
    /// Records every op `record` issues into a graph instead of running it. Ops that cannot be
    /// recorded (host writes, allocations) fail with [`BackendError::NotCapturable`].
    fn capture<E: From<BackendError>>(&self, record: &mut dyn FnMut() -> Result<(), E>) -> Result<Self::Graph, E>;
    /// Runs a recorded graph once; it moves `pos` on by `advanced_by` tokens on the device, which
    /// the backend's host-side bookkeeping is told here.
    fn replay(&self, graph: &Self::Graph, pos: &mut Self::Position, advanced_by: usize) -> Result<(), BackendError>;
    /// Copy bandwidth of the device memory in bytes/s (read + write counted), the median of
    /// several large copies: the ceiling decode speed is compared against.
    fn measure_copy_bandwidth(&self) -> Result<f64, BackendError>;
    /// Device memory in use, in bytes, and the device total (None on the CPU).
    fn memory_in_use(&self) -> Result<Option<(usize, usize)>, BackendError> {
        Ok(None)
    }
    /// Device bytes this backend has allocated so far (None on the CPU).
    fn allocated_bytes(&self) -> Option<usize> {
        None
    }

    fn alloc(&self, len: usize) -> Result<Self::Buffer, BackendError>;
    fn upload_f32(&self, data: &[f32]) -> Result<Self::Buffer, BackendError>;
    /// Copies `out.len()` values starting at element `offset` of `buf` to the host.
    fn download(&self, buf: &Self::Buffer, offset: usize, out: &mut [f32]) -> Result<(), BackendError>;
    fn upload_matrix(&self, matrix: &QMatrix) -> Result<Self::Matrix, BackendError>;
    fn upload_rope(&self, table: &RopeTable) -> Result<Self::Rope, BackendError>;
    fn alloc_tokens(&self, capacity: usize) -> Result<Self::Tokens, BackendError>;
    fn write_tokens(&self, dst: &mut Self::Tokens, ids: &[u32]) -> Result<(), BackendError>;
    fn read_tokens(&self, src: &Self::Tokens, out: &mut [u32]) -> Result<(), BackendError>;
    /// How many decode steps the host may have queued while it waits for the oldest one's token:
    /// 1 where every op has finished when its call returns (the CPU); 2 where launches return at
    /// once (CUDA), so that the device runs step k + 1 while the host takes step k's token.
    fn decode_queue_depth(&self) -> usize {
        1
    }
    /// Queues a copy of `src[0]` into mailbox `slot` (< [`Self::decode_queue_depth`]) behind the
    /// work queued so far, for [`Self::take_token`]. Nothing to do where ops are synchronous.
    fn post_token(&self, src: &Self::Tokens, slot: usize) -> Result<(), BackendError> {
        let _ = (src, slot);
        Ok(())
    }
    /// The id [`Self::post_token`] put into `slot`, once its copy is done (where ops are
    /// synchronous: `src[0]` now).
    fn take_token(&self, src: &Self::Tokens, slot: usize) -> Result<u32, BackendError> {
        let _ = slot;
        let mut id = [0u32];
        self.read_tokens(src, &mut id)?;
        Ok(id[0])
    }
    fn alloc_kv_cache(&self, shape: HeadShape, max_seq: usize) -> Result<Self::KvCache, BackendError>;
    fn new_position(&self) -> Result<Self::Position, BackendError>;
    /// Sets the position (start of a sequence, or a rewind to reuse a cached prefix).
    fn set_position(&self, pos: &mut Self::Position, value: usize) -> Result<(), BackendError>;
    /// Moves the position on by `by` tokens (on CUDA: a device-side increment in the graph).
    fn advance_position(&self, pos: &mut Self::Position, by: usize) -> Result<(), BackendError>;

    /// `out[i] = table row tokens[i]`, i < m.
    fn embed(&self, table: &Self::Matrix, tokens: &Self::Tokens, m: usize, out: &mut Self::Buffer)
        -> Result<(), BackendError>;
    /// RMSNorm of `rows` rows of length `n`.
    fn rms_norm(
        &self,
        x: &Self::Buffer,
        rows: usize,
        n: usize,
        weight: &Self::Buffer,
        eps: f32,
        out: &mut Self::Buffer,
    ) -> Result<(), BackendError>;
    /// `y[m, N] (=|+=) x[m, K] · W[N, K]^T`.
    fn matmul(&self, w: &Self::Matrix, x: &Self::Buffer, m: usize, y: &mut Self::Buffer, store: Store)
        -> Result<(), BackendError>;
    /// `xn = rms_norm(x)` (rows of `n`) then `y (=|+=) xn · W^T`. A backend may fuse the two, and
    /// then `xn` is scratch it need not write.
    #[allow(clippy::too_many_arguments)]
    fn rms_norm_matmul(
        &self,
        x: &Self::Buffer,
        m: usize,
        n: usize,
        norm_w: &Self::Buffer,
        eps: f32,
        xn: &mut Self::Buffer,
        w: &Self::Matrix,
        y: &mut Self::Buffer,
        store: Store,
    ) -> Result<(), BackendError> {
        self.rms_norm(x, m, n, norm_w, eps, xn)?;
        self.matmul(w, xn, m, y, store)
    }
    /// `xn = rms_norm(x)` then [`Backend::gate_up_swiglu`] of it (fusable like
    /// [`Backend::rms_norm_matmul`]).
    #[allow(clippy::too_many_arguments)]
    fn rms_norm_gate_up_swiglu(
        &self,
        x: &Self::Buffer,
        m: usize,
        n: usize,
        norm_w: &Self::Buffer,
        eps: f32,
        xn: &mut Self::Buffer,
        w: &Self::Matrix,
        out: &mut Self::Buffer,
    ) -> Result<(), BackendError> {
        self.rms_norm(x, m, n, norm_w, eps, xn)?;
        self.gate_up_swiglu(w, xn, m, out)
    }
    /// `out[m, F] = silu(x·Wg^T) * (x·Wu^T)`, W = [gate rows | up rows].
    fn gate_up_swiglu(&self, w: &Self::Matrix, x: &Self::Buffer, m: usize, out: &mut Self::Buffer)
        -> Result<(), BackendError>;
    /// Per-head RMSNorm then NeoX RoPE of the q and k heads of m qkv rows, token i at pos + i.
    #[allow(clippy::too_many_arguments)]
    fn qk_norm_rope(
        &self,
        qkv: &mut Self::Buffer,
        m: usize,
        shape: HeadShape,
        q_norm: &Self::Buffer,
        k_norm: &Self::Buffer,
        eps: f32,
        rope: &Self::Rope,
        pos: &Self::Position,
    ) -> Result<(), BackendError>;
    /// Writes the k and v heads of m qkv rows into the cache at pos + i.
    fn kv_write(&self, qkv: &Self::Buffer, m: usize, shape: HeadShape, pos: &Self::Position, cache: &mut Self::KvCache)
        -> Result<(), BackendError>;
    /// [`Backend::qk_norm_rope`] then [`Backend::kv_write`]; a backend may fuse them (one launch).
    #[allow(clippy::too_many_arguments)]
    fn qk_norm_rope_kv_write(
        &self,
        qkv: &mut Self::Buffer,
        m: usize,
        shape: HeadShape,
        q_norm: &Self::Buffer,
        k_norm: &Self::Buffer,
        eps: f32,
        rope: &Self::Rope,
        pos: &Self::Position,
        cache: &mut Self::KvCache,
    ) -> Result<(), BackendError> {
        self.qk_norm_rope(qkv, m, shape, q_norm, k_norm, eps, rope, pos)?;
        self.kv_write(qkv, m, shape, pos, cache)
    }
    /// Causal GQA attention of m query rows (token i at pos + i) over cache positions 0..=pos+i.
    #[allow(clippy::too_many_arguments)]
    fn attention(
        &self,
        qkv: &Self::Buffer,
        m: usize,
        shape: HeadShape,
        pos: &Self::Position,
        cache: &Self::KvCache,
        out: &mut Self::Buffer,
    ) -> Result<(), BackendError>;
    /// Scratch for [`Backend::layer_tail`] of a model with `hidden` wide rows and `ffn` features.
    fn alloc_tail_scratch(&self, hidden: usize, ffn: usize, shape: HeadShape) -> Result<Self::TailScratch, BackendError>;
    /// A forward call's first ops: `x = embed(tokens)`, then the first layer's
    /// `qkv = rmsnorm(x)·Wqkv`. A backend may fuse them (CUDA, one token: x and its planes in one
    /// launch) and may also run that layer's [`Backend::qk_norm_rope_kv_write`] (CUDA: in the qkv
    /// projection's epilogue, as [`Backend::layer_tail`] does for the next layer): it returns
    /// whether it did.
    fn first_qkv(&self, t: FirstQkv<'_, Self>) -> Result<bool, BackendError>
    where
        Self: Sized,
    {
        first_qkv_ops(self, t)
    }
    /// One layer after [`Backend::qk_norm_rope_kv_write`]: attention, `x += attn·Wo`,
    /// `x += swiglu(rmsnorm(x)·Wgate|up)·Wdown`, then what `next` names: the next layer's
    /// `qkv = rmsnorm(x)·Wqkv`, or a one-token forward's logits. A backend may fuse it (CUDA, one
    /// token: fewer quantize launches), and may also run the next layer's
    /// [`Backend::qk_norm_rope_kv_write`] (CUDA: in the qkv projection's epilogue): it returns
    /// whether it did, so the caller skips that call.
    fn layer_tail(&self, t: LayerTail<'_, Self>) -> Result<bool, BackendError>
    where
        Self: Sized,
    {
        layer_tail_ops(self, t)
    }
    /// Copies rows `src_row .. src_row + rows` (each `row_len` long) of `src` to the start of `dst`.
    fn copy_rows(&self, src: &Self::Buffer, src_row: usize, rows: usize, row_len: usize, dst: &mut Self::Buffer)
        -> Result<(), BackendError>;
    /// Index of the largest of the first `n` values (ties -> lowest) into `out[0]`.
    fn argmax(&self, logits: &Self::Buffer, n: usize, out: &mut Self::Tokens) -> Result<(), BackendError>;

    /// A sampler state (generator seeded with 0 until [`Backend::set_sampler_rng`]).
    fn new_sampler_state(&self) -> Result<Self::SamplerState, BackendError>;
    /// Loads the xoshiro256** state (`bonsai_kernels::ops::sample_top_k::Xoshiro256::state`).
    fn set_sampler_rng(&self, sampler: &mut Self::SamplerState, rng: [u64; 4]) -> Result<(), BackendError>;
    /// The generator state now (after the draws so far).
    fn sampler_rng(&self, sampler: &Self::SamplerState) -> Result<[u64; 4], BackendError>;
    /// Draws one id from the first `n` logits (`bonsai_kernels::ops::sample_top_k`, top-k in
    /// 1..=MAX_DEVICE_TOP_K) into `out[0]`, or `u32::MAX` when no logit is > -inf; advances the
    /// generator by one draw.
    fn sample(
        &self,
        logits: &Self::Buffer,
        n: usize,
        params: &SampleParams,
        sampler: &mut Self::SamplerState,
        out: &mut Self::Tokens,
    ) -> Result<(), BackendError>;
}

/// [`Backend::layer_tail`] op by op (its definition, and every backend's unfused path); leaves
/// the next layer's qk_norm_rope_kv_write to the caller (returns false).
pub fn layer_tail_ops<B: Backend>(b: &B, t: LayerTail<'_, B>) -> Result<bool, BackendError> {
    let LayerTail { m, shape, hidden, eps, pos, kv, attn_output, ffn_norm, gate_up, down, next, rope: _, bufs } = t;
    let TailBuffers { qkv, attn, x, xn, ffn, scratch: _ } = bufs;
    b.attention(qkv, m, shape, pos, kv, attn)?;
    b.matmul(attn_output, attn, m, x, Store::Add)?;
    b.rms_norm_gate_up_swiglu(x, m, hidden, ffn_norm, eps, xn, gate_up, ffn)?;
    b.matmul(down, ffn, m, x, Store::Add)?;
    match next {
        TailNext::Layer(n) => b.rms_norm_matmul(x, m, hidden, n.attn_norm, eps, xn, n.qkv, qkv, Store::Overwrite)?,
        TailNext::Head(h) => head_ops(b, h, hidden, eps, x, xn)?,
        TailNext::Nothing => {}
    }
    Ok(false)
}

/// [`Backend::first_qkv`] op by op (its definition, and every backend's unfused path); leaves the
/// layer's qk_norm_rope_kv_write to the caller (returns false).
pub fn first_qkv_ops<B: Backend>(b: &B, t: FirstQkv<'_, B>) -> Result<bool, BackendError> {
    let FirstQkv { m, hidden, eps, token_embd, tokens, layer, x, xn, qkv, .. } = t;
    b.embed(token_embd, tokens, m, x)?;
    b.rms_norm_matmul(x, m, hidden, layer.attn_norm, eps, xn, layer.qkv, qkv, Store::Overwrite)?;
    Ok(false)
}

/// [`TailNext::Head`] op by op: `logits = rmsnorm(x; output_norm)·head` of the one row in `x`.
pub fn head_ops<B: Backend>(b: &B, h: FinalHead<'_, B>, hidden: usize, eps: f32, x: &B::Buffer, xn: &mut B::Buffer) -> Result<(), BackendError> {
    b.rms_norm_matmul(x, 1, hidden, h.output_norm, eps, xn, h.matrix, h.logits, Store::Overwrite)
}

/// What [`Backend::layer_tail`] computes after its layer.
pub enum TailNext<'a, B: Backend> {
    /// The next layer's qkv projection.
    Layer(NextLayer<'a, B>),
    /// After the last layer of a one-token forward: the logits.
    Head(FinalHead<'a, B>),
    /// After the last layer of a batch: nothing (the caller picks its rows' logits).
    Nothing,
}

/// The final norm and LM head of a one-token forward, for [`TailNext::Head`].
pub struct FinalHead<'a, B: Backend> {
    pub output_norm: &'a B::Buffer,
    pub matrix: &'a B::Matrix,
    pub logits: &'a mut B::Buffer,
}

/// The embedding and the first layer's qkv projection for [`Backend::first_qkv`].
pub struct FirstQkv<'a, B: Backend> {
    pub m: usize,
    pub shape: HeadShape,
    pub hidden: usize,
    pub eps: f32,
    pub pos: &'a B::Position,
    pub rope: &'a B::Rope,
    pub token_embd: &'a B::Matrix,
    pub tokens: &'a B::Tokens,
    pub layer: NextLayer<'a, B>,
    /// The residual stream (written: the embedded rows).
    pub x: &'a mut B::Buffer,
    pub xn: &'a mut B::Buffer,
    pub qkv: &'a mut B::Buffer,
    pub scratch: &'a mut B::TailScratch,
}

/// The next layer, for a [`Backend::layer_tail`] that starts on it: its qkv projection's weights,
/// and what its qk_norm_rope_kv_write needs.
pub struct NextLayer<'a, B: Backend> {
    pub attn_norm: &'a B::Buffer,
    pub qkv: &'a B::Matrix,
    pub q_norm: &'a B::Buffer,
    pub k_norm: &'a B::Buffer,
    pub kv: &'a mut B::KvCache,
}

/// One layer's weights and shapes for [`Backend::layer_tail`].
pub struct LayerTail<'a, B: Backend> {
    pub m: usize,
    pub shape: HeadShape,
    pub hidden: usize,
    pub eps: f32,
    pub pos: &'a B::Position,
    pub kv: &'a B::KvCache,
    pub attn_output: &'a B::Matrix,
    pub ffn_norm: &'a B::Buffer,
    pub gate_up: &'a B::Matrix,
    pub down: &'a B::Matrix,
    /// What follows the layer.
    pub next: TailNext<'a, B>,
    /// The RoPE table (for the next layer's qk_norm_rope_kv_write).
    pub rope: &'a B::Rope,
    pub bufs: TailBuffers<'a, B>,
}

/// The activation buffers [`Backend::layer_tail`] reads and writes.
pub struct TailBuffers<'a, B: Backend> {
    /// This layer's qkv rows (read), then the next layer's (written when `next` is given).
    pub qkv: &'a mut B::Buffer,
    pub attn: &'a mut B::Buffer,
    /// The residual stream.
    pub x: &'a mut B::Buffer,
    pub xn: &'a mut B::Buffer,
    pub ffn: &'a mut B::Buffer,
    pub scratch: &'a mut B::TailScratch,
}

/// Bytes copied per bandwidth sample: far beyond any CPU cache (and the H200's 60 MB L2).
pub const BANDWIDTH_COPY_BYTES: usize = 1 << 30;
/// Samples per bandwidth measurement (the median is reported).
pub const BANDWIDTH_SAMPLES: usize = 5;

/// The median of `samples` (sorted in place); 0 for none.
pub fn median(samples: &mut [f64]) -> f64 {
    samples.sort_by(f64::total_cmp);
    match samples.len() {
        0 => 0.0,
        n if n % 2 == 1 => samples[n / 2],
        n => 0.5 * (samples[n / 2 - 1] + samples[n / 2]),
    }
}

/// Host memcpy bandwidth (read + write counted), the median of [`BANDWIDTH_SAMPLES`] copies of
/// a sixteenth of [`BANDWIDTH_COPY_BYTES`] (64 MiB: beyond any CPU cache, and modest memory
/// for a CPU-only bench).
fn host_copy_bandwidth() -> Result<f64, BackendError> {
    let len = BANDWIDTH_COPY_BYTES / 16 / std::mem::size_of::<u64>();
    let src: Vec<u64> = (0..len as u64).collect();
    let mut dst = vec![0u64; len];
    let mut rates = Vec::with_capacity(BANDWIDTH_SAMPLES);
    for _ in 0..BANDWIDTH_SAMPLES {
        let start = std::time::Instant::now();
        dst.copy_from_slice(&src);
        let secs = start.elapsed().as_secs_f64().max(1e-9);
        std::hint::black_box(&dst);
        rates.push(2.0 * (len * 8) as f64 / secs);
    }
    Ok(median(&mut rates))
}

//! The backend interface models are written against, once, for every device: buffers, the
//! primitive ops, and plans.
//!
//! A model emits what it computes as a [`Program`] (crate::program); a backend compiles it into
//! its own [`Backend::Plan`] and runs that. The primitive ops are each op's meaning
//! ([`crate::program::run_op`] calls them); how a plan groups them into launches, and whether it
//! records a graph, is the backend's own business.
//!
//! A backend owns all memory the forward pass touches: activation buffers, uploaded weights,
//! token ids, the KV cache and the decode position. The model only holds handles, so on CUDA
//! everything stays on the device and one captured graph can replay every decode step:
//!
//! * weights are uploaded once ([`Backend::upload_matrix`]) in the kernels' layout;
//! * the KV cache is paged: each attention layer has one pool of blocks ([`Backend::KvPool`])
//!   shared by a state's sequences, and each sequence a block table ([`Backend::BlockTable`])
//!   naming its blocks, which the host fills as the sequence grows;
//! * the position of each sequence's next token lives in a backend [`Backend::Position`];
//!   position-dependent ops (RoPE, KV write, attention) read it there and
//!   [`Backend::advance_position`] moves it, so no per-token host scalar reaches an op;
//! * a decode step reads its input ids from a backend [`Backend::Tokens`] buffer, which
//!   [`Backend::argmax`] and [`Backend::sample`] fill directly (no logits download).
//!
//! Buffers are allocated with a capacity; an op with `m` rows uses the first `m` rows.

pub mod cpu;
pub mod cuda;
pub mod memory_plan;

use bonsai_kernels::ops::sample_rows::SeqPick;
use bonsai_kernels::ops::sample_top_k::SampleParams;
use bonsai_kernels::ops::{HeadShape, OpError, Store};
use bonsai_kernels::rope::RopeTable;
use bonsai_kernels::QMatrix;

pub use cpu::CpuBackend;
pub use cuda::CudaBackend;
pub use memory_plan::MemoryPlan;

use bonsai_kernels::ops::gated_delta::DeltaShape;

use crate::program::{DeltaGates, HadamardOp, Program, RunEnv, SeqRows, Weights};

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

/// Buffers, memory movement, primitive ops, and plans.
///
/// Shapes follow `bonsai_kernels::ops`: activations are token-major `[m, len]` f32, a qkv row is
/// `[q | k | v]`, one layer's KV pool is `[blocks][n_kv][KV_BLOCK][head_dim]` f16 for K and for V
/// (`bonsai_kernels::ops::KvCache`).
pub trait Backend: Sized {
    /// f32 activations (and norm weights).
    type Buffer;
    /// A quantized weight matrix in kernel layout.
    type Matrix;
    /// u32 token ids.
    type Tokens;
    /// One attention layer's K and V pools of cache blocks, shared by a state's sequences.
    type KvPool;
    /// One sequence's block table: the pool block of each KV_BLOCK positions (the same blocks in
    /// every layer's pool), where the device reads it.
    type BlockTable;
    /// The position of a sequence's next token.
    type Position;
    /// The RoPE cos/sin table.
    type Rope;
    /// The sampler's generator state and scratch, where [`Backend::sample`] runs.
    type SamplerState;
    /// Each sequence's own pick setting and generator, where [`Backend::pick_rows`] runs.
    type SeqPicks;
    /// A compiled [`Program`]: what [`Backend::run`] executes.
    type Plan;

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
    /// The memory bandwidth decode speed is compared against, bytes/s, measured as
    /// [`Backend::bandwidth_method`] says: on a GPU the median of several large device copies
    /// (read + write counted); on the CPU the all-thread streaming read bandwidth.
    fn measure_copy_bandwidth(&self) -> Result<f64, BackendError>;
    /// What [`Backend::measure_copy_bandwidth`] measures, in words (bench prints it).
    fn bandwidth_method(&self) -> String {
        "copy bandwidth (read + write)".to_string()
    }
    /// Device memory in use, in bytes, and the device total (None on the CPU).
    fn memory_in_use(&self) -> Result<Option<(usize, usize)>, BackendError> {
        Ok(None)
    }
    /// Device bytes this backend has allocated so far (None on the CPU).
    fn allocated_bytes(&self) -> Option<usize> {
        None
    }

    fn alloc(&self, len: usize) -> Result<Self::Buffer, BackendError>;
    /// Sets every value of `buf` to 0 (ordered with the backend's other work).
    fn zero(&self, buf: &mut Self::Buffer) -> Result<(), BackendError>;
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
    /// Queues a copy of `src[..n]` into mailbox `slot` (< [`Self::decode_queue_depth`]) behind the
    /// work queued so far, for [`Self::take_tokens`]. Nothing to do where ops are synchronous.
    fn post_tokens(&self, src: &Self::Tokens, n: usize, slot: usize) -> Result<(), BackendError> {
        let _ = (src, n, slot);
        Ok(())
    }
    /// The ids [`Self::post_tokens`] put into `slot` (`out.len()` of them), once their copy is
    /// done (where ops are synchronous: `src[..out.len()]` now).
    fn take_tokens(&self, src: &Self::Tokens, slot: usize, out: &mut [u32]) -> Result<(), BackendError> {
        let _ = slot;
        self.read_tokens(src, out)
    }
    /// K and V pools of `blocks` blocks of `shape` (contents undefined until written).
    fn alloc_kv_pool(&self, shape: HeadShape, blocks: usize) -> Result<Self::KvPool, BackendError>;
    /// A block table for a sequence of up to `max_seq` positions in pools of `shape` (every entry
    /// 0 until written).
    fn alloc_block_table(&self, shape: HeadShape, max_seq: usize) -> Result<Self::BlockTable, BackendError>;
    /// Sets entries `first..first + ids.len()` of `table`, ordered before the work queued after.
    fn write_block_table(&self, table: &mut Self::BlockTable, first: usize, ids: &[u32]) -> Result<(), BackendError>;
    /// Copies block `src` of `pool` onto block `dst` (every kv head, K and V): a shared block
    /// made private before a sequence writes into it.
    fn copy_kv_block(&self, pool: &mut Self::KvPool, shape: HeadShape, src: u32, dst: u32) -> Result<(), BackendError>;
    fn new_position(&self) -> Result<Self::Position, BackendError>;
    /// Sets the position (start of a sequence, or a rewind to reuse a cached prefix).
    fn set_position(&self, pos: &mut Self::Position, value: usize) -> Result<(), BackendError>;

    /// A sampler state (generator seeded with 0 until [`Backend::set_sampler_rng`]).
    fn new_sampler_state(&self) -> Result<Self::SamplerState, BackendError>;
    /// Loads the xoshiro256** state (`bonsai_kernels::ops::sample_top_k::Xoshiro256::state`).
    fn set_sampler_rng(&self, sampler: &mut Self::SamplerState, rng: [u64; 4]) -> Result<(), BackendError>;
    /// The generator state now (after the draws so far).
    fn sampler_rng(&self, sampler: &Self::SamplerState) -> Result<[u64; 4], BackendError>;

    /// Per-sequence pick settings for `sequences` sequences: every one greedy, its generator
    /// seeded with 0, until [`Backend::set_seq_pick`].
    fn new_seq_picks(&self, sequences: usize) -> Result<Self::SeqPicks, BackendError>;
    /// Sets how sequence `seq` picks and its generator state (`Xoshiro256::state`), ordered
    /// before the work queued after it. A sampled pick's top-k must be in 1..=MAX_DEVICE_TOP_K
    /// wherever the backend is a GPU.
    fn set_seq_pick(&self, picks: &mut Self::SeqPicks, seq: usize, pick: SeqPick, rng: [u64; 4]) -> Result<(), BackendError>;
    /// Sequence `seq`'s generator state now (after the draws so far; waits for them).
    fn seq_pick_rng(&self, picks: &Self::SeqPicks, seq: usize) -> Result<[u64; 4], BackendError>;

    /// Compiles `program` over `weights` into a plan (fusion, kernel choices, scratch). A plan
    /// runs on the state it was first run with (a graph records its buffers' addresses).
    fn compile(&self, program: Program, weights: &Weights<Self>) -> Result<Self::Plan, BackendError>;
    /// Runs one step of `plan`.
    fn run(&self, plan: &mut Self::Plan, env: &mut RunEnv<'_, Self>) -> Result<(), BackendError>;
    /// What `plan` runs, for users (`bonsai bench -v`): its launches, kernel choices and graphs.
    fn describe_plan(&self, plan: &Self::Plan) -> String;
    /// Whether `plan` may only run with the sequences of its first run (a recorded graph holds
    /// their buffers); otherwise it runs any sequences with its program's rows.
    fn plan_binds_sequences(&self, plan: &Self::Plan) -> bool;

    // The primitive ops: what each [`crate::program::Op`] means.

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
    /// `out[m, F] = silu(x·Wg^T) * (x·Wu^T)`, W = [gate rows | up rows].
    fn gate_up_swiglu(&self, w: &Self::Matrix, x: &Self::Buffer, m: usize, out: &mut Self::Buffer)
        -> Result<(), BackendError>;
    /// Per-head RMSNorm then NeoX RoPE of the q and k heads of one sequence's qkv rows, row i at
    /// pos + i.
    #[allow(clippy::too_many_arguments)]
    fn qk_norm_rope(
        &self,
        qkv: &mut Self::Buffer,
        rows: SeqRows,
        shape: HeadShape,
        q_norm: &Self::Buffer,
        k_norm: &Self::Buffer,
        eps: f32,
        rope: &Self::Rope,
        pos: &Self::Position,
    ) -> Result<(), BackendError>;
    /// Writes the k and v heads of one sequence's qkv rows into `pool` at pos + i, in the blocks
    /// its `table` names.
    #[allow(clippy::too_many_arguments)]
    fn kv_write(
        &self,
        qkv: &Self::Buffer,
        rows: SeqRows,
        shape: HeadShape,
        pos: &Self::Position,
        pool: &mut Self::KvPool,
        table: &Self::BlockTable,
    ) -> Result<(), BackendError>;
    /// Causal GQA attention of one sequence's query rows (row i at pos + i) over its cached
    /// positions 0..=pos+i (in `pool`, the blocks its `table` names), into the same rows of `out`.
    #[allow(clippy::too_many_arguments)]
    fn attention(
        &self,
        qkv: &Self::Buffer,
        rows: SeqRows,
        shape: HeadShape,
        pos: &Self::Position,
        pool: &Self::KvPool,
        table: &Self::BlockTable,
        out: &mut Self::Buffer,
    ) -> Result<(), BackendError>;
    /// Copies row `src_row` of `src` to row `dst_row` of `dst` (rows `row_len` long).
    fn copy_rows(&self, src: &Self::Buffer, src_row: usize, dst_row: usize, row_len: usize, dst: &mut Self::Buffer)
        -> Result<(), BackendError>;
    /// Moves the position on by `by` tokens (on CUDA: a device-side increment).
    fn advance_position(&self, pos: &mut Self::Position, by: usize) -> Result<(), BackendError>;
    /// Index of the largest of the `n` values of logits row `row` (ties -> lowest) into
    /// `out[row]`.
    fn argmax(&self, logits: &Self::Buffer, row: usize, n: usize, out: &mut Self::Tokens) -> Result<(), BackendError>;
    /// Draws one id from the `n` logits of row `row` (`bonsai_kernels::ops::sample_top_k`, top-k
    /// in 1..=MAX_DEVICE_TOP_K) into `out[row]`, or `u32::MAX` when no logit is > -inf; advances
    /// the generator by one draw.
    #[allow(clippy::too_many_arguments)]
    fn sample(
        &self,
        logits: &Self::Buffer,
        row: usize,
        n: usize,
        params: &SampleParams,
        sampler: &mut Self::SamplerState,
        out: &mut Self::Tokens,
    ) -> Result<(), BackendError>;

    /// `out[r]` = the pick of logits row r (`n` values) with the setting and generator of
    /// sequence `row_seqs[r]`, for r < `rows` (`bonsai_kernels::ops::sample_rows`: the argmax, or
    /// a draw advancing that generator once; `u32::MAX` when the row has no candidate). Each
    /// sequence appears at most once in `row_seqs[..rows]`.
    fn pick_rows(
        &self,
        logits: &Self::Buffer,
        rows: usize,
        n: usize,
        row_seqs: &Self::Tokens,
        picks: &mut Self::SeqPicks,
        out: &mut Self::Tokens,
    ) -> Result<(), BackendError>;

    // The hybrid (qwen35) model's primitive ops.

    /// The Hadamard transform of [`crate::program::Op::Hadamard`] over `rows` rows of `p.width`.
    fn hadamard(&self, x: &Self::Buffer, rows: usize, p: HadamardOp<'_, Self>, out: &mut Self::Buffer) -> Result<(), BackendError>;
    /// `y[m, n] = x[m, k] · W[n, k]^T` with f32 weights.
    fn matmul_f32(&self, w: &Self::Buffer, n: usize, k: usize, x: &Self::Buffer, m: usize, y: &mut Self::Buffer)
        -> Result<(), BackendError>;
    /// `ys[i][m, n] = x[m, k] · ws[i][n, k]^T` for both i: two [`Backend::matmul_f32`]s of one
    /// input, which a backend may run as one launch (the same results).
    fn matmul_f32_pair(
        &self,
        ws: [&Self::Buffer; 2],
        n: usize,
        k: usize,
        x: &Self::Buffer,
        m: usize,
        ys: [&mut Self::Buffer; 2],
    ) -> Result<(), BackendError> {
        let [y0, y1] = ys;
        self.matmul_f32(ws[0], n, k, x, m, y0)?;
        self.matmul_f32(ws[1], n, k, x, m, y1)
    }
    /// Causal depthwise conv + SiLU of one sequence's rows (`channels` wide) through its conv
    /// `state` (`bonsai_kernels::ops::ssm_conv`), into the same rows of `out`.
    #[allow(clippy::too_many_arguments)]
    fn ssm_conv(
        &self,
        x: &Self::Buffer,
        rows: SeqRows,
        channels: usize,
        weight: &Self::Buffer,
        state: &mut Self::Buffer,
        out: &mut Self::Buffer,
    ) -> Result<(), BackendError>;
    /// The Gated DeltaNet core of one sequence's rows over its `state`
    /// (`bonsai_kernels::ops::gated_delta`), into the same rows of `out`.
    #[allow(clippy::too_many_arguments)]
    fn gated_delta(
        &self,
        shape: DeltaShape,
        conv: &Self::Buffer,
        alpha: &Self::Buffer,
        beta: &Self::Buffer,
        rows: SeqRows,
        gates: DeltaGates<'_, Self>,
        state: &mut Self::Buffer,
        out: &mut Self::Buffer,
    ) -> Result<(), BackendError>;
    /// `out_h = RMSNorm(x_h; weight, eps) ⊙ silu(z_h)` per head of `weight.len()` over `rows`
    /// rows of `width`.
    #[allow(clippy::too_many_arguments)]
    fn gated_rms_norm(
        &self,
        x: &Self::Buffer,
        z: &Self::Buffer,
        rows: usize,
        width: usize,
        weight: &Self::Buffer,
        eps: f32,
        out: &mut Self::Buffer,
    ) -> Result<(), BackendError>;
    /// `out = x ⊙ sigmoid(g)` over `rows` rows of `width`.
    fn sigmoid_gate(&self, x: &Self::Buffer, g: &Self::Buffer, rows: usize, width: usize, out: &mut Self::Buffer)
        -> Result<(), BackendError>;
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

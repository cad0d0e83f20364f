//! The CUDA backend: device buffers on one non-default stream, weights uploaded once, an f16 KV
//! cache, and the position and token ids in device memory so one decode step can be captured as
//! a CUDA graph and replayed for every token. Its plans (`fuse.rs` decides the launches,
//! `plan.rs` runs them and owns the graphs) are built from each model's program.
//!
//! Everything runs on the stream of [`GpuContext`]; cudarc's per-buffer event tracking is turned
//! off (it would record events inside a graph capture, and one stream needs no cross-stream
//! synchronisation). Host reads (`download`, `read_tokens`) synchronise the stream and so also
//! surface any asynchronous kernel error.
//!
//! Position: a device `u32` plus a host mirror. The mirror bounds prefill attention (the split
//! count, and so the scratch size, follows the real sequence length); a captured decode step
//! instead bounds attention by the cache length, since its position changes on every replay.

mod fuse;
mod ops;
mod plan;

pub use fuse::{Caps, Planes, Step};
pub use plan::CudaPlan;

use bonsai_kernels::launch::Gpu;
use std::cell::{Cell, RefCell};
use std::sync::Arc;

use bonsai_kernels::cuda::{upload, GpuContext, GpuQMatrix, KernelError, KernelLibrary, LoadOptions};
use bonsai_kernels::launch::{self, QWeightsView, QuantBits};
use bonsai_kernels::ops::sample_rows::{SeqPick, SETTING_WORDS};
use bonsai_kernels::ops::sample_top_k::{SampleParams, Xoshiro256};
use bonsai_kernels::ops::{kv_block_len, kv_table_len, HeadShape, KvCache, QkvRows};
use bonsai_kernels::rope::RopeTable;
use bonsai_kernels::config::Config;
use bonsai_kernels::QMatrix;
use cudarc::driver::{CudaEvent, CudaSlice, CudaStream, PinnedHostSlice};

use super::{Backend, BackendError, MemoryPlan};
use crate::program::{DeltaGates, HadamardOp, Program, RunEnv, SeqRows, Weights};
use bonsai_kernels::ops::gated_delta::DeltaShape;
use bonsai_kernels::ops::gemm_f32::{GemmDims, Inputs as GemmInputs};

/// Decode steps the host keeps queued ([`Backend::decode_queue_depth`]): the device runs step
/// k + 1 while the host takes step k's token (at 1 the device would idle for that round trip).
const DECODE_QUEUE_DEPTH: usize = 2;

/// One attention layer's pools: `[blocks][n_kv][KV_BLOCK][head_dim]` f16 (as raw bits) for K
/// and for V.
pub struct CudaKvPool {
    pub k: CudaSlice<u16>,
    pub v: CudaSlice<u16>,
}

/// A sequence's block table on the device, and the positions it may address.
pub struct CudaBlockTable {
    pub ids: CudaSlice<u32>,
    pub max_seq: usize,
}

impl CudaKvPool {
    /// The paged cache of the sequence whose table is `table`, to read.
    pub fn cache<'a>(&'a self, table: &'a CudaBlockTable) -> KvCache<&'a CudaSlice<u16>, &'a CudaSlice<u32>> {
        KvCache { k: &self.k, v: &self.v, table: &table.ids, max_seq: table.max_seq }
    }

    /// The same, to write.
    pub fn cache_mut<'a>(&'a mut self, table: &'a CudaBlockTable) -> KvCache<&'a mut CudaSlice<u16>, &'a CudaSlice<u32>> {
        KvCache { k: &mut self.k, v: &mut self.v, table: &table.ids, max_seq: table.max_seq }
    }
}

/// The next token's position: on the device for the kernels, mirrored on the host for bounds.
pub struct CudaPosition {
    pub device: CudaSlice<u32>,
    host: usize,
}

/// The RoPE table on the device: `[max_pos][rot_dims / 2]` f32 each.
pub struct CudaRope {
    pub cos: CudaSlice<f32>,
    pub sin: CudaSlice<f32>,
    pub max_pos: usize,
    /// The leading dims of each head the table rotates: the head size, or fewer (partial RoPE,
    /// qwen35), where the rest of each head is normalised only.
    pub rot_dims: usize,
}

/// The device sampler: the xoshiro256** state and the kernel's candidate scratch.
pub struct CudaSamplerState {
    rng: CudaSlice<u64>,
    candidates: CudaSlice<u64>,
}

/// Each sequence's pick setting and generator on the device (`sample_rows`'s layout), and the
/// kernel's per-row scratch (one row per sequence at most).
pub struct CudaSeqPicks {
    settings: CudaSlice<u32>,
    rng: CudaSlice<u64>,
    candidates: CudaSlice<u64>,
    /// Per-row counters, zero between launches.
    done: CudaSlice<u32>,
    sequences: usize,
}

/// Called with (bytes uploaded so far, bytes planned) as weights reach the device.
pub type UploadProgress = Box<dyn FnMut(usize, usize)>;

/// Runs every op through `bonsai_kernels::launch` on one GPU.
pub struct CudaBackend {
    gpu: GpuContext,
    lib: KernelLibrary,
    stream: Arc<CudaStream>,
    use_graphs: bool,
    /// True between `begin_capture` and `end_capture`: ops then pick graph-safe bounds.
    capturing: Cell<bool>,
    allocated_bytes: Cell<usize>,
    uploaded_bytes: Cell<usize>,
    planned_weight_bytes: Cell<usize>,
    /// Q2 matrices uploaded with a code 3 (+2d): gemv_tc serves them (`describe` says so).
    plus_two_matrices: Cell<usize>,
    progress: RefCell<Option<UploadProgress>>,
    /// Attention scratch for one token over a whole cache; sized by the first KV cache and never
    /// reallocated after, because captured graphs hold its address.
    decode_scratch: RefCell<Option<CudaSlice<f32>>>,
    /// Attention scratch for prefill chunks (grown on demand, never used inside a graph).
    prefill_scratch: RefCell<Option<CudaSlice<f32>>>,
    /// The chunked Gated DeltaNet's scratch for prefill calls (grown on demand, never used inside
    /// a graph: decode calls run the row kernel, which needs none).
    delta_scratch: RefCell<Option<CudaSlice<f32>>>,
    /// The attention kernel's per-(token group, kv head) counters, zeroed once and left zeroed by
    /// every launch; sized by the first KV cache for a whole cache of tokens and never
    /// reallocated (captured graphs hold its address).
    attention_counters: RefCell<Option<CudaSlice<u32>>>,
    /// Page-locked slots the queued decode steps' token ids are copied into (one per queued step),
    /// each with an event recorded after its copy (cudarc's own per-slice event is off with event
    /// tracking), allocated on first use.
    token_mailboxes: RefCell<Vec<(PinnedHostSlice<u32>, CudaEvent)>>,
}

/// Wraps a device-side failure of `what` into a one-line backend error.
pub(crate) fn device_err<E: std::fmt::Display>(what: &'static str) -> impl Fn(E) -> BackendError {
    move |e| BackendError::Device(format!("{what}: {e}"))
}

/// Whether opening a backend failed because there is no driver or no device (the CLI then
/// announces the CPU), as opposed to a broken installation (an error).
pub fn is_absent_device(error: &KernelError) -> bool {
    matches!(error, KernelError::NoDriver | KernelError::NoDevice { .. })
}

impl CudaBackend {
    /// The library and stream every launch goes to.
    pub(crate) fn launcher(&self) -> Gpu<'_> {
        Gpu::new(&self.lib, &self.stream)
    }

    /// Opens the configuration's device and loads the kernel library.
    pub fn open(config: &Config) -> Result<Self, KernelError> {
        let gpu = GpuContext::on_device(config.device)?;
        let lib = gpu.load_library(config, &LoadOptions::from_config(config))?;
        Ok(Self::with(gpu, lib, config))
    }

    /// A backend over an opened context and its loaded library, under `config`.
    pub fn with(gpu: GpuContext, lib: KernelLibrary, config: &Config) -> Self {
        // SAFETY: every buffer of this backend is created after this call and used only on the
        // one stream below, so no cross-stream synchronisation is needed; events recorded per
        // buffer would otherwise land inside graph captures.
        unsafe { gpu.context().disable_event_tracking() };
        let stream = gpu.stream().clone();
        let use_graphs = config.graphs;
        Self {
            gpu,
            lib,
            stream,
            use_graphs,
            capturing: Cell::new(false),
            allocated_bytes: Cell::new(0),
            uploaded_bytes: Cell::new(0),
            planned_weight_bytes: Cell::new(0),
            plus_two_matrices: Cell::new(0),
            progress: RefCell::new(None),
            decode_scratch: RefCell::new(None),
            prefill_scratch: RefCell::new(None),
            delta_scratch: RefCell::new(None),
            attention_counters: RefCell::new(None),
            token_mailboxes: RefCell::new(Vec::new()),
        }
    }

    /// Reports weight upload progress to `f` (for a progress bar).
    pub fn on_upload(&self, f: UploadProgress) {
        *self.progress.borrow_mut() = Some(f);
    }

    pub fn library(&self) -> &KernelLibrary {
        &self.lib
    }

    fn count_alloc<T>(&self, len: usize) {
        self.allocated_bytes.set(self.allocated_bytes.get() + len * std::mem::size_of::<T>());
    }

    fn count_upload(&self, bytes: usize) {
        let done = self.uploaded_bytes.get() + bytes;
        self.uploaded_bytes.set(done);
        if let Some(f) = self.progress.borrow_mut().as_mut() {
            f(done, self.planned_weight_bytes.get().max(done));
        }
    }

    fn not_while_capturing(&self, op: &'static str) -> Result<(), BackendError> {
        if self.capturing.get() {
            return Err(BackendError::NotCapturable { op });
        }
        Ok(())
    }

    fn zeros<T: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits>(
        &self,
        what: &'static str,
        len: usize,
    ) -> Result<CudaSlice<T>, BackendError> {
        self.not_while_capturing(what)?;
        let buf = self.stream.alloc_zeros::<T>(len.max(1)).map_err(device_err(what))?;
        self.count_alloc::<T>(len.max(1));
        Ok(buf)
    }

    fn upload_slice<T: cudarc::driver::DeviceRepr>(&self, what: &'static str, data: &[T]) -> Result<CudaSlice<T>, BackendError> {
        self.not_while_capturing(what)?;
        let buf = self.stream.clone_htod(data).map_err(device_err(what))?;
        self.count_alloc::<T>(data.len());
        Ok(buf)
    }

    /// Makes sure `slot` holds at least `len` floats (allocating outside captures only).
    fn ensure_scratch(&self, slot: &RefCell<Option<CudaSlice<f32>>>, len: usize) -> Result<(), BackendError> {
        let have = slot.borrow().as_ref().map_or(0, |s| s.len());
        if have < len {
            self.not_while_capturing("growing a scratch buffer")?;
            *slot.borrow_mut() = Some(self.zeros::<f32>("allocating a scratch buffer", len)?);
        }
        Ok(())
    }
}

/// The kernels' view of a device matrix.
pub(crate) fn view(m: &GpuQMatrix) -> QWeightsView<'_> {
    match m {
        GpuQMatrix::Q1(m) => {
            QWeightsView { bits: QuantBits::One, n: m.n, k: m.k, scales: &m.scales, payload: &m.bits, ternary: true }
        }
        GpuQMatrix::Q2(m) => {
            QWeightsView { bits: QuantBits::Two, n: m.n, k: m.k, scales: &m.scales, payload: &m.codes, ternary: m.ternary }
        }
    }
}

impl Backend for CudaBackend {
    type Buffer = CudaSlice<f32>;
    type Matrix = GpuQMatrix;
    type Tokens = CudaSlice<u32>;
    type KvPool = CudaKvPool;
    type BlockTable = CudaBlockTable;
    type Position = CudaPosition;
    type Rope = CudaRope;
    type SamplerState = CudaSamplerState;
    type SeqPicks = CudaSeqPicks;
    type Plan = CudaPlan;

    fn describe(&self) -> String {
        let info = self.gpu.info();
        let graphs = if self.use_graphs { "" } else { ", graphs off" };
        let plus_two = match self.plus_two_matrices.get() {
            0 => String::new(),
            n => format!(", {n} Q2 matrices with +2d weights on gemv_tc (no binary GEMV)"),
        };
        format!(
            "cuda: {} (sm_{}, {} SMs), kernels from {}{graphs}{plus_two}",
            info.name,
            info.arch,
            info.sm_count,
            self.lib.report().tier
        )
    }

    fn reserve(&self, plan: &MemoryPlan) -> Result<(), BackendError> {
        let (free, _total) = self.gpu.context().mem_get_info().map_err(device_err("reading free GPU memory"))?;
        plan.check_fits(&self.gpu.info().name, free)?;
        self.planned_weight_bytes.set(plan.weights_bytes);
        Ok(())
    }

    fn synchronize(&self) -> Result<(), BackendError> {
        self.stream.synchronize().map_err(device_err("synchronizing the stream"))?;
        // Errors cudarc could only record (in drops: frees, event waits) surface here.
        self.gpu.context().check_err().map_err(device_err("an earlier asynchronous CUDA call"))
    }

    fn compile(&self, program: Program, weights: &Weights<Self>) -> Result<CudaPlan, BackendError> {
        plan::compile(self, program, weights)
    }

    fn run(&self, plan: &mut CudaPlan, env: &mut RunEnv<'_, Self>) -> Result<(), BackendError> {
        plan::run(self, plan, env)
    }

    fn describe_plan(&self, plan: &CudaPlan) -> String {
        plan::describe(plan)
    }

    fn plan_binds_sequences(&self, plan: &CudaPlan) -> bool {
        plan.binds_sequences()
    }

    fn measure_copy_bandwidth(&self) -> Result<f64, BackendError> {
        ops::copy_bandwidth(self)
    }

    fn memory_in_use(&self) -> Result<Option<(usize, usize)>, BackendError> {
        let (free, total) = self.gpu.context().mem_get_info().map_err(device_err("reading GPU memory"))?;
        Ok(Some((total.saturating_sub(free), total)))
    }

    /// Frees are not subtracted: this is what the model and its states took, plus scratch growth.
    fn allocated_bytes(&self) -> Option<usize> {
        Some(self.allocated_bytes.get())
    }

    fn alloc(&self, len: usize) -> Result<CudaSlice<f32>, BackendError> {
        self.zeros("allocating an activation buffer", len)
    }

    fn zero(&self, buf: &mut CudaSlice<f32>) -> Result<(), BackendError> {
        self.not_while_capturing("zeroing a buffer")?;
        self.stream.memset_zeros(buf).map_err(device_err("zeroing a buffer"))
    }

    fn upload_f32(&self, data: &[f32]) -> Result<CudaSlice<f32>, BackendError> {
        let buf = self.upload_slice("uploading f32 weights", data)?;
        self.count_upload(std::mem::size_of_val(data));
        Ok(buf)
    }

    fn download(&self, buf: &CudaSlice<f32>, offset: usize, out: &mut [f32]) -> Result<(), BackendError> {
        self.not_while_capturing("download")?;
        let end = offset.saturating_add(out.len());
        let src = buf.try_slice(offset..end).ok_or(BackendError::Capacity { what: "download", need: end, have: buf.len() })?;
        self.stream.memcpy_dtoh(&src, out).map_err(device_err("downloading a buffer"))?;
        self.synchronize()
    }

    fn upload_matrix(&self, matrix: &QMatrix) -> Result<GpuQMatrix, BackendError> {
        self.not_while_capturing("upload_matrix")?;
        let m = upload(matrix, &self.stream).map_err(device_err("uploading a weight matrix"))?;
        if let GpuQMatrix::Q2(q) = &m {
            self.plus_two_matrices.set(self.plus_two_matrices.get() + usize::from(!q.ternary));
        }
        self.count_alloc::<u8>(matrix.len_bytes());
        self.count_upload(matrix.len_bytes());
        Ok(m)
    }

    fn upload_rope(&self, table: &RopeTable) -> Result<CudaRope, BackendError> {
        Ok(CudaRope {
            cos: self.upload_slice("uploading the RoPE table", &table.cos)?,
            sin: self.upload_slice("uploading the RoPE table", &table.sin)?,
            max_pos: table.max_pos,
            rot_dims: table.head_dim,
        })
    }

    fn alloc_tokens(&self, capacity: usize) -> Result<CudaSlice<u32>, BackendError> {
        self.zeros("allocating token ids", capacity)
    }

    fn write_tokens(&self, dst: &mut CudaSlice<u32>, ids: &[u32]) -> Result<(), BackendError> {
        self.not_while_capturing("write_tokens")?;
        let have = dst.len();
        let mut view = dst.try_slice_mut(..ids.len()).ok_or(BackendError::Capacity { what: "write_tokens", need: ids.len(), have })?;
        self.stream.memcpy_htod(ids, &mut view).map_err(device_err("writing token ids"))
    }

    fn read_tokens(&self, src: &CudaSlice<u32>, out: &mut [u32]) -> Result<(), BackendError> {
        self.not_while_capturing("read_tokens")?;
        let view = src.try_slice(..out.len()).ok_or(BackendError::Capacity { what: "read_tokens", need: out.len(), have: src.len() })?;
        self.stream.memcpy_dtoh(&view, out).map_err(device_err("reading token ids"))?;
        self.synchronize()
    }

    fn decode_queue_depth(&self) -> usize {
        DECODE_QUEUE_DEPTH
    }

    fn post_tokens(&self, src: &CudaSlice<u32>, n: usize, slot: usize) -> Result<(), BackendError> {
        self.not_while_capturing("post_tokens")?;
        let mut boxes = self.token_mailboxes.borrow_mut();
        let ctx = self.gpu.context();
        while boxes.len() < DECODE_QUEUE_DEPTH {
            // SAFETY: a slot is read only after a copy into it completed (take_tokens waits for
            // the event recorded after the copy).
            let mailbox = unsafe { ctx.alloc_pinned_with_flags::<u32>(n.max(1), 0) }.map_err(device_err("allocating a token mailbox"))?;
            boxes.push((mailbox, ctx.new_event(None).map_err(device_err("creating a token mailbox event"))?));
        }
        let (mailbox, copied) =
            boxes.get_mut(slot).ok_or(BackendError::Capacity { what: "token mailbox", need: slot + 1, have: DECODE_QUEUE_DEPTH })?;
        if mailbox.len() < n {
            // The mailbox is reused only after its last copy was taken (the caller takes a
            // slot's ids before posting to it again), so replacing it now is safe.
            // SAFETY: as above.
            *mailbox = unsafe { ctx.alloc_pinned_with_flags::<u32>(n, 0) }.map_err(device_err("allocating a token mailbox"))?;
        }
        let ids = src.try_slice(..n).ok_or(BackendError::Capacity { what: "post_tokens", need: n, have: src.len() })?;
        // Copies ids.len() = n ids into the mailbox's first n slots.
        self.stream.memcpy_dtoh(&ids, mailbox).map_err(device_err("queueing a token id copy"))?;
        copied.record(&self.stream).map_err(device_err("recording a token id copy"))
    }

    fn take_tokens(&self, _src: &CudaSlice<u32>, slot: usize, out: &mut [u32]) -> Result<(), BackendError> {
        let boxes = self.token_mailboxes.borrow();
        let (mailbox, copied) = boxes.get(slot).ok_or(BackendError::Capacity { what: "token mailbox", need: slot + 1, have: boxes.len() })?;
        copied.synchronize().map_err(device_err("waiting for a decode step"))?;
        let ids = mailbox.as_slice().map_err(device_err("reading a token mailbox"))?;
        let posted = ids.get(..out.len()).ok_or(BackendError::Capacity { what: "take_tokens", need: out.len(), have: ids.len() })?;
        out.copy_from_slice(posted);
        // A kernel fault shows as a failed event wait above or as an error cudarc recorded.
        self.gpu.context().check_err().map_err(device_err("an earlier asynchronous CUDA call"))?;
        Ok(())
    }

    fn alloc_kv_pool(&self, shape: HeadShape, blocks: usize) -> Result<CudaKvPool, BackendError> {
        let len = blocks * kv_block_len(shape);
        Ok(CudaKvPool { k: self.zeros("allocating the K pool", len)?, v: self.zeros("allocating the V pool", len)? })
    }

    fn alloc_block_table(&self, shape: HeadShape, max_seq: usize) -> Result<CudaBlockTable, BackendError> {
        // The attention's decode scratch and counters are sized for the longest sequence a table
        // allows.
        self.ensure_scratch(&self.decode_scratch, launch::attention::scratch_len(1, shape, max_seq))?;
        if self.attention_counters.borrow().is_none() {
            let len = launch::attention::counters_len(max_seq, shape);
            *self.attention_counters.borrow_mut() = Some(self.zeros("allocating the attention counters", len)?);
        }
        Ok(CudaBlockTable { ids: self.zeros("allocating a block table", kv_table_len(max_seq))?, max_seq })
    }

    fn write_block_table(&self, table: &mut CudaBlockTable, first: usize, ids: &[u32]) -> Result<(), BackendError> {
        self.not_while_capturing("write_block_table")?;
        let have = table.ids.len();
        let mut view = table
            .ids
            .try_slice_mut(first..first + ids.len())
            .ok_or(BackendError::Capacity { what: "block table", need: first + ids.len(), have })?;
        self.stream.memcpy_htod(ids, &mut view).map_err(device_err("writing a block table"))
    }

    fn copy_kv_block(&self, pool: &mut CudaKvPool, shape: HeadShape, src: u32, dst: u32) -> Result<(), BackendError> {
        self.not_while_capturing("copy_kv_block")?;
        let len = kv_block_len(shape);
        let blocks = pool.k.len() / len;
        if src as usize >= blocks || dst as usize >= blocks || src == dst {
            return Err(BackendError::Device(format!("copy_kv_block: blocks {src} -> {dst} of a pool of {blocks}")));
        }
        let (src, dst) = (src as usize * len, dst as usize * len);
        let err = device_err("copying a KV block");
        for pool in [&mut pool.k, &mut pool.v] {
            // Two disjoint blocks of one allocation: split it between them to borrow both.
            let (mut low, mut high) = pool.split_at_mut(src.max(dst));
            let (from, mut to) = if src < dst {
                (low.slice(src..src + len), high.slice_mut(..len))
            } else {
                (high.slice(..len), low.slice_mut(dst..dst + len))
            };
            self.stream.memcpy_dtod(&from, &mut to).map_err(&err)?;
        }
        Ok(())
    }

    fn new_position(&self) -> Result<CudaPosition, BackendError> {
        Ok(CudaPosition { device: self.zeros("allocating the position", 1)?, host: 0 })
    }

    fn set_position(&self, pos: &mut CudaPosition, value: usize) -> Result<(), BackendError> {
        self.not_while_capturing("set_position")?;
        let v = u32::try_from(value).map_err(|_| BackendError::Device(format!("position {value} exceeds u32")))?;
        self.stream.memcpy_htod(&[v], &mut pos.device).map_err(device_err("setting the position"))?;
        pos.host = value;
        Ok(())
    }

    fn advance_position(&self, pos: &mut CudaPosition, by: usize) -> Result<(), BackendError> {
        launch::position_advance::position_advance(self.launcher(), &mut pos.device, by)
            .map_err(device_err("position_advance"))?;
        // Inside a capture the kernel only runs at replay, which `replay` accounts for.
        if !self.capturing.get() {
            pos.host += by;
        }
        Ok(())
    }

    fn embed(&self, table: &GpuQMatrix, tokens: &CudaSlice<u32>, m: usize, out: &mut CudaSlice<f32>) -> Result<(), BackendError> {
        launch::embed_rows::embed_rows(self.launcher(), &view(table), tokens, m, out).map_err(device_err("embed_rows"))
    }

    fn rms_norm(
        &self,
        x: &CudaSlice<f32>,
        rows: usize,
        n: usize,
        weight: &CudaSlice<f32>,
        eps: f32,
        out: &mut CudaSlice<f32>,
    ) -> Result<(), BackendError> {
        launch::rms_norm::rms_norm(self.launcher(), x, weight, eps, rows, n, out).map_err(device_err("rms_norm"))
    }

    fn matmul(&self, w: &GpuQMatrix, x: &CudaSlice<f32>, m: usize, y: &mut CudaSlice<f32>, store: launch::Store) -> Result<(), BackendError> {
        launch::matmul::matmul(self.launcher(), &view(w), x, m, y, store.into(), None).map_err(device_err("matmul"))
    }

    fn gate_up_swiglu(&self, w: &GpuQMatrix, x: &CudaSlice<f32>, m: usize, out: &mut CudaSlice<f32>) -> Result<(), BackendError> {
        launch::matmul::matmul(self.launcher(), &view(w), x, m, out, launch::matmul::Epilogue::SwiGlu, None).map_err(device_err("gate_up_swiglu"))
    }

    fn qk_norm_rope(
        &self,
        qkv: &mut CudaSlice<f32>,
        rows: SeqRows,
        shape: HeadShape,
        q_norm: &CudaSlice<f32>,
        k_norm: &CudaSlice<f32>,
        eps: f32,
        rope: &CudaRope,
        pos: &CudaPosition,
    ) -> Result<(), BackendError> {
        ops::qk_norm_rope(self, qkv, rows, shape, (q_norm, k_norm, eps), rope, pos, None)
    }

    fn kv_write(
        &self,
        qkv: &CudaSlice<f32>,
        rows: SeqRows,
        shape: HeadShape,
        pos: &CudaPosition,
        pool: &mut CudaKvPool,
        table: &CudaBlockTable,
    ) -> Result<(), BackendError> {
        let qkv = ops::rows_of("kv_write qkv", qkv, rows, shape.qkv_row_len())?;
        let rows = QkvRows { qkv: &qkv, m: rows.rows, shape, pos0: &pos.device };
        launch::kv_write::kv_write(self.launcher(), rows, pool.cache_mut(table)).map_err(device_err("kv_write"))
    }

    fn attention(
        &self,
        qkv: &CudaSlice<f32>,
        rows: SeqRows,
        shape: HeadShape,
        pos: &CudaPosition,
        pool: &CudaKvPool,
        table: &CudaBlockTable,
        out: &mut CudaSlice<f32>,
    ) -> Result<(), BackendError> {
        let cache = pool.cache(table);
        // Bounded by the host mirror of the position (prefill and op-by-op decode), or by the
        // cache length inside a capture (the graph's position moves on every replay). Positions
        // past the bound come out NaN from the kernel, never silently wrong.
        let m = rows.rows;
        let qkv = ops::rows_of("attention qkv", qkv, rows, shape.qkv_row_len())?;
        let mut out = ops::rows_of_mut("attention out", out, rows, shape.q_len())?;
        let seq_bound = if self.capturing.get() { cache.max_seq } else { (pos.host + m).min(cache.max_seq) };
        let need = launch::attention::scratch_len(m, shape, seq_bound);
        let decode_fits = self.decode_scratch.borrow().as_ref().is_some_and(|s| s.len() >= need);
        let slot = if decode_fits {
            &self.decode_scratch
        } else {
            // Sized for the whole cache at once so a growing prompt does not reallocate per chunk.
            self.ensure_scratch(&self.prefill_scratch, launch::attention::scratch_len(m, shape, cache.max_seq))?;
            &self.prefill_scratch
        };
        ops::with_attention_scratch(self, slot, |work| {
            launch::attention::attention(
                self.launcher(),
                QkvRows { qkv: &qkv, m, shape, pos0: &pos.device },
                cache,
                seq_bound,
                work,
                &mut out,
                launch::attention::PrefillKernel::Mma,
            )
            .map_err(device_err("attention"))
        })
    }

    fn copy_rows(&self, src: &CudaSlice<f32>, src_row: usize, dst_row: usize, row_len: usize, dst: &mut CudaSlice<f32>) -> Result<(), BackendError> {
        let from = ops::rows_of("copy_rows src", src, SeqRows { row0: src_row, rows: 1 }, row_len)?;
        let mut to = ops::rows_of_mut("copy_rows dst", dst, SeqRows { row0: dst_row, rows: 1 }, row_len)?;
        self.stream.memcpy_dtod(&from, &mut to).map_err(device_err("copy_rows"))
    }

    fn argmax(&self, logits: &CudaSlice<f32>, row: usize, n: usize, out: &mut CudaSlice<u32>) -> Result<(), BackendError> {
        let logits = ops::rows_of("argmax logits", logits, SeqRows { row0: row, rows: 1 }, n)?;
        let mut out = ops::token_at("argmax out", out, row)?;
        launch::argmax::argmax(self.launcher(), &logits, n, &mut out).map_err(device_err("argmax"))
    }

    fn new_sampler_state(&self) -> Result<CudaSamplerState, BackendError> {
        let mut state = CudaSamplerState {
            rng: self.zeros("allocating the sampler state", launch::sample_top_k::RNG_WORDS)?,
            candidates: self.zeros("allocating sampler scratch", launch::sample_top_k::candidate_scratch_len())?,
        };
        self.set_sampler_rng(&mut state, Xoshiro256::new(0).state())?;
        Ok(state)
    }

    fn set_sampler_rng(&self, sampler: &mut CudaSamplerState, rng: [u64; 4]) -> Result<(), BackendError> {
        self.not_while_capturing("set_sampler_rng")?;
        self.stream.memcpy_htod(&rng, &mut sampler.rng).map_err(device_err("writing the sampler state"))
    }

    fn sampler_rng(&self, sampler: &CudaSamplerState) -> Result<[u64; 4], BackendError> {
        self.not_while_capturing("sampler_rng")?;
        let mut rng = [0u64; 4];
        self.stream.memcpy_dtoh(&sampler.rng, &mut rng).map_err(device_err("reading the sampler state"))?;
        self.stream.synchronize().map_err(device_err("reading the sampler state"))?;
        Ok(rng)
    }

    fn sample(
        &self,
        logits: &CudaSlice<f32>,
        row: usize,
        n: usize,
        params: &SampleParams,
        sampler: &mut CudaSamplerState,
        out: &mut CudaSlice<u32>,
    ) -> Result<(), BackendError> {
        let CudaSamplerState { rng, candidates } = sampler;
        let logits = ops::rows_of("sample logits", logits, SeqRows { row0: row, rows: 1 }, n)?;
        let mut out = ops::token_at("sample out", out, row)?;
        launch::sample_top_k::sample_top_k(self.launcher(), &logits, n, params, rng, candidates, &mut out)
            .map_err(device_err("sample_top_k"))
    }

    fn new_seq_picks(&self, sequences: usize) -> Result<CudaSeqPicks, BackendError> {
        let sequences = sequences.max(1);
        let mut picks = CudaSeqPicks {
            settings: self.zeros("allocating the sequences' pick settings", sequences * SETTING_WORDS)?,
            rng: self.zeros("allocating the sequences' generators", sequences * launch::sample_top_k::RNG_WORDS)?,
            candidates: self.zeros("allocating the batched sampler's scratch", launch::sample_rows::candidate_scratch_len(sequences))?,
            done: self.zeros("allocating the batched sampler's counters", sequences)?,
            sequences,
        };
        for seq in 0..sequences {
            self.set_seq_pick(&mut picks, seq, SeqPick::Greedy, Xoshiro256::new(0).state())?;
        }
        Ok(picks)
    }

    fn set_seq_pick(&self, picks: &mut CudaSeqPicks, seq: usize, pick: SeqPick, rng: [u64; 4]) -> Result<(), BackendError> {
        self.not_while_capturing("set_seq_pick")?;
        if seq >= picks.sequences {
            return Err(BackendError::Capacity { what: "set_seq_pick sequence", need: seq + 1, have: picks.sequences });
        }
        let words = pick.device_words()?;
        let mut setting = picks.settings.slice_mut(seq * SETTING_WORDS..(seq + 1) * SETTING_WORDS);
        self.stream.memcpy_htod(&words, &mut setting).map_err(device_err("writing a sequence's pick setting"))?;
        let n = launch::sample_top_k::RNG_WORDS;
        let mut state = picks.rng.slice_mut(seq * n..(seq + 1) * n);
        self.stream.memcpy_htod(&rng, &mut state).map_err(device_err("writing a sequence's generator"))
    }

    fn seq_pick_rng(&self, picks: &CudaSeqPicks, seq: usize) -> Result<[u64; 4], BackendError> {
        self.not_while_capturing("seq_pick_rng")?;
        if seq >= picks.sequences {
            return Err(BackendError::Capacity { what: "seq_pick_rng sequence", need: seq + 1, have: picks.sequences });
        }
        let n = launch::sample_top_k::RNG_WORDS;
        let mut rng = [0u64; 4];
        self.stream.memcpy_dtoh(&picks.rng.slice(seq * n..(seq + 1) * n), &mut rng).map_err(device_err("reading a sequence's generator"))?;
        self.stream.synchronize().map_err(device_err("reading a sequence's generator"))?;
        Ok(rng)
    }

    fn pick_rows(
        &self,
        logits: &CudaSlice<f32>,
        rows: usize,
        n: usize,
        row_seqs: &CudaSlice<u32>,
        picks: &mut CudaSeqPicks,
        out: &mut CudaSlice<u32>,
    ) -> Result<(), BackendError> {
        let CudaSeqPicks { settings, rng, candidates, done, sequences } = picks;
        if rows > *sequences {
            return Err(BackendError::Capacity { what: "pick_rows rows", need: rows, have: *sequences });
        }
        let seqs = launch::sample_rows::SeqSettings { settings: &*settings, rng, seqs: *sequences };
        let scratch = launch::sample_rows::RowScratch { candidates, done };
        launch::sample_rows::sample_rows(self.launcher(), logits, rows, n, row_seqs, seqs, scratch, out).map_err(device_err("sample_rows"))
    }

    // The hybrid (qwen35) model's ops: one launcher call each, no host synchronisation (a
    // decode step is captured as a graph); the conv and DeltaNet states stay on the device.

    fn hadamard(&self, x: &CudaSlice<f32>, rows: usize, p: HadamardOp<'_, Self>, out: &mut CudaSlice<f32>) -> Result<(), BackendError> {
        launch::hadamard::hadamard(self.launcher(), x, p.signs, p.width, p.block, p.inverse, p.perm, rows, out)
            .map_err(device_err("hadamard"))
    }

    fn matmul_f32(&self, w: &CudaSlice<f32>, n: usize, k: usize, x: &CudaSlice<f32>, m: usize, y: &mut CudaSlice<f32>) -> Result<(), BackendError> {
        if m == 0 {
            return Ok(());
        }
        // A decode step's few rows: one CTA per output column; a prefill's narrow alpha/beta: the
        // small-N tiles; never wgmma, whose split scratch is allocated per call.
        let path = launch::gemm_f32::model_path(m, n);
        let inputs = GemmInputs { dims: GemmDims { m, n, k }, a: x, w, bias: None };
        launch::gemm_f32::gemm_f32(self.launcher(), Some(path), inputs, y).map_err(device_err("matmul_f32"))
    }

    fn matmul_f32_pair(
        &self,
        ws: [&CudaSlice<f32>; 2],
        n: usize,
        k: usize,
        x: &CudaSlice<f32>,
        m: usize,
        ys: [&mut CudaSlice<f32>; 2],
    ) -> Result<(), BackendError> {
        if m == 0 {
            return Ok(());
        }
        // One launch for both on the plain-f32 paths (alpha and beta: 2N columns fill twice the
        // SMs); the same path, hence the same bits, as two matmul_f32 calls.
        let (path, dims) = (launch::gemm_f32::model_path(m, n), GemmDims { m, n, k });
        launch::gemm_f32::gemm_f32_pair(self.launcher(), path, dims, x, ws, ys).map_err(device_err("matmul_f32_pair"))
    }

    fn ssm_conv(
        &self,
        x: &CudaSlice<f32>,
        rows: SeqRows,
        channels: usize,
        weight: &CudaSlice<f32>,
        state: &mut CudaSlice<f32>,
        out: &mut CudaSlice<f32>,
    ) -> Result<(), BackendError> {
        if channels == 0 || !weight.len().is_multiple_of(channels) {
            return Err(BackendError::Device(format!("ssm_conv: {} conv weights for {channels} channels", weight.len())));
        }
        let kernel = weight.len() / channels;
        let x = ops::rows_of("ssm_conv x", x, rows, channels)?;
        let mut out = ops::rows_of_mut("ssm_conv out", out, rows, channels)?;
        launch::ssm_conv::ssm_conv(self.launcher(), &x, weight, state, rows.rows, channels, kernel, &mut out)
            .map_err(device_err("ssm_conv"))
    }

    fn gated_delta(
        &self,
        shape: DeltaShape,
        conv: &CudaSlice<f32>,
        alpha: &CudaSlice<f32>,
        beta: &CudaSlice<f32>,
        rows: SeqRows,
        gates: DeltaGates<'_, Self>,
        state: &mut CudaSlice<f32>,
        out: &mut CudaSlice<f32>,
    ) -> Result<(), BackendError> {
        let conv = ops::rows_of("gated_delta conv", conv, rows, shape.conv_row_len())?;
        let alpha = ops::rows_of("gated_delta alpha", alpha, rows, shape.v_heads)?;
        let beta = ops::rows_of("gated_delta beta", beta, rows, shape.v_heads)?;
        let mut out = ops::rows_of_mut("gated_delta out", out, rows, shape.out_row_len())?;
        let gates = launch::gated_delta::DeltaGates { ssm_a: gates.ssm_a, dt_bias: gates.dt_bias };
        let need = launch::gated_delta::scratch_len(shape, rows.rows);
        if need > 0 {
            self.ensure_scratch(&self.delta_scratch, need)?;
        }
        let mut scratch = self.delta_scratch.borrow_mut();
        let scratch = if need > 0 { scratch.as_mut() } else { None };
        launch::gated_delta::gated_delta(self.launcher(), shape, &conv, &alpha, &beta, gates, rows.rows, state, &mut out, scratch)
            .map_err(device_err("gated_delta"))
    }

    fn gated_rms_norm(
        &self,
        x: &CudaSlice<f32>,
        z: &CudaSlice<f32>,
        rows: usize,
        width: usize,
        weight: &CudaSlice<f32>,
        eps: f32,
        out: &mut CudaSlice<f32>,
    ) -> Result<(), BackendError> {
        let d = weight.len();
        if d == 0 || !width.is_multiple_of(d) {
            return Err(BackendError::Device(format!("gated_rms_norm: rows of {width} in heads of {d}")));
        }
        launch::gated_rms_norm::gated_rms_norm(self.launcher(), x, z, weight, eps, rows * (width / d), d, out)
            .map_err(device_err("gated_rms_norm"))
    }

    fn sigmoid_gate(&self, x: &CudaSlice<f32>, g: &CudaSlice<f32>, rows: usize, width: usize, out: &mut CudaSlice<f32>) -> Result<(), BackendError> {
        launch::sigmoid_gate::sigmoid_gate(self.launcher(), x, g, rows * width, out).map_err(device_err("sigmoid_gate"))
    }
}

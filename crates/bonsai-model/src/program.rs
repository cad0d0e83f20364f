//! What a model computes, as a plain sequence of ops over named buffers: the [`Program`] a model
//! emits for one forward step of a batch, and [`run_op`], the meaning of each op in terms of a
//! backend's primitive ops.
//!
//! A program runs over a batch of independent sequences, each contributing a run of consecutive
//! rows (a prefill chunk, or one token per sequence when decoding). Row-wise ops (embedding,
//! norms, matmuls) treat all rows alike; position-dependent ops (RoPE, the KV write, attention)
//! apply to each sequence's rows at that sequence's position and cache. A backend compiles a
//! program into its own plan ([`crate::backend::Backend::compile`]): the CPU runs the ops one by
//! one through [`run_op`]; CUDA fuses chains of them into fewer launches and captures graphs.

use bonsai_kernels::ops::gated_delta::DeltaShape;
use bonsai_kernels::ops::hadamard::VHeadPerm;
use bonsai_kernels::ops::{HeadShape, Store};

use crate::backend::{Backend, BackendError};
use crate::qwen3::DevicePick;

/// An activation buffer of a batch state, `rows x row_len` f32 (see [`Dims::row_len`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Act {
    /// The residual stream, `hidden` wide.
    X,
    /// A normed copy of a `hidden`-wide row.
    Xn,
    /// `[q | k | v]` rows.
    Qkv,
    /// Attention outputs, `n_q * head_dim` wide.
    Attn,
    /// The FFN's SwiGLU activation, `ffn` wide.
    Ffn,
    /// Each sequence's last row of the residual stream (one row per sequence).
    Last,
    /// Logits, `vocab` wide.
    Logits,
    // The hybrid (qwen35) model's activations; their widths come from [`HybridDims`].
    /// The Hadamard-transformed input of the next folded matmul(s): rows as wide as that
    /// matmul's input (hidden, value, attention or FFN width), packed at that stride.
    Rot,
    /// The attention output gate (`n_q * head_dim`).
    AttnGate,
    /// Attention output times `sigmoid(AttnGate)` (`n_q * head_dim`).
    AttnGated,
    /// A DeltaNet layer's q|k|v projection before the conv (`conv_channels`).
    Mixed,
    /// The conv's SiLU output, q|k|v (`conv_channels`).
    Conv,
    /// The DeltaNet output gate z (`value_dim`).
    Z,
    /// Raw `ssm_alpha` projection (`v_heads`).
    Alpha,
    /// Raw `ssm_beta` projection (`v_heads`).
    Beta,
    /// The DeltaNet core's output (`value_dim`).
    Delta,
    /// The gated RMSNorm of `Delta` (`value_dim`), the input of `ssm_out`.
    Gated,
}

/// A weight matrix of the model (an index into [`Weights::matrices`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MatrixId(pub usize);

/// A weight vector of the model (an index into [`Weights::vectors`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VectorId(pub usize);

/// One op of a program.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Op {
    /// `out[r] = table[tokens[r]]` for every row.
    Embed { table: MatrixId, out: Act },
    /// `out[r] = x[r] / rms(x[r]) * weight` for every row.
    RmsNorm { x: Act, weight: VectorId, out: Act },
    /// `y (=|+=) x · Wᵀ` for every row.
    Matmul { w: MatrixId, x: Act, y: Act, store: Store },
    /// `out = silu(x · Wgateᵀ) * (x · Wupᵀ)`, `W = [gate rows | up rows]`.
    GateUpSwiglu { w: MatrixId, x: Act, out: Act },
    /// Per-head RMSNorm, then NeoX RoPE at each row's position, of the q and k heads of `qkv`.
    QkNormRope { qkv: Act, q_norm: VectorId, k_norm: VectorId },
    /// The k and v heads of `qkv` into layer `layer`'s cache at each row's position.
    KvWrite { qkv: Act, layer: usize },
    /// Causal GQA attention of the q heads of `qkv` over layer `layer`'s cache, each row seeing
    /// its sequence's positions up to its own.
    Attention { qkv: Act, layer: usize, out: Act },
    /// Row b of `out` = the last row of sequence b in `x`.
    LastRows { x: Act, out: Act },
    /// Every sequence's position moves on by its rows (its tokens are now in the cache).
    Advance,
    // Ops of the hybrid (qwen35) model.
    /// Per row of `width` values: `out = BlockH(signs ⊙ P(x))` (forward; `P` the tiled -> grouped
    /// V-head permutation when `perm` is given) or `out = signs ⊙ BlockH(x)` (inverse), blocks of
    /// `block` (`bonsai_kernels::ops::hadamard`).
    Hadamard { x: Act, out: Act, signs: VectorId, width: usize, block: usize, inverse: bool, perm: Option<VHeadPerm> },
    /// `y = x · Wᵀ` with an f32 weight `W[n, k]` (the BF16 `ssm_alpha` / `ssm_beta`); with
    /// `second = Some((w2, y2))` also `y2 = x · W2ᵀ` (W2 of the same shape), in one launch where
    /// the backend has one ([`Backend::matmul_f32_pair`]).
    MatmulF32 { w: VectorId, n: usize, k: usize, x: Act, y: Act, second: Option<(VectorId, Act)> },
    /// Causal depthwise conv (kernel [`HybridDims::conv_kernel`]) then SiLU of each sequence's
    /// rows, through the sequence's conv state of recurrent layer `slot`.
    SsmConv { x: Act, weight: VectorId, slot: usize, out: Act },
    /// The Gated DeltaNet core of each sequence's rows over its state of recurrent layer `slot`
    /// (`bonsai_kernels::ops::gated_delta`).
    GatedDelta { conv: Act, alpha: Act, beta: Act, ssm_a: VectorId, dt_bias: VectorId, slot: usize, out: Act },
    /// `out_h = RMSNorm(x_h; weight) ⊙ silu(z_h)` per head of [`HybridDims::delta`]'s head_dim.
    GatedRmsNorm { x: Act, z: Act, weight: VectorId, out: Act },
    /// `out = x ⊙ sigmoid(gate)` (attention output gate).
    SigmoidGate { x: Act, gate: Act, out: Act },
    /// Sequence b's next input token (row b of the token ids) = `pick` of logits row b, on the
    /// backend (no download). [`DevicePick::Sample`] draws from the batch's one generator, row by
    /// row; [`DevicePick::PerSequence`] picks each row with its sequence's own setting and
    /// generator (named through [`Activations::row_seqs`]).
    Pick(DevicePick),
}

impl Op {
    /// Whether the op belongs to the hybrid (qwen35) model only.
    pub fn is_hybrid(&self) -> bool {
        matches!(
            self,
            Op::Hadamard { .. }
                | Op::MatmulF32 { .. }
                | Op::SsmConv { .. }
                | Op::GatedDelta { .. }
                | Op::GatedRmsNorm { .. }
                | Op::SigmoidGate { .. }
        )
    }
}

/// The model dimensions every op's shapes follow.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Dims {
    pub hidden: usize,
    pub ffn: usize,
    pub vocab: usize,
    pub shape: HeadShape,
    /// RMSNorm epsilon (every norm of the model).
    pub eps: f32,
    /// The recurrent layers' geometry (qwen35); None for Qwen3.
    pub hybrid: Option<HybridDims>,
}

/// The hybrid model's extra dimensions (Gated DeltaNet layers and the gated attention).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HybridDims {
    /// K heads, V heads and their head size.
    pub delta: DeltaShape,
    pub conv_kernel: usize,
    /// The widest folded-matmul input ([`Act::Rot`]'s row capacity).
    pub max_rot_width: usize,
}

impl HybridDims {
    /// Conv channels: q|k|v.
    pub fn conv_channels(&self) -> usize {
        self.delta.conv_row_len()
    }
    /// V heads x head size.
    pub fn value_dim(&self) -> usize {
        self.delta.out_row_len()
    }
}

impl Dims {
    /// Floats per row of `act`.
    pub fn row_len(&self, act: Act) -> usize {
        match act {
            Act::X | Act::Xn | Act::Last => self.hidden,
            Act::Qkv => self.shape.qkv_row_len(),
            Act::Attn => self.shape.q_len(),
            Act::Ffn => self.ffn,
            Act::Logits => self.vocab,
            Act::AttnGate | Act::AttnGated => self.shape.q_len(),
            hybrid => {
                let Some(h) = self.hybrid else { return 0 };
                match hybrid {
                    Act::Rot => h.max_rot_width,
                    Act::Mixed | Act::Conv => h.conv_channels(),
                    Act::Z | Act::Delta | Act::Gated => h.value_dim(),
                    Act::Alpha | Act::Beta => h.delta.v_heads,
                    _ => unreachable!("handled above"),
                }
            }
        }
    }
}

/// One forward step of a batch: the ops in order, the dimensions, and the rows each sequence of
/// the batch contributes (sequence b's rows follow sequence b - 1's).
#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    pub ops: Vec<Op>,
    pub dims: Dims,
    /// Rows per sequence, in batch order (each at least 1).
    pub rows: Vec<usize>,
}

impl Program {
    /// An empty program over sequences of `rows` rows each.
    pub fn new(dims: Dims, rows: Vec<usize>) -> Self {
        Self { ops: Vec::new(), dims, rows }
    }
    /// Rows of the whole batch.
    pub fn total_rows(&self) -> usize {
        self.rows.iter().sum()
    }
    /// The rows each op processes, in op order: an op takes the rows its input holds, which
    /// is every row of the batch, or one per sequence after [`Op::LastRows`].
    pub fn op_rows(&self) -> Vec<usize> {
        let (all, seqs) = (self.total_rows(), self.rows.len());
        let mut held = std::collections::HashMap::new();
        let rows_in = |held: &std::collections::HashMap<Act, usize>, act: Act| *held.get(&act).unwrap_or(&all);
        self.ops
            .iter()
            .map(|op| {
                let (rows, written) = match *op {
                    Op::Embed { out, .. } => (all, Some(out)),
                    Op::RmsNorm { x, out, .. } => (rows_in(&held, x), Some(out)),
                    Op::Matmul { x, y, .. } => (rows_in(&held, x), Some(y)),
                    Op::GateUpSwiglu { x, out, .. } => (rows_in(&held, x), Some(out)),
                    Op::QkNormRope { .. } | Op::KvWrite { .. } | Op::Advance => (all, None),
                    Op::Attention { out, .. } => (all, Some(out)),
                    Op::LastRows { out, .. } => (seqs, Some(out)),
                    Op::Pick(_) => (seqs, None),
                    Op::Hadamard { x, out, .. } => (rows_in(&held, x), Some(out)),
                    Op::MatmulF32 { x, y, .. } => (rows_in(&held, x), Some(y)),
                    Op::SsmConv { out, .. } | Op::GatedDelta { out, .. } => (all, Some(out)),
                    Op::GatedRmsNorm { x, out, .. } => (rows_in(&held, x), Some(out)),
                    Op::SigmoidGate { x, out, .. } => (rows_in(&held, x), Some(out)),
                };
                if let Some(act) = written {
                    held.insert(act, rows);
                }
                if let Op::MatmulF32 { second: Some((_, y2)), .. } = *op {
                    held.insert(y2, rows);
                }
                rows
            })
            .collect()
    }
    /// Whether every sequence contributes exactly one row (a decode step).
    pub fn one_row_each(&self) -> bool {
        self.rows.iter().all(|&r| r == 1)
    }
    /// The first row of sequence `b`.
    pub fn row0(&self, b: usize) -> usize {
        self.rows[..b].iter().sum()
    }
}

/// The model's parameters on a backend, addressed by the ids programs use.
pub struct Weights<B: Backend> {
    pub matrices: Vec<B::Matrix>,
    pub vectors: Vec<B::Buffer>,
    pub rope: B::Rope,
}

/// One sequence's caches and position: its block table into the state's KV pools (one pool per
/// attention layer, indexed by the ops' `layer`, which for the hybrid model counts attention
/// layers only; the table's blocks are the same in every pool) and, for the hybrid model, a conv
/// state (`(K-1) x conv_channels`, oldest row first) and a DeltaNet state (`v_heads x d x d`,
/// `S[h][key][value]`) per recurrent layer (indexed by the ops' `slot`).
pub struct Sequence<B: Backend> {
    pub table: B::BlockTable,
    /// The host's copy of `table`'s live entries: the blocks holding positions
    /// `0..blocks.len() * KV_BLOCK`.
    pub blocks: Vec<u32>,
    pub conv: Vec<B::Buffer>,
    pub ssm: Vec<B::Buffer>,
    pub pos: B::Position,
}

/// A batch state's activation buffers, token ids and sampler, for up to `max_rows` rows.
pub struct Activations<B: Backend> {
    pub x: B::Buffer,
    pub xn: B::Buffer,
    pub qkv: B::Buffer,
    pub attn: B::Buffer,
    pub ffn: B::Buffer,
    pub last: B::Buffer,
    pub logits: B::Buffer,
    /// The hybrid model's activations (one-element placeholders for Qwen3).
    pub rot: B::Buffer,
    pub attn_gate: B::Buffer,
    pub attn_gated: B::Buffer,
    pub mixed: B::Buffer,
    pub conv: B::Buffer,
    pub z: B::Buffer,
    pub alpha: B::Buffer,
    pub beta: B::Buffer,
    pub delta: B::Buffer,
    pub gated: B::Buffer,
    /// Each row's input token id (a decode step's pick writes row b's next id here).
    pub tokens: B::Tokens,
    pub sampler: B::SamplerState,
    /// Row b's sequence index in the batch state ([`DevicePick::PerSequence`] reads its setting).
    pub row_seqs: B::Tokens,
    /// Every sequence's own pick setting and generator ([`DevicePick::PerSequence`]).
    pub seq_picks: B::SeqPicks,
}

impl<B: Backend> Activations<B> {
    pub fn get(&self, act: Act) -> &B::Buffer {
        match act {
            Act::X => &self.x,
            Act::Xn => &self.xn,
            Act::Qkv => &self.qkv,
            Act::Attn => &self.attn,
            Act::Ffn => &self.ffn,
            Act::Last => &self.last,
            Act::Logits => &self.logits,
            Act::Rot => &self.rot,
            Act::AttnGate => &self.attn_gate,
            Act::AttnGated => &self.attn_gated,
            Act::Mixed => &self.mixed,
            Act::Conv => &self.conv,
            Act::Z => &self.z,
            Act::Alpha => &self.alpha,
            Act::Beta => &self.beta,
            Act::Delta => &self.delta,
            Act::Gated => &self.gated,
        }
    }
    pub fn get_mut(&mut self, act: Act) -> &mut B::Buffer {
        match act {
            Act::X => &mut self.x,
            Act::Xn => &mut self.xn,
            Act::Qkv => &mut self.qkv,
            Act::Attn => &mut self.attn,
            Act::Ffn => &mut self.ffn,
            Act::Last => &mut self.last,
            Act::Logits => &mut self.logits,
            Act::Rot => &mut self.rot,
            Act::AttnGate => &mut self.attn_gate,
            Act::AttnGated => &mut self.attn_gated,
            Act::Mixed => &mut self.mixed,
            Act::Conv => &mut self.conv,
            Act::Z => &mut self.z,
            Act::Alpha => &mut self.alpha,
            Act::Beta => &mut self.beta,
            Act::Delta => &mut self.delta,
            Act::Gated => &mut self.gated,
        }
    }
    /// `a` and `b` to read and `write` at once (`write` differs from both).
    pub fn triple(&mut self, a: Act, b: Act, write: Act) -> Result<ReadReadWrite<'_, B>, BackendError> {
        if a == write || b == write {
            return Err(BackendError::Device(format!("an op reads and writes {write:?}")));
        }
        let (a_ptr, b_ptr): (*const B::Buffer, *const B::Buffer) = (self.get(a), self.get(b));
        // SAFETY: `write` differs from `a` and `b`, so the exclusive borrow below aliases neither
        // shared one (two shared borrows of one field are fine).
        let (a, b) = unsafe { (&*a_ptr, &*b_ptr) };
        Ok((a, b, self.get_mut(write)))
    }
    /// The token ids and `write` at once.
    pub fn tokens_and(&mut self, write: Act) -> (&B::Tokens, &mut B::Buffer) {
        let Self { tokens, .. } = self;
        let tokens: *const B::Tokens = tokens;
        // SAFETY: the token ids are a field of `self` that no activation names.
        (unsafe { &*tokens }, self.get_mut(write))
    }
    /// Activations to read and up to W to write at once (every output differs from each other
    /// one and from every input; a None output is not borrowed).
    #[allow(clippy::type_complexity)]
    pub fn reads_and_writes<const R: usize, const W: usize>(
        &mut self,
        reads: [Act; R],
        writes: [Option<Act>; W],
    ) -> Result<([&B::Buffer; R], [Option<&mut B::Buffer>; W]), BackendError> {
        for (i, w) in writes.iter().enumerate().filter_map(|(i, w)| w.map(|w| (i, w))) {
            if reads.contains(&w) || writes[i + 1..].contains(&Some(w)) {
                return Err(BackendError::Device(format!("an op reads {reads:?} and writes {writes:?}: {w:?} twice")));
            }
        }
        let read_ptrs = reads.map(|a| self.get(a) as *const B::Buffer);
        let write_ptrs = writes.map(|w| w.map(|a| self.get_mut(a) as *mut B::Buffer));
        // SAFETY: every output names a field of `self` no input and no other output names (checked
        // above), so the exclusive borrows alias nothing; shared borrows of one field may repeat.
        Ok(unsafe { (read_ptrs.map(|p| &*p), write_ptrs.map(|p| p.map(|p| &mut *p))) })
    }
    /// `read` and `write` at once (they must differ).
    pub fn pair(&mut self, read: Act, write: Act) -> Result<(&B::Buffer, &mut B::Buffer), BackendError> {
        if read == write {
            return Err(BackendError::Device(format!("an op reads and writes {read:?}")));
        }
        // SAFETY: `read` and `write` name different fields of `self`, so the shared and the
        // exclusive borrow never alias.
        let read_ptr: *const B::Buffer = self.get(read);
        Ok((unsafe { &*read_ptr }, self.get_mut(write)))
    }
}

/// Everything one program run reads and writes.
pub struct RunEnv<'a, B: Backend> {
    pub weights: &'a Weights<B>,
    pub acts: &'a mut Activations<B>,
    /// The batch's sequences, in program order.
    pub seqs: Vec<&'a mut Sequence<B>>,
    /// The KV pool of each attention layer.
    pub kv: &'a mut [B::KvPool],
}

/// Runs `op` of `program` over `rows` rows (its entry of [`Program::op_rows`]) through
/// `backend`'s primitive ops: the definition of every op, and the path of every op a backend's
/// plan does not fuse.
pub fn run_op<B: Backend>(b: &B, program: &Program, op: &Op, rows: usize, env: &mut RunEnv<'_, B>) -> Result<(), BackendError> {
    let dims = &program.dims;
    let RunEnv { weights, acts, seqs, kv } = env;
    match *op {
        Op::Embed { table, out } => {
            let (tokens, out) = acts.tokens_and(out);
            b.embed(&weights.matrices[table.0], tokens, rows, out)
        }
        Op::RmsNorm { x, weight, out } => {
            let len = dims.row_len(x);
            let (x, out) = acts.pair(x, out)?;
            b.rms_norm(x, rows, len, &weights.vectors[weight.0], dims.eps, out)
        }
        Op::Matmul { w, x, y, store } => {
            let (x, y) = acts.pair(x, y)?;
            b.matmul(&weights.matrices[w.0], x, rows, y, store)
        }
        Op::GateUpSwiglu { w, x, out } => {
            let (x, out) = acts.pair(x, out)?;
            b.gate_up_swiglu(&weights.matrices[w.0], x, rows, out)
        }
        Op::QkNormRope { qkv, q_norm, k_norm } => {
            let (q_norm, k_norm) = (&weights.vectors[q_norm.0], &weights.vectors[k_norm.0]);
            for (s, seq) in seqs.iter().enumerate() {
                let rows = SeqRows { row0: program.row0(s), rows: program.rows[s] };
                b.qk_norm_rope(acts.get_mut(qkv), rows, dims.shape, q_norm, k_norm, dims.eps, &weights.rope, &seq.pos)?;
            }
            Ok(())
        }
        Op::KvWrite { qkv, layer } => {
            for (s, seq) in seqs.iter_mut().enumerate() {
                let rows = SeqRows { row0: program.row0(s), rows: program.rows[s] };
                b.kv_write(acts.get(qkv), rows, dims.shape, &seq.pos, &mut kv[layer], &seq.table)?;
            }
            Ok(())
        }
        Op::Attention { qkv, layer, out } => {
            let (qkv, out) = acts.pair(qkv, out)?;
            for (s, seq) in seqs.iter().enumerate() {
                let rows = SeqRows { row0: program.row0(s), rows: program.rows[s] };
                b.attention(qkv, rows, dims.shape, &seq.pos, &kv[layer], &seq.table, out)?;
            }
            Ok(())
        }
        Op::LastRows { x, out } => {
            let (x, out) = acts.pair(x, out)?;
            for s in 0..program.rows.len() {
                let last = program.row0(s) + program.rows[s] - 1;
                b.copy_rows(x, last, s, dims.row_len(Act::X), out)?;
            }
            Ok(())
        }
        Op::Advance => {
            for (s, seq) in seqs.iter_mut().enumerate() {
                b.advance_position(&mut seq.pos, program.rows[s])?;
            }
            Ok(())
        }
        Op::Hadamard { x, out, signs, width, block, inverse, perm } => {
            let (x, out) = acts.pair(x, out)?;
            let p = HadamardOp { width, block, signs: &weights.vectors[signs.0], inverse, perm };
            b.hadamard(x, rows, p, out)
        }
        Op::MatmulF32 { w, n, k, x, y, second: None } => {
            let (x, y) = acts.pair(x, y)?;
            b.matmul_f32(&weights.vectors[w.0], n, k, x, rows, y)
        }
        Op::MatmulF32 { w, n, k, x, y, second: Some((w2, y2)) } => {
            let ([x], [Some(y), Some(y2)]) = acts.reads_and_writes([x], [Some(y), Some(y2)])? else {
                unreachable!("reads_and_writes borrows every named output");
            };
            b.matmul_f32_pair([&weights.vectors[w.0], &weights.vectors[w2.0]], n, k, x, rows, [y, y2])
        }
        Op::SsmConv { x, weight, slot, out } => {
            let h = hybrid_dims(dims)?;
            let (x, out) = acts.pair(x, out)?;
            for (s, seq) in seqs.iter_mut().enumerate() {
                let rows = SeqRows { row0: program.row0(s), rows: program.rows[s] };
                let state = seq.conv.get_mut(slot).ok_or_else(|| missing_state("conv", slot))?;
                b.ssm_conv(x, rows, h.conv_channels(), &weights.vectors[weight.0], state, out)?;
            }
            Ok(())
        }
        Op::GatedDelta { conv, alpha, beta, ssm_a, dt_bias, slot, out } => {
            let h = hybrid_dims(dims)?;
            let (conv, alpha, beta, out) = acts.delta_inputs(conv, alpha, beta, out)?;
            let gates = DeltaGates { ssm_a: &weights.vectors[ssm_a.0], dt_bias: &weights.vectors[dt_bias.0] };
            for (s, seq) in seqs.iter_mut().enumerate() {
                let rows = SeqRows { row0: program.row0(s), rows: program.rows[s] };
                let state = seq.ssm.get_mut(slot).ok_or_else(|| missing_state("DeltaNet", slot))?;
                b.gated_delta(h.delta, conv, alpha, beta, rows, gates.clone(), state, out)?;
            }
            Ok(())
        }
        Op::GatedRmsNorm { x, z, weight, out } => {
            let h = hybrid_dims(dims)?;
            let (x, z, out) = acts.triple(x, z, out)?;
            b.gated_rms_norm(x, z, rows, h.value_dim(), &weights.vectors[weight.0], dims.eps, out)
        }
        Op::SigmoidGate { x, gate, out } => {
            let width = dims.row_len(x);
            let (x, gate, out) = acts.triple(x, gate, out)?;
            b.sigmoid_gate(x, gate, rows, width, out)
        }
        Op::Pick(pick) => {
            let Activations { tokens, sampler, logits, row_seqs, seq_picks, .. } = &mut **acts;
            match pick {
                DevicePick::Greedy => (0..rows).try_for_each(|row| b.argmax(logits, row, dims.vocab, tokens)),
                DevicePick::Sample(params) => (0..rows).try_for_each(|row| b.sample(logits, row, dims.vocab, &params, sampler, tokens)),
                DevicePick::PerSequence => b.pick_rows(logits, rows, dims.vocab, row_seqs, seq_picks, tokens),
            }
        }
    }
}

fn hybrid_dims(dims: &Dims) -> Result<HybridDims, BackendError> {
    dims.hybrid.ok_or_else(|| BackendError::Device("a recurrent-layer op in a program without hybrid dimensions".into()))
}

fn missing_state(what: &str, slot: usize) -> BackendError {
    BackendError::Device(format!("the sequence has no {what} state for recurrent layer {slot}"))
}

/// Two activations to read and one to write.
pub type ReadReadWrite<'a, B> = (&'a <B as Backend>::Buffer, &'a <B as Backend>::Buffer, &'a mut <B as Backend>::Buffer);

/// A Hadamard transform's parameters, with the sign vector on the backend.
pub struct HadamardOp<'a, B: Backend> {
    /// Values per row (the sign vector's length).
    pub width: usize,
    pub block: usize,
    pub signs: &'a B::Buffer,
    pub inverse: bool,
    pub perm: Option<VHeadPerm>,
}

/// A DeltaNet layer's per-V-head gate parameters, on the backend.
pub struct DeltaGates<'a, B: Backend> {
    /// `-exp(A_log)`.
    pub ssm_a: &'a B::Buffer,
    pub dt_bias: &'a B::Buffer,
}

impl<B: Backend> Activations<B> {
    /// The DeltaNet core's three inputs and its output at once (the output differs from each).
    #[allow(clippy::type_complexity)]
    pub fn delta_inputs(
        &mut self,
        conv: Act,
        alpha: Act,
        beta: Act,
        out: Act,
    ) -> Result<(&B::Buffer, &B::Buffer, &B::Buffer, &mut B::Buffer), BackendError> {
        if [conv, alpha, beta].contains(&out) {
            return Err(BackendError::Device(format!("an op reads and writes {out:?}")));
        }
        let ptrs: [*const B::Buffer; 3] = [self.get(conv), self.get(alpha), self.get(beta)];
        // SAFETY: `out` differs from each input, so the exclusive borrow below aliases no shared
        // one (shared borrows of one field may repeat).
        let (conv, alpha, beta) = unsafe { (&*ptrs[0], &*ptrs[1], &*ptrs[2]) };
        Ok((conv, alpha, beta, self.get_mut(out)))
    }
}

impl<B: Backend> Clone for DeltaGates<'_, B> {
    fn clone(&self) -> Self {
        Self { ssm_a: self.ssm_a, dt_bias: self.dt_bias }
    }
}

/// The rows of one sequence inside a batch's buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeqRows {
    pub row0: usize,
    pub rows: usize,
}

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
    /// Sequence b's next input token (row b of the token ids) = `pick` of logits row b, on the
    /// backend (no download). Sampling draws from the batch's one generator, row by row.
    Pick(DevicePick),
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
                };
                if let Some(act) = written {
                    held.insert(act, rows);
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

/// One sequence's KV cache (per layer) and position.
pub struct Sequence<B: Backend> {
    pub kv: Vec<B::KvCache>,
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
    /// Each row's input token id (a decode step's pick writes row b's next id here).
    pub tokens: B::Tokens,
    pub sampler: B::SamplerState,
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
        }
    }
    /// The token ids and `write` at once.
    pub fn tokens_and(&mut self, write: Act) -> (&B::Tokens, &mut B::Buffer) {
        let Self { tokens, .. } = self;
        let tokens: *const B::Tokens = tokens;
        // SAFETY: the token ids are a field of `self` that no activation names.
        (unsafe { &*tokens }, self.get_mut(write))
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
}

/// Runs `op` of `program` over `rows` rows (its entry of [`Program::op_rows`]) through
/// `backend`'s primitive ops: the definition of every op, and the path of every op a backend's
/// plan does not fuse.
pub fn run_op<B: Backend>(b: &B, program: &Program, op: &Op, rows: usize, env: &mut RunEnv<'_, B>) -> Result<(), BackendError> {
    let dims = &program.dims;
    let RunEnv { weights, acts, seqs } = env;
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
                let Sequence { kv, pos } = &mut **seq;
                b.kv_write(acts.get(qkv), rows, dims.shape, pos, &mut kv[layer])?;
            }
            Ok(())
        }
        Op::Attention { qkv, layer, out } => {
            let (qkv, out) = acts.pair(qkv, out)?;
            for (s, seq) in seqs.iter().enumerate() {
                let rows = SeqRows { row0: program.row0(s), rows: program.rows[s] };
                b.attention(qkv, rows, dims.shape, &seq.pos, &seq.kv[layer], out)?;
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
        Op::Pick(pick) => {
            let Activations { tokens, sampler, logits, .. } = &mut **acts;
            for row in 0..rows {
                match pick {
                    DevicePick::Greedy => b.argmax(logits, row, dims.vocab, tokens)?,
                    DevicePick::Sample(params) => b.sample(logits, row, dims.vocab, &params, sampler, tokens)?,
                }
            }
            Ok(())
        }
    }
}

/// The rows of one sequence inside a batch's buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeqRows {
    pub row0: usize,
    pub rows: usize,
}

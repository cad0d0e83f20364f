//! Qwen3 as Bonsai uses it (SPEC §2): its forward pass as a [`Program`] ([`forward_program`]),
//! run by whichever backend holds the weights.
//!
//! Per layer: `xn = rmsnorm(x)`, `qkv = xn·Wqkv`, per-head QK-norm + RoPE, cache K/V at the
//! sequence's position, causal GQA attention, `x += o·Wo`, `xn = rmsnorm(x)`,
//! `x += swiglu(xn·Wgate|up)·Wdown`; then the final norm and the LM head (`output`, or the tied
//! `token_embd`).

pub mod host_weights;
mod queued_decode;

use bonsai_gguf::{LayerKind, Qwen35Config, Qwen3Config, RopeScalingKind};
use bonsai_kernels::ops::sample_top_k::SampleParams;
pub use bonsai_kernels::ops::sample_rows::SeqPick;
use bonsai_kernels::ops::hadamard::VHeadPerm;
use bonsai_kernels::ops::{kv_block_len, kv_table_len, HeadShape, Store, KV_BLOCK};
use bonsai_kernels::rope::{RopeTable, YarnParams};

use crate::backend::Backend;
use crate::kv_blocks::KvBlocks;
use crate::program::{Act, Activations, Dims, MatrixId, Op, Program, RunEnv, Sequence, VectorId, Weights};
use crate::ModelError;
pub use host_weights::{HostLayer, HostWeights, TensorSource};

/// One layer's weights, by id.
#[derive(Clone, Copy, Debug)]
pub struct LayerIds {
    pub attn_norm: VectorId,
    pub qkv: MatrixId,
    pub q_norm: VectorId,
    pub k_norm: VectorId,
    pub attn_output: MatrixId,
    pub ffn_norm: VectorId,
    pub gate_up: MatrixId,
    pub down: MatrixId,
}

/// Every weight of a Qwen3 model, by id.
#[derive(Clone, Debug)]
pub struct ModelIds {
    pub token_embd: MatrixId,
    /// `output`, or `token_embd` when the embeddings are tied.
    pub head: MatrixId,
    pub output_norm: VectorId,
    pub layers: Vec<LayerIds>,
}

/// Which rows of a forward call get logits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LogitRows {
    /// Each sequence's last token (generation).
    Last,
    /// Every token (perplexity); needs a state built with `all_logits`.
    All,
}

/// The forward pass of a batch whose sequence b contributes `rows[b]` tokens: what Qwen3
/// computes, op by op.
pub fn forward_program(dims: Dims, ids: &ModelIds, rows: Vec<usize>, logits: LogitRows) -> Program {
    let mut p = Program::new(dims, rows);
    let mut op = |o| p.ops.push(o);
    op(Op::Embed { table: ids.token_embd, out: Act::X });
    for (layer, w) in ids.layers.iter().enumerate() {
        op(Op::RmsNorm { x: Act::X, weight: w.attn_norm, out: Act::Xn });
        op(Op::Matmul { w: w.qkv, x: Act::Xn, y: Act::Qkv, store: Store::Overwrite });
        op(Op::QkNormRope { qkv: Act::Qkv, q_norm: w.q_norm, k_norm: w.k_norm });
        op(Op::KvWrite { qkv: Act::Qkv, layer });
        op(Op::Attention { qkv: Act::Qkv, layer, out: Act::Attn });
        op(Op::Matmul { w: w.attn_output, x: Act::Attn, y: Act::X, store: Store::Add });
        op(Op::RmsNorm { x: Act::X, weight: w.ffn_norm, out: Act::Xn });
        op(Op::GateUpSwiglu { w: w.gate_up, x: Act::Xn, out: Act::Ffn });
        op(Op::Matmul { w: w.down, x: Act::Ffn, y: Act::X, store: Store::Add });
    }
    // The head reads every row, or each sequence's last one (the same rows when each has one).
    let head_in = match logits {
        LogitRows::Last if !p.one_row_each() => {
            p.ops.push(Op::LastRows { x: Act::X, out: Act::Last });
            Act::Last
        }
        _ => Act::X,
    };
    p.ops.push(Op::RmsNorm { x: head_in, weight: ids.output_norm, out: Act::Xn });
    p.ops.push(Op::Matmul { w: ids.head, x: Act::Xn, y: Act::Logits, store: Store::Overwrite });
    p.ops.push(Op::Advance);
    p
}

/// A loaded model: uploaded weights, the RoPE table for `max_seq` positions, and the backend.
/// It runs either architecture: Qwen3, or the qwen35 hybrid ([`crate::qwen35`]), whose
/// [`Qwen3::config`] is the geometry both share (stream, attention layers, vocabulary, context)
/// and whose full geometry is [`Qwen3::hybrid_config`].
pub struct Qwen3<B: Backend> {
    config: Qwen3Config,
    dims: Dims,
    max_seq: usize,
    backend: B,
    weights: Weights<B>,
    arch: Arch,
}

/// The architecture's weight ids and what a sequence's state holds.
enum Arch {
    Qwen3(ModelIds),
    Qwen35 { ids: crate::qwen35::ModelIds, config: Box<Qwen35Config> },
}

/// What a plan is compiled for: the sequences and their rows, the logits, the pick at the end.
#[derive(Clone, Debug, PartialEq)]
struct PlanKey {
    /// (sequence index, rows) in batch order.
    batch: Vec<(usize, usize)>,
    logits: LogitRows,
    pick: Option<DevicePick>,
}

/// Plans a state keeps (each holds the addresses of the state's buffers: a graph replays them).
const MAX_PLANS: usize = 16;

/// A batch state: its sequences (block table and position each), the KV pools they share and
/// which of their blocks are free, activation buffers for up to `max_batch` rows, token ids, the
/// sampler, and the plans compiled for it.
pub struct Qwen3State<B: Backend> {
    seqs: Vec<Sequence<B>>,
    /// One pool per attention layer.
    kv: Vec<B::KvPool>,
    blocks: KvBlocks,
    /// Host mirror of each sequence's position, for bounds checks only (never passed to an op).
    n_past: Vec<usize>,
    max_batch: usize,
    logit_rows: usize,
    acts: Activations<B>,
    plans: Vec<CachedPlan<B>>,
    /// What `acts.row_seqs` holds (written only when a per-sequence pick's batch changes).
    row_seqs_held: Vec<u32>,
}

/// A compiled plan, what it was compiled for, and whether it serves only those sequences.
struct CachedPlan<B: Backend> {
    key: PlanKey,
    binds_sequences: bool,
    plan: B::Plan,
}

impl PlanKey {
    /// Whether a plan compiled for `self` runs `other`: the same rows, logits and pick, and the
    /// same sequences where the plan binds them.
    fn serves(&self, other: &PlanKey, binds_sequences: bool) -> bool {
        let rows = |k: &PlanKey| k.batch.iter().map(|&(_, rows)| rows).collect::<Vec<_>>();
        self.logits == other.logits
            && self.pick == other.pick
            && if binds_sequences { self.batch == other.batch } else { rows(self) == rows(other) }
    }
}

/// How the backend picks the next token from the last logits without the host.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DevicePick {
    /// argmax (ties to the lowest id).
    Greedy,
    /// `bonsai_kernels::ops::sample_top_k` with the state's generator.
    Sample(SampleParams),
    /// Each sequence with its own setting and generator ([`Qwen3::set_sequence_pick`];
    /// `bonsai_kernels::ops::sample_rows`): the batched server's picks.
    PerSequence,
}

impl<B: Backend> Qwen3State<B> {
    /// Tokens already in the first sequence's KV cache.
    pub fn n_past(&self) -> usize {
        self.n_past[0]
    }
    /// Tokens already in sequence `seq`'s KV cache.
    pub fn n_past_of(&self, seq: usize) -> usize {
        self.n_past[seq]
    }
    pub fn max_batch(&self) -> usize {
        self.max_batch
    }
    /// KV blocks free for new tokens, and the pools' total.
    pub fn kv_blocks(&self) -> (usize, usize) {
        (self.blocks.free(), self.blocks.total())
    }
    /// KV blocks sequence `seq` holds (some maybe shared with others).
    pub fn kv_blocks_of(&self, seq: usize) -> usize {
        self.seqs[seq].blocks.len()
    }
    /// Sequences the state holds.
    pub fn sequences(&self) -> usize {
        self.seqs.len()
    }
}

fn rope_scaling(config: &Qwen3Config) -> Result<Option<YarnParams>, ModelError> {
    match &config.rope_scaling {
        None => Ok(None),
        Some(s) if s.kind == RopeScalingKind::Yarn => Ok(Some(YarnParams {
            factor: s.factor,
            original_context_len: s.original_context_len,
            beta_fast: s.beta_fast,
            beta_slow: s.beta_slow,
        })),
        Some(s) => Err(ModelError::Unsupported(format!("RoPE scaling {:?} (only YaRN is implemented)", s.kind))),
    }
}

/// Uploads weights and hands out their ids.
struct Uploader<'a, B: Backend> {
    backend: &'a B,
    matrices: Vec<B::Matrix>,
    vectors: Vec<B::Buffer>,
}

impl<B: Backend> Uploader<'_, B> {
    fn matrix(&mut self, m: &bonsai_kernels::QMatrix) -> Result<MatrixId, ModelError> {
        self.matrices.push(self.backend.upload_matrix(m)?);
        Ok(MatrixId(self.matrices.len() - 1))
    }
    fn vector(&mut self, v: &[f32]) -> Result<VectorId, ModelError> {
        self.vectors.push(self.backend.upload_f32(v)?);
        Ok(VectorId(self.vectors.len() - 1))
    }
}

impl<B: Backend> Qwen3<B> {
    /// Uploads `host` (consumed, so host memory is freed as it goes) for contexts of up to
    /// `max_seq` tokens.
    pub fn new(backend: B, config: Qwen3Config, host: HostWeights, max_seq: usize) -> Result<Self, ModelError> {
        if max_seq == 0 {
            return Err(ModelError::Unsupported("a context of 0 tokens".into()));
        }
        let shape = HeadShape { n_q: config.n_q_heads, n_kv: config.n_kv_heads, head_dim: config.head_dim };
        shape.validate("qwen3").map_err(crate::backend::BackendError::from)?;
        let yarn = rope_scaling(&config)?;
        let table = RopeTable::new(config.head_dim, max_seq, config.rope_theta, yarn.as_ref());
        let plan = crate::backend::MemoryPlan::for_weights(&config, &host, max_seq, crate::backend::memory_plan::PLANNED_MAX_BATCH);
        backend.reserve(&plan)?;
        let rope = backend.upload_rope(&table)?;
        let mut up = Uploader { backend: &backend, matrices: Vec::new(), vectors: Vec::new() };
        let mut layers = Vec::with_capacity(host.layers.len());
        for l in host.layers {
            layers.push(LayerIds {
                attn_norm: up.vector(&l.attn_norm)?,
                qkv: up.matrix(&l.qkv)?,
                q_norm: up.vector(&l.q_norm)?,
                k_norm: up.vector(&l.k_norm)?,
                attn_output: up.matrix(&l.attn_output)?,
                ffn_norm: up.vector(&l.ffn_norm)?,
                gate_up: up.matrix(&l.gate_up)?,
                down: up.matrix(&l.down)?,
            });
        }
        let output = host.output.as_ref().map(|m| up.matrix(m)).transpose()?;
        let token_embd = up.matrix(&host.token_embd)?;
        let output_norm = up.vector(&host.output_norm)?;
        let ids = ModelIds { token_embd, head: output.unwrap_or(token_embd), output_norm, layers };
        let weights = Weights { matrices: up.matrices, vectors: up.vectors, rope };
        let dims = Dims { hidden: config.hidden, ffn: config.ffn, vocab: config.vocab, shape, eps: config.rms_eps, hybrid: None };
        Ok(Self { config, dims, max_seq, backend, weights, arch: Arch::Qwen3(ids) })
    }

    /// Uploads a qwen35 model's `host` weights for contexts of up to `max_seq` tokens.
    pub fn new_qwen35(
        backend: B,
        config: Qwen35Config,
        host: crate::qwen35::HostWeights,
        max_seq: usize,
    ) -> Result<Self, ModelError> {
        use crate::qwen35::{AttentionIds, Fold, HostMixer, LayerIds as HybridLayerIds, MixerIds, RecurrentIds};
        if max_seq == 0 {
            return Err(ModelError::Unsupported("a context of 0 tokens".into()));
        }
        let dims = crate::qwen35::dims(&config);
        dims.shape.validate("qwen35").map_err(crate::backend::BackendError::from)?;
        // The table is as wide as the rotated dims (partial RoPE).
        let rope = backend.upload_rope(&RopeTable::new(config.rot_dims, max_seq, config.rope_theta, None))?;
        let mut up = Uploader { backend: &backend, matrices: Vec::new(), vectors: Vec::new() };
        let mut signs = crate::qwen35::SignIds::new();
        let (block, folds) = match &host.hadamard {
            Some(h) => {
                for (&width, s) in &h.signs {
                    signs.insert(width, up.vector(s)?);
                }
                (h.block, Some(h))
            }
            None => (0, None),
        };
        let fold = |on: bool, width: usize| -> Result<Option<Fold>, ModelError> {
            if !on {
                return Ok(None);
            }
            let signs = signs.get(&width).copied().ok_or_else(|| {
                ModelError::Unsupported(format!("the Hadamard fold has no sign vector for width {width}"))
            })?;
            Ok(Some(Fold { signs, width }))
        };
        let (hidden, value_dim, q_len) = (config.hidden, config.ssm_value_dim(), dims.shape.q_len());
        let (mut caches, mut slots) = (0, 0);
        let mut layers = Vec::with_capacity(host.layers.len());
        for (l, layer) in host.layers.into_iter().enumerate() {
            let f = folds.map(|h| h.layers[l]).unwrap_or_default();
            let (mixer, out_width) = match layer.mixer {
                HostMixer::Attention(a) => {
                    let ids = AttentionIds {
                        qkv: up.matrix(&a.qkv)?,
                        gate: up.matrix(&a.gate)?,
                        q_norm: up.vector(&a.q_norm)?,
                        k_norm: up.vector(&a.k_norm)?,
                        output: up.matrix(&a.output)?,
                        cache: caches,
                    };
                    caches += 1;
                    (MixerIds::Attention(ids), q_len)
                }
                HostMixer::Recurrent(r) => {
                    let ids = RecurrentIds {
                        qkv: up.matrix(&r.qkv)?,
                        z: up.matrix(&r.z)?,
                        alpha: up.vector(&r.alpha)?,
                        beta: up.vector(&r.beta)?,
                        conv: up.vector(&r.conv)?,
                        dt_bias: up.vector(&r.dt_bias)?,
                        ssm_a: up.vector(&r.ssm_a)?,
                        norm: up.vector(&r.norm)?,
                        out: up.matrix(&r.out)?,
                        slot: slots,
                    };
                    slots += 1;
                    (MixerIds::Recurrent(ids), value_dim)
                }
            };
            layers.push(HybridLayerIds {
                attn_norm: up.vector(&layer.attn_norm)?,
                mixer,
                post_norm: up.vector(&layer.post_norm)?,
                gate_up: up.matrix(&layer.gate_up)?,
                down: up.matrix(&layer.down)?,
                mixer_in: fold(f.mixer_in, hidden)?,
                mixer_out: fold(f.mixer_out, out_width)?,
                ffn_in: fold(f.ffn_in, hidden)?,
                ffn_down: fold(f.ffn_down, config.ffn)?,
            });
        }
        let output = host.output.as_ref().map(|m| up.matrix(m)).transpose()?;
        let token_embd = up.matrix(&host.token_embd)?;
        let ids = crate::qwen35::ModelIds {
            token_embd,
            head: output.unwrap_or(token_embd),
            output_norm: up.vector(&host.output_norm)?,
            layers,
            block,
            embedding_inverse: fold(folds.is_some_and(|h| h.inverse_embedding), hidden)?,
            head_in: fold(folds.is_some_and(|h| h.head), hidden)?,
            ssm_out_perm: folds.filter(|h| h.ssm_out_grouped).map(|_| VHeadPerm {
                head_dim: config.ssm_head_dim,
                k_heads: config.ssm_k_heads,
                rep: config.ssm_v_heads / config.ssm_k_heads,
            }),
        };
        let weights = Weights { matrices: up.matrices, vectors: up.vectors, rope };
        let shared = Qwen3Config {
            n_layers: config.n_layers,
            hidden,
            ffn: config.ffn,
            n_q_heads: config.n_q_heads,
            n_kv_heads: config.n_kv_heads,
            head_dim: config.head_dim,
            vocab: config.vocab,
            context_len: config.context_len,
            rope_theta: config.rope_theta,
            rms_eps: config.rms_eps,
            rope_scaling: None,
            tied_embeddings: config.tied_embeddings,
        };
        Ok(Self { config: shared, dims, max_seq, backend, weights, arch: Arch::Qwen35 { ids, config: Box::new(config) } })
    }

    /// The qwen35 geometry (None for a Qwen3 model).
    pub fn hybrid_config(&self) -> Option<&Qwen35Config> {
        match &self.arch {
            Arch::Qwen3(_) => None,
            Arch::Qwen35 { config, .. } => Some(config),
        }
    }

    /// The program of one forward step.
    fn program(&self, rows: Vec<usize>, logits: LogitRows) -> Program {
        match &self.arch {
            Arch::Qwen3(ids) => forward_program(self.dims, ids, rows, logits),
            Arch::Qwen35 { ids, .. } => crate::qwen35::forward_program(self.dims, ids, rows, logits),
        }
    }

    pub fn config(&self) -> &Qwen3Config {
        &self.config
    }
    pub fn backend(&self) -> &B {
        &self.backend
    }
    pub fn max_seq(&self) -> usize {
        self.max_seq
    }

    /// A fresh state of one sequence for batches of up to `max_batch` tokens; `all_logits`
    /// sizes the logits buffer for [`LogitRows::All`].
    pub fn new_state(&self, max_batch: usize, all_logits: bool) -> Result<Qwen3State<B>, ModelError> {
        self.new_batch_state(1, max_batch, all_logits)
    }

    /// A fresh state of `sequences` independent sequences sharing activation buffers of
    /// `max_batch` rows, with KV pools that hold `max_seq` tokens for every sequence at once.
    pub fn new_batch_state(&self, sequences: usize, max_batch: usize, all_logits: bool) -> Result<Qwen3State<B>, ModelError> {
        let blocks = sequences.max(1) * kv_table_len(self.max_seq);
        self.new_pooled_state(sequences, max_batch, all_logits, blocks)
    }

    /// [`Self::new_batch_state`] with KV pools of `kv_blocks` blocks of KV_BLOCK tokens, which
    /// the sequences take as they grow (a forward call that finds none free fails with
    /// [`ModelError::KvFull`] before it runs).
    pub fn new_pooled_state(&self, sequences: usize, max_batch: usize, all_logits: bool, kv_blocks: usize) -> Result<Qwen3State<B>, ModelError> {
        let (b, d) = (&self.backend, &self.dims);
        let sequences = sequences.max(1);
        let max_batch = max_batch.max(sequences);
        let logit_rows = if all_logits { max_batch } else { sequences };
        let seqs = (0..sequences).map(|_| self.new_sequence()).collect::<Result<_, _>>()?;
        let kv = (0..self.attention_layers().0).map(|_| b.alloc_kv_pool(d.shape, kv_blocks)).collect::<Result<_, _>>()?;
        // The hybrid model's buffers; one-element placeholders for Qwen3 (a zero-length device
        // allocation is not portable).
        let hybrid = |act: Act| b.alloc((max_batch * d.row_len(act)).max(1));
        let acts = Activations {
            x: b.alloc(max_batch * d.hidden)?,
            xn: b.alloc(max_batch * d.hidden)?,
            qkv: b.alloc(max_batch * d.shape.qkv_row_len())?,
            attn: b.alloc(max_batch * d.shape.q_len())?,
            ffn: b.alloc(max_batch * d.ffn)?,
            last: b.alloc(sequences * d.hidden)?,
            logits: b.alloc(logit_rows * d.vocab)?,
            rot: hybrid(Act::Rot)?,
            attn_gate: hybrid(Act::AttnGate)?,
            attn_gated: hybrid(Act::AttnGated)?,
            mixed: hybrid(Act::Mixed)?,
            conv: hybrid(Act::Conv)?,
            z: hybrid(Act::Z)?,
            alpha: hybrid(Act::Alpha)?,
            beta: hybrid(Act::Beta)?,
            delta: hybrid(Act::Delta)?,
            gated: hybrid(Act::Gated)?,
            tokens: b.alloc_tokens(max_batch)?,
            sampler: b.new_sampler_state()?,
            row_seqs: b.alloc_tokens(sequences)?,
            seq_picks: b.new_seq_picks(sequences)?,
        };
        let blocks = KvBlocks::new(kv_blocks);
        Ok(Qwen3State { seqs, kv, blocks, n_past: vec![0; sequences], max_batch, logit_rows, acts, plans: Vec::new(), row_seqs_held: Vec::new() })
    }

    /// Forgets the first sequence's cached tokens past `n` (keeps the first `n`, e.g. a shared
    /// chat prefix).
    pub fn rewind(&self, state: &mut Qwen3State<B>, n: usize) -> Result<(), ModelError> {
        self.rewind_seq(state, 0, n)
    }

    /// The furthest point at most `wanted` that sequence `seq` can rewind to: `wanted` for
    /// Qwen3; for qwen35 (whose recurrent state keeps every token or none) the current length
    /// when `wanted` reaches it, else 0.
    pub fn rewind_point(&self, state: &Qwen3State<B>, seq: usize, wanted: usize) -> usize {
        match self.arch {
            Arch::Qwen3(_) => wanted,
            Arch::Qwen35 { .. } if wanted >= state.n_past[seq] => state.n_past[seq],
            Arch::Qwen35 { .. } => 0,
        }
    }

    /// The lengths of one recurrent layer's conv and DeltaNet states (qwen35), else None.
    fn recurrent_state_lens(&self) -> Option<(usize, usize)> {
        match (&self.arch, self.dims.hybrid) {
            (Arch::Qwen35 { config, .. }, Some(h)) => Some(((config.conv_kernel - 1) * h.conv_channels(), h.delta.state_len())),
            _ => None,
        }
    }

    /// Bytes one KV block takes across every attention layer's K and V pools.
    pub fn kv_block_bytes(&self) -> usize {
        self.attention_layers().0 * 2 * kv_block_len(self.dims.shape) * std::mem::size_of::<half::f16>()
    }

    /// The model's attention layers (each with a KV pool) and recurrent layers.
    fn attention_layers(&self) -> (usize, usize) {
        match &self.arch {
            Arch::Qwen3(ids) => (ids.layers.len(), 0),
            Arch::Qwen35 { config, .. } => {
                let attention = config.layers.iter().filter(|k| **k == LayerKind::FullAttention).count();
                (attention, config.layers.len() - attention)
            }
        }
    }

    /// A fresh sequence: no blocks, zero states, at position 0.
    fn new_sequence(&self) -> Result<Sequence<B>, ModelError> {
        let b = &self.backend;
        let recurrent_layers = self.attention_layers().1;
        let table = b.alloc_block_table(self.dims.shape, self.max_seq)?;
        let (mut conv, mut ssm) = (Vec::new(), Vec::new());
        if let Some((conv_len, ssm_len)) = self.recurrent_state_lens() {
            for _ in 0..recurrent_layers {
                conv.push(b.alloc(conv_len)?);
                ssm.push(b.alloc(ssm_len)?);
            }
        }
        Ok(Sequence { table, blocks: Vec::new(), conv, ssm, pos: b.new_position()? })
    }

    /// [`Self::rewind`] for sequence `seq`. A qwen35 sequence keeps recurrent states that hold
    /// every token so far, so it rewinds only to its start or not at all; a restart zeroes its
    /// conv and DeltaNet states in place (plans bound to its buffers stay valid). The KV blocks
    /// past the new end go back to the pools (rows past the position are never read).
    pub fn rewind_seq(&self, state: &mut Qwen3State<B>, seq: usize, n: usize) -> Result<(), ModelError> {
        let n = n.min(state.n_past[seq]);
        if matches!(self.arch, Arch::Qwen35 { .. }) && n != state.n_past[seq] {
            if n != 0 {
                return Err(ModelError::Unsupported(format!(
                    "rewinding a qwen35 sequence to token {n} of {}: its recurrent state cannot drop tokens (only a restart from 0)",
                    state.n_past[seq]
                )));
            }
            let sequence = &mut state.seqs[seq];
            for buf in sequence.conv.iter_mut().chain(sequence.ssm.iter_mut()) {
                self.backend.zero(buf)?;
            }
        }
        self.backend.set_position(&mut state.seqs[seq].pos, n)?;
        state.n_past[seq] = n;
        let Qwen3State { seqs, blocks, .. } = state;
        for block in seqs[seq].blocks.drain(kv_table_len(n)..) {
            blocks.release(block);
        }
        Ok(())
    }

    /// The most tokens of sequence `from`'s cache that [`Self::copy_prefix`] can give another
    /// sequence whose prompt shares `shared` tokens with it: `shared` for Qwen3; for qwen35 (whose
    /// recurrent state holds every token so far) all of `from`'s tokens when `shared` covers them,
    /// else 0.
    pub fn copy_point(&self, state: &Qwen3State<B>, from: usize, shared: usize) -> usize {
        let shared = shared.min(state.n_past[from]);
        match self.arch {
            Arch::Qwen3(_) => shared,
            Arch::Qwen35 { .. } if shared == state.n_past[from] => shared,
            Arch::Qwen35 { .. } => 0,
        }
    }

    /// Makes sequence `to` hold the first `tokens` tokens of sequence `from` (a shared prompt
    /// prefix, reused instead of recomputed) and sets its position there: `to` lets go of its own
    /// blocks and shares `from`'s (the one it will write into is copied first, see
    /// [`KvBlocks`]). `tokens` must be a [`Self::copy_point`]: a qwen35 sequence takes all of
    /// `from`'s tokens with its conv and DeltaNet states, copied.
    pub fn copy_prefix(&self, state: &mut Qwen3State<B>, from: usize, to: usize, tokens: usize) -> Result<(), ModelError> {
        let n_seqs = state.seqs.len();
        if from == to || from >= n_seqs || to >= n_seqs || tokens > state.n_past[from] {
            return Err(ModelError::Unsupported(format!(
                "copying {tokens} tokens from sequence {from} (holding {}) to {to} of {n_seqs}",
                state.n_past.get(from).copied().unwrap_or(0)
            )));
        }
        if self.copy_point(state, from, tokens) != tokens {
            return Err(ModelError::Unsupported(format!(
                "copying {tokens} of the {} tokens of a qwen35 sequence: its recurrent state holds all of them",
                state.n_past[from]
            )));
        }
        self.rewind_seq(state, to, 0)?;
        let Qwen3State { seqs, blocks, .. } = state;
        let (src, dst) = if from < to {
            let (head, tail) = seqs.split_at_mut(to);
            (&head[from], &mut tail[0])
        } else {
            let (head, tail) = seqs.split_at_mut(from);
            (&tail[0], &mut head[to])
        };
        let b = &self.backend;
        let shared = &src.blocks[..kv_table_len(tokens)];
        for &block in shared {
            blocks.share(block);
        }
        dst.blocks = shared.to_vec();
        b.write_block_table(&mut dst.table, 0, shared)?;
        if let Some((conv_len, ssm_len)) = self.recurrent_state_lens() {
            for (s, d) in src.conv.iter().zip(dst.conv.iter_mut()) {
                b.copy_rows(s, 0, 0, conv_len, d)?;
            }
            for (s, d) in src.ssm.iter().zip(dst.ssm.iter_mut()) {
                b.copy_rows(s, 0, 0, ssm_len, d)?;
            }
        }
        b.set_position(&mut dst.pos, tokens)?;
        state.n_past[to] = tokens;
        Ok(())
    }

    fn check_room(&self, state: &Qwen3State<B>, seq: usize, m: usize) -> Result<(), ModelError> {
        if state.n_past[seq] + m > self.max_seq {
            return Err(ModelError::ContextFull { need: state.n_past[seq] + m, ctx: self.max_seq });
        }
        Ok(())
    }

    /// Gives each `(seq, rows)` of `batch` the blocks its next `rows` positions fall in, so that
    /// the forward call writes only blocks it alone holds: a shared block it will write into is
    /// first copied to a block of its own; new blocks come from the free list. Checks the whole
    /// batch's need against the free blocks before taking any.
    fn reserve_blocks(&self, state: &mut Qwen3State<B>, batch: &[(usize, usize)]) -> Result<(), ModelError> {
        let Qwen3State { seqs, kv, blocks, n_past, .. } = state;
        let need: usize = batch
            .iter()
            .map(|&(seq, rows)| {
                let (held, start) = (&seqs[seq].blocks, n_past[seq]);
                let copy = held.get(start / KV_BLOCK).is_some_and(|&b| blocks.is_shared(b));
                kv_table_len(start + rows).saturating_sub(held.len()) + usize::from(copy)
            })
            .sum();
        if need > blocks.free() {
            return Err(ModelError::KvFull { need, free: blocks.free(), total: blocks.total(), block: KV_BLOCK });
        }
        let b = &self.backend;
        for &(seq, rows) in batch {
            let (sequence, start) = (&mut seqs[seq], n_past[seq]);
            let first = start / KV_BLOCK;
            if let Some(&old) = sequence.blocks.get(first).filter(|&&old| blocks.is_shared(old)) {
                let new = blocks.take().expect("counted above");
                for pool in kv.iter_mut() {
                    b.copy_kv_block(pool, self.dims.shape, old, new)?;
                }
                blocks.release(old);
                sequence.blocks[first] = new;
                b.write_block_table(&mut sequence.table, first, &[new])?;
            }
            let held = sequence.blocks.len();
            let fresh: Vec<u32> = (held..kv_table_len(start + rows)).map(|_| blocks.take().expect("counted above")).collect();
            if !fresh.is_empty() {
                b.write_block_table(&mut sequence.table, held, &fresh)?;
                sequence.blocks.extend(fresh);
            }
        }
        Ok(())
    }

    /// Runs `tokens` (at most `max_batch`) of the first sequence through the model at its
    /// position.
    pub fn forward_chunk(&self, state: &mut Qwen3State<B>, tokens: &[u32], rows: LogitRows) -> Result<(), ModelError> {
        self.forward_batch(state, &[(0, tokens)], rows)
    }

    /// Runs a batch: sequence `seq` takes `tokens` at its position, for each `(seq, tokens)` in
    /// `batch` (sequences in increasing order, at most `max_batch` tokens in all). Logits: each
    /// sequence's last token (row b for the batch's b-th sequence), or every token.
    pub fn forward_batch(&self, state: &mut Qwen3State<B>, batch: &[(usize, &[u32])], rows: LogitRows) -> Result<(), ModelError> {
        let key = self.batch_key(state, batch, rows, None)?;
        self.run_plan(state, key)
    }

    /// [`Self::forward_batch`] with each sequence's last logits, then `pick` of each on the
    /// backend: the next token of every sequence in batch order, with no logits downloaded. (A
    /// sequence still mid-prompt gets a pick too, which its caller ignores.)
    pub fn forward_batch_pick(&self, state: &mut Qwen3State<B>, batch: &[(usize, &[u32])], pick: DevicePick) -> Result<Vec<u32>, ModelError> {
        let key = self.batch_key(state, batch, LogitRows::Last, Some(pick))?;
        self.run_plan(state, key)?;
        let mut ids = vec![0u32; batch.len()];
        self.backend.read_tokens(&state.acts.tokens, &mut ids)?;
        ids.into_iter().map(|id| self.check_token(id)).collect()
    }

    /// Checks a batch against the state's capacity and writes its token ids; the plan key.
    fn batch_key(&self, state: &mut Qwen3State<B>, batch: &[(usize, &[u32])], rows: LogitRows, pick: Option<DevicePick>) -> Result<PlanKey, ModelError> {
        let total: usize = batch.iter().map(|(_, t)| t.len()).sum();
        if batch.is_empty() || batch.iter().any(|(_, t)| t.is_empty()) || total > state.max_batch {
            return Err(ModelError::Unsupported(format!(
                "a forward call of {total} tokens in {} sequences (batch capacity {} tokens, none empty)",
                batch.len(),
                state.max_batch
            )));
        }
        if rows == LogitRows::All && total > state.logit_rows {
            return Err(ModelError::Unsupported("all-row logits on a state built without all_logits".into()));
        }
        let ids: Vec<u32> = batch.iter().flat_map(|(_, t)| t.iter().copied()).collect();
        self.backend.write_tokens(&mut state.acts.tokens, &ids)?;
        Ok(PlanKey { batch: batch.iter().map(|(s, t)| (*s, t.len())).collect(), logits: rows, pick })
    }

    /// Prefills a prompt of any length into the first sequence, in chunks of `max_batch`;
    /// logits of its last token.
    pub fn prefill(&self, state: &mut Qwen3State<B>, tokens: &[u32]) -> Result<(), ModelError> {
        self.check_room(state, 0, tokens.len())?;
        for chunk in tokens.chunks(state.max_batch) {
            self.forward_chunk(state, chunk, LogitRows::Last)?;
        }
        Ok(())
    }

    /// The plan for `key` in `state` (compiled on first use) and its index.
    fn plan_index(&self, state: &mut Qwen3State<B>, key: &PlanKey) -> Result<usize, ModelError> {
        if let Some(i) = state.plans.iter().position(|c| c.key.serves(key, c.binds_sequences)) {
            return Ok(i);
        }
        let mut program = self.program(key.batch.iter().map(|&(_, rows)| rows).collect(), key.logits);
        if let Some(pick) = key.pick {
            program.ops.push(Op::Pick(pick));
        }
        let plan = self.backend.compile(program, &self.weights)?;
        if state.plans.len() >= MAX_PLANS {
            state.plans.remove(0);
        }
        let binds_sequences = self.backend.plan_binds_sequences(&plan);
        state.plans.push(CachedPlan { key: key.clone(), binds_sequences, plan });
        Ok(state.plans.len() - 1)
    }

    /// Runs the plan for `key` (its sequences must have room for their rows).
    fn run_plan(&self, state: &mut Qwen3State<B>, key: PlanKey) -> Result<(), ModelError> {
        let seqs = state.seqs.len();
        if key.batch.iter().any(|&(s, _)| s >= seqs) || key.batch.windows(2).any(|w| w[0].0 >= w[1].0) {
            return Err(ModelError::Unsupported(format!(
                "a batch of sequences {:?} (the state holds {seqs}; each once, in increasing order)",
                key.batch.iter().map(|&(s, _)| s).collect::<Vec<_>>()
            )));
        }
        for &(seq, rows) in &key.batch {
            self.check_room(state, seq, rows)?;
        }
        self.reserve_blocks(state, &key.batch)?;
        if key.pick == Some(DevicePick::PerSequence) {
            let row_seqs: Vec<u32> = key.batch.iter().map(|&(s, _)| s as u32).collect();
            self.hold_row_seqs(state, &row_seqs)?;
        }
        let index = self.plan_index(state, &key)?;
        let Qwen3State { seqs, kv, acts, plans, n_past, .. } = state;
        let mut chosen: Vec<&mut Sequence<B>> = Vec::with_capacity(key.batch.len());
        let mut wanted = key.batch.iter().map(|&(s, _)| s).peekable();
        for (s, seq) in seqs.iter_mut().enumerate() {
            if wanted.peek() == Some(&s) {
                wanted.next();
                chosen.push(seq);
            }
        }
        let mut env = RunEnv { weights: &self.weights, acts, seqs: chosen, kv };
        self.backend.run(&mut plans[index].plan, &mut env)?;
        for &(seq, rows) in &key.batch {
            n_past[seq] += rows;
        }
        Ok(())
    }

    /// What the backend runs for a one-sequence step of `rows` tokens (a decode step with a
    /// device pick when `pick` is given), for users (`bonsai bench -v`).
    pub fn describe_plan(&self, state: &mut Qwen3State<B>, rows: usize, pick: Option<DevicePick>) -> Result<String, ModelError> {
        let key = PlanKey { batch: vec![(0, rows)], logits: LogitRows::Last, pick };
        let index = self.plan_index(state, &key)?;
        Ok(self.backend.describe_plan(&state.plans[index].plan))
    }

    /// What the backend runs for a decode step of every sequence of `state` (one row each), with
    /// `pick` on the device.
    pub fn describe_batch_plan(&self, state: &mut Qwen3State<B>, pick: DevicePick) -> Result<String, ModelError> {
        let key = PlanKey { batch: (0..state.n_past.len()).map(|s| (s, 1)).collect(), logits: LogitRows::Last, pick: Some(pick) };
        let index = self.plan_index(state, &key)?;
        Ok(self.backend.describe_plan(&state.plans[index].plan))
    }

    /// Sets the token the next [`Self::forward_decode`] consumes.
    pub fn set_next_token(&self, state: &mut Qwen3State<B>, id: u32) -> Result<(), ModelError> {
        Ok(self.backend.write_tokens(&mut state.acts.tokens, &[id])?)
    }

    /// Greedy pick on the backend: the argmax of the last logits becomes the next input token.
    pub fn argmax_to_next_token(&self, state: &mut Qwen3State<B>) -> Result<u32, ModelError> {
        self.pick_to_next_token(state, DevicePick::Greedy)
    }

    /// Picks from the last logits on the backend; the id becomes the next input token.
    pub fn pick_to_next_token(&self, state: &mut Qwen3State<B>, pick: DevicePick) -> Result<u32, ModelError> {
        if pick == DevicePick::PerSequence {
            self.hold_row_seqs(state, &[0])?;
        }
        let Activations { logits, tokens, sampler, row_seqs, seq_picks, .. } = &mut state.acts;
        match pick {
            DevicePick::Greedy => self.backend.argmax(logits, 0, self.dims.vocab, tokens)?,
            DevicePick::Sample(params) => self.backend.sample(logits, 0, self.dims.vocab, &params, sampler, tokens)?,
            DevicePick::PerSequence => self.backend.pick_rows(logits, 1, self.dims.vocab, row_seqs, seq_picks, tokens)?,
        }
        let mut id = [0u32];
        self.backend.read_tokens(&state.acts.tokens, &mut id)?;
        self.check_token(id[0])
    }

    /// Makes the state's row table name `row_seqs` (a copy only when it changed).
    fn hold_row_seqs(&self, state: &mut Qwen3State<B>, row_seqs: &[u32]) -> Result<(), ModelError> {
        if state.row_seqs_held != row_seqs {
            self.backend.write_tokens(&mut state.acts.row_seqs, row_seqs)?;
            state.row_seqs_held = row_seqs.to_vec();
        }
        Ok(())
    }

    /// Sets how sequence `seq` picks under [`DevicePick::PerSequence`] and its generator state
    /// (`Xoshiro256::state`; a greedy pick does not use it). On a GPU a sampled top-k must be in
    /// 1..=MAX_DEVICE_TOP_K (`Sampler::device_pick` says whether settings fit).
    pub fn set_sequence_pick(&self, state: &mut Qwen3State<B>, seq: usize, pick: SeqPick, rng: [u64; 4]) -> Result<(), ModelError> {
        if seq >= state.seqs.len() {
            return Err(ModelError::Unsupported(format!("the pick of sequence {seq} (the state holds {})", state.seqs.len())));
        }
        Ok(self.backend.set_seq_pick(&mut state.acts.seq_picks, seq, pick, rng)?)
    }

    /// Sequence `seq`'s per-sequence generator state after the draws so far (waits for them), to
    /// continue its draws on the host.
    pub fn sequence_pick_rng(&self, state: &Qwen3State<B>, seq: usize) -> Result<[u64; 4], ModelError> {
        if seq >= state.seqs.len() {
            return Err(ModelError::Unsupported(format!("the generator of sequence {seq} (the state holds {})", state.seqs.len())));
        }
        Ok(self.backend.seq_pick_rng(&state.acts.seq_picks, seq)?)
    }

    /// Loads the sampler's generator state (`Xoshiro256::state`) for [`DevicePick::Sample`].
    pub fn seed_sampler(&self, state: &mut Qwen3State<B>, rng: [u64; 4]) -> Result<(), ModelError> {
        Ok(self.backend.set_sampler_rng(&mut state.acts.sampler, rng)?)
    }

    /// The sampler's generator state after the draws so far (to continue on the host).
    pub fn sampler_rng(&self, state: &Qwen3State<B>) -> Result<[u64; 4], ModelError> {
        Ok(self.backend.sampler_rng(&state.acts.sampler)?)
    }

    /// One greedy decode step (see [`Self::decode_step`]).
    pub fn decode_greedy(&self, state: &mut Qwen3State<B>) -> Result<u32, ModelError> {
        self.decode_step(state, DevicePick::Greedy)
    }

    /// One decode step with the host out of the loop: the token in the backend token buffer goes
    /// through the model, `pick` replaces it on the device with the next one, and only its id
    /// comes back. The backend's plan for it may replay a recorded graph (CUDA).
    pub fn decode_step(&self, state: &mut Qwen3State<B>, pick: DevicePick) -> Result<u32, ModelError> {
        self.launch_decode_step(state, pick)?;
        let mut id = [0u32];
        self.backend.read_tokens(&state.acts.tokens, &mut id)?;
        self.check_token(id[0])
    }

    /// Queues one decode step (see [`Self::decode_step`]) without waiting for it.
    fn launch_decode_step(&self, state: &mut Qwen3State<B>, pick: DevicePick) -> Result<(), ModelError> {
        self.run_plan(state, PlanKey { batch: vec![(0, 1)], logits: LogitRows::Last, pick: Some(pick) })
    }

    /// A device pick returns an out-of-range id when no logit could be chosen (all NaN / -inf).
    fn check_token(&self, id: u32) -> Result<u32, ModelError> {
        if id as usize >= self.config.vocab {
            return Err(ModelError::Unsupported(format!("picking from the logits found no candidate (id {id})")));
        }
        Ok(id)
    }

    /// One decode step: the token in the backend token buffer, at the first sequence's position.
    pub fn forward_decode(&self, state: &mut Qwen3State<B>) -> Result<(), ModelError> {
        self.run_plan(state, PlanKey { batch: vec![(0, 1)], logits: LogitRows::Last, pick: None })
    }

    /// Copies logits row `row` of the last forward call (for [`LogitRows::Last`]: the batch's
    /// `row`-th sequence) to `out`.
    pub fn logits(&self, state: &Qwen3State<B>, row: usize, out: &mut [f32]) -> Result<(), ModelError> {
        let vocab = self.config.vocab;
        if out.len() != vocab || row >= state.logit_rows {
            return Err(ModelError::Unsupported(format!("logits row {row} into {} values", out.len())));
        }
        Ok(self.backend.download(&state.acts.logits, row * vocab, out)?)
    }
}

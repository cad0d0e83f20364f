//! Qwen3 as Bonsai uses it (SPEC §2), written once against [`Backend`].
//!
//! Per layer: `xn = rmsnorm(x)`, `qkv = xn·Wqkv`, per-head QK-norm + RoPE, cache K/V at the
//! backend position, causal GQA attention, `x += o·Wo`, `xn = rmsnorm(x)`,
//! `x += swiglu(xn·Wgate|up)·Wdown`; then the final norm and the LM head (`output`, or the tied
//! `token_embd`).

pub mod host_weights;
mod queued_decode;

use bonsai_gguf::{Qwen3Config, RopeScalingKind};
use bonsai_kernels::ops::sample_top_k::SampleParams;
use bonsai_kernels::ops::{HeadShape, Store};
use bonsai_kernels::rope::{RopeTable, YarnParams};

use crate::backend::{Backend, FinalHead, FirstQkv, LayerTail, NextLayer, TailBuffers, TailNext};
use crate::ModelError;
pub use host_weights::{HostLayer, HostWeights, TensorSource};

struct Layer<B: Backend> {
    attn_norm: B::Buffer,
    qkv: B::Matrix,
    q_norm: B::Buffer,
    k_norm: B::Buffer,
    attn_output: B::Matrix,
    ffn_norm: B::Buffer,
    gate_up: B::Matrix,
    down: B::Matrix,
}

impl<B: Backend> Layer<B> {
    /// This layer as the one a fused op starts on (its qkv projection and rope's inputs).
    fn as_next<'a>(&'a self, kv: &'a mut B::KvCache) -> NextLayer<'a, B> {
        NextLayer { attn_norm: &self.attn_norm, qkv: &self.qkv, q_norm: &self.q_norm, k_norm: &self.k_norm, kv }
    }
}

/// A loaded model: uploaded weights, the RoPE table for `max_seq` positions, and the backend.
pub struct Qwen3<B: Backend> {
    config: Qwen3Config,
    shape: HeadShape,
    max_seq: usize,
    backend: B,
    token_embd: B::Matrix,
    output: Option<B::Matrix>,
    output_norm: B::Buffer,
    layers: Vec<Layer<B>>,
    rope: B::Rope,
}

/// Which rows of a forward call get logits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogitRows {
    /// Only the last token (generation).
    Last,
    /// Every token (perplexity); needs a state built with `all_logits`.
    All,
}

/// Per-sequence state: KV cache, position, and activation buffers for up to `max_batch` tokens.
pub struct Qwen3State<B: Backend> {
    kv: Vec<B::KvCache>,
    pos: B::Position,
    /// Host mirror of the position, for bounds checks only (never passed to an op).
    n_past: usize,
    max_batch: usize,
    logit_rows: usize,
    tokens: B::Tokens,
    x: B::Buffer,
    xn: B::Buffer,
    qkv: B::Buffer,
    attn: B::Buffer,
    ffn: B::Buffer,
    last: B::Buffer,
    logits: B::Buffer,
    /// Where [`DevicePick::Sample`] draws (generator state on the backend).
    sampler: B::SamplerState,
    /// The backend's scratch for [`Backend::layer_tail`].
    tail_scratch: B::TailScratch,
    /// The recorded decode step and the pick it ends with (see [`Qwen3::decode_step`]); it holds
    /// the addresses of this state's buffers, so it lives and dies with them.
    decode_graph: Option<(DevicePick, B::Graph)>,
}

/// How the backend picks the next token from the last logits without the host.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DevicePick {
    /// argmax (ties to the lowest id).
    Greedy,
    /// `bonsai_kernels::ops::sample_top_k` with the state's generator.
    Sample(SampleParams),
}

impl<B: Backend> Qwen3State<B> {
    /// Tokens already in the KV cache.
    pub fn n_past(&self) -> usize {
        self.n_past
    }
    pub fn max_batch(&self) -> usize {
        self.max_batch
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
        let mut layers = Vec::with_capacity(host.layers.len());
        for l in host.layers {
            layers.push(Layer {
                attn_norm: backend.upload_f32(&l.attn_norm)?,
                qkv: backend.upload_matrix(&l.qkv)?,
                q_norm: backend.upload_f32(&l.q_norm)?,
                k_norm: backend.upload_f32(&l.k_norm)?,
                attn_output: backend.upload_matrix(&l.attn_output)?,
                ffn_norm: backend.upload_f32(&l.ffn_norm)?,
                gate_up: backend.upload_matrix(&l.gate_up)?,
                down: backend.upload_matrix(&l.down)?,
            });
        }
        let output = host.output.as_ref().map(|m| backend.upload_matrix(m)).transpose()?;
        Ok(Self {
            token_embd: backend.upload_matrix(&host.token_embd)?,
            output,
            output_norm: backend.upload_f32(&host.output_norm)?,
            layers,
            rope,
            config,
            shape,
            max_seq,
            backend,
        })
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

    /// A fresh sequence state for batches of up to `max_batch` tokens; `all_logits` sizes the
    /// logits buffer for [`LogitRows::All`].
    pub fn new_state(&self, max_batch: usize, all_logits: bool) -> Result<Qwen3State<B>, ModelError> {
        let b = &self.backend;
        let c = &self.config;
        let max_batch = max_batch.max(1);
        let logit_rows = if all_logits { max_batch } else { 1 };
        let kv = (0..c.n_layers).map(|_| b.alloc_kv_cache(self.shape, self.max_seq)).collect::<Result<_, _>>()?;
        Ok(Qwen3State {
            kv,
            pos: b.new_position()?,
            n_past: 0,
            max_batch,
            logit_rows,
            tokens: b.alloc_tokens(max_batch)?,
            x: b.alloc(max_batch * c.hidden)?,
            xn: b.alloc(max_batch * c.hidden)?,
            qkv: b.alloc(max_batch * self.shape.qkv_row_len())?,
            attn: b.alloc(max_batch * self.shape.q_len())?,
            ffn: b.alloc(max_batch * c.ffn)?,
            last: b.alloc(c.hidden)?,
            logits: b.alloc(logit_rows * c.vocab)?,
            sampler: b.new_sampler_state()?,
            tail_scratch: b.alloc_tail_scratch(c.hidden, c.ffn, self.shape)?,
            decode_graph: None,
        })
    }

    /// Forgets cached tokens past `n` (keeps the first `n`, e.g. a shared chat prefix).
    pub fn rewind(&self, state: &mut Qwen3State<B>, n: usize) -> Result<(), ModelError> {
        let n = n.min(state.n_past);
        self.backend.set_position(&mut state.pos, n)?;
        state.n_past = n;
        Ok(())
    }

    fn check_room(&self, state: &Qwen3State<B>, m: usize) -> Result<(), ModelError> {
        if state.n_past + m > self.max_seq {
            return Err(ModelError::ContextFull { need: state.n_past + m, ctx: self.max_seq });
        }
        Ok(())
    }

    /// Runs `tokens` (at most `max_batch`) through the model at the current position.
    pub fn forward_chunk(&self, state: &mut Qwen3State<B>, tokens: &[u32], rows: LogitRows) -> Result<(), ModelError> {
        if tokens.is_empty() || tokens.len() > state.max_batch {
            return Err(ModelError::Unsupported(format!(
                "a forward call of {} tokens (batch capacity {})",
                tokens.len(),
                state.max_batch
            )));
        }
        self.check_room(state, tokens.len())?;
        self.backend.write_tokens(&mut state.tokens, tokens)?;
        self.forward_rows(state, tokens.len(), rows)
    }

    /// Prefills a prompt of any length in chunks of `max_batch`; logits of its last token.
    pub fn prefill(&self, state: &mut Qwen3State<B>, tokens: &[u32]) -> Result<(), ModelError> {
        self.check_room(state, tokens.len())?;
        for chunk in tokens.chunks(state.max_batch) {
            self.forward_chunk(state, chunk, LogitRows::Last)?;
        }
        Ok(())
    }

    /// Sets the token the next [`Self::forward_decode`] consumes.
    pub fn set_next_token(&self, state: &mut Qwen3State<B>, id: u32) -> Result<(), ModelError> {
        Ok(self.backend.write_tokens(&mut state.tokens, &[id])?)
    }

    /// Greedy pick on the backend: the argmax of the last logits becomes the next input token.
    pub fn argmax_to_next_token(&self, state: &mut Qwen3State<B>) -> Result<u32, ModelError> {
        self.pick_to_next_token(state, DevicePick::Greedy)
    }

    /// Picks from the last logits on the backend; the id becomes the next input token.
    pub fn pick_to_next_token(&self, state: &mut Qwen3State<B>, pick: DevicePick) -> Result<u32, ModelError> {
        self.pick_op(state, pick)?;
        let mut id = [0u32];
        self.backend.read_tokens(&state.tokens, &mut id)?;
        self.check_token(id[0])
    }

    /// Loads the sampler's generator state (`Xoshiro256::state`) for [`DevicePick::Sample`].
    pub fn seed_sampler(&self, state: &mut Qwen3State<B>, rng: [u64; 4]) -> Result<(), ModelError> {
        Ok(self.backend.set_sampler_rng(&mut state.sampler, rng)?)
    }

    /// The sampler's generator state after the draws so far (to continue on the host).
    pub fn sampler_rng(&self, state: &Qwen3State<B>) -> Result<[u64; 4], ModelError> {
        Ok(self.backend.sampler_rng(&state.sampler)?)
    }

    /// One greedy decode step (see [`Self::decode_step`]).
    pub fn decode_greedy(&self, state: &mut Qwen3State<B>) -> Result<u32, ModelError> {
        self.decode_step(state, DevicePick::Greedy)
    }

    /// One decode step with the host out of the loop: the token in the backend token buffer goes
    /// through the model, `pick` replaces it on the device with the next one, and only its id
    /// comes back. Where the backend records graphs, the first call (and the first after `pick`
    /// changes) captures the step (embed, all layers, final norm, LM head, pick, position
    /// advance) and every call replays it.
    pub fn decode_step(&self, state: &mut Qwen3State<B>, pick: DevicePick) -> Result<u32, ModelError> {
        self.launch_decode_step(state, pick)?;
        let mut id = [0u32];
        self.backend.read_tokens(&state.tokens, &mut id)?;
        self.check_token(id[0])
    }

    /// Queues one decode step (see [`Self::decode_step`]) without waiting for it.
    fn launch_decode_step(&self, state: &mut Qwen3State<B>, pick: DevicePick) -> Result<(), ModelError> {
        self.check_room(state, 1)?;
        if self.backend.graphs_enabled() {
            if state.decode_graph.as_ref().is_none_or(|(recorded, _)| *recorded != pick) {
                state.decode_graph = None;
                let n_past = state.n_past;
                let captured = self.backend.capture(&mut || self.step_ops(state, pick));
                // Recording ran no kernel: the cache and position are as they were (also when
                // recording failed part-way).
                state.n_past = n_past;
                state.decode_graph = Some((pick, captured?));
            }
            let Qwen3State { decode_graph, pos, .. } = state;
            let (_, graph) = decode_graph.as_ref().ok_or_else(|| ModelError::Unsupported("decode graph missing".into()))?;
            self.backend.replay(graph, pos, 1)?;
            state.n_past += 1;
        } else {
            self.step_ops(state, pick)?;
        }
        Ok(())
    }

    fn step_ops(&self, state: &mut Qwen3State<B>, pick: DevicePick) -> Result<(), ModelError> {
        self.forward_rows(state, 1, LogitRows::Last)?;
        self.pick_op(state, pick)
    }

    fn pick_op(&self, state: &mut Qwen3State<B>, pick: DevicePick) -> Result<(), ModelError> {
        let vocab = self.config.vocab;
        match pick {
            DevicePick::Greedy => self.backend.argmax(&state.logits, vocab, &mut state.tokens)?,
            DevicePick::Sample(params) => {
                self.backend.sample(&state.logits, vocab, &params, &mut state.sampler, &mut state.tokens)?
            }
        }
        Ok(())
    }

    /// A device pick returns an out-of-range id when no logit could be chosen (all NaN / -inf).
    fn check_token(&self, id: u32) -> Result<u32, ModelError> {
        if id as usize >= self.config.vocab {
            return Err(ModelError::Unsupported(format!("picking from the logits found no candidate (id {id})")));
        }
        Ok(id)
    }

    /// One decode step: the token in the backend token buffer, at the backend position.
    pub fn forward_decode(&self, state: &mut Qwen3State<B>) -> Result<(), ModelError> {
        self.check_room(state, 1)?;
        self.forward_rows(state, 1, LogitRows::Last)
    }

    /// Copies logits row `row` of the last forward call (0 for [`LogitRows::Last`]) to `out`.
    pub fn logits(&self, state: &Qwen3State<B>, row: usize, out: &mut [f32]) -> Result<(), ModelError> {
        let vocab = self.config.vocab;
        if out.len() != vocab || row >= state.logit_rows {
            return Err(ModelError::Unsupported(format!("logits row {row} into {} values", out.len())));
        }
        Ok(self.backend.download(&state.logits, row * vocab, out)?)
    }

    fn forward_rows(&self, state: &mut Qwen3State<B>, m: usize, rows: LogitRows) -> Result<(), ModelError> {
        if rows == LogitRows::All && m > state.logit_rows {
            return Err(ModelError::Unsupported("all-row logits on a state built without all_logits".into()));
        }
        let (b, c, s) = (&self.backend, &self.config, self.shape);
        let st = state;
        // Whether this layer's qk_norm_rope_kv_write already ran (in the op before).
        let mut rope_done = match (self.layers.first(), st.kv.first_mut()) {
            (Some(first), Some(kv)) => b.first_qkv(FirstQkv {
                m,
                shape: s,
                hidden: c.hidden,
                eps: c.rms_eps,
                pos: &st.pos,
                rope: &self.rope,
                token_embd: &self.token_embd,
                tokens: &st.tokens,
                layer: first.as_next(kv),
                x: &mut st.x,
                xn: &mut st.xn,
                qkv: &mut st.qkv,
                scratch: &mut st.tail_scratch,
            })?,
            _ => {
                b.embed(&self.token_embd, &st.tokens, m, &mut st.x)?;
                false
            }
        };
        let head = self.output.as_ref().unwrap_or(&self.token_embd);
        // A one-token forward's last layer tail also computes the logits.
        let head_in_tail = m == 1 && rows == LogitRows::Last && !self.layers.is_empty();
        for (i, layer) in self.layers.iter().enumerate() {
            let (done, later) = st.kv.split_at_mut(i + 1);
            let kv = &mut done[i];
            if !rope_done {
                b.qk_norm_rope_kv_write(&mut st.qkv, m, s, &layer.q_norm, &layer.k_norm, c.rms_eps, &self.rope, &st.pos, kv)?;
            }
            // The rest of the layer, then the next layer's qkv projection or the logits.
            let next = match (self.layers.get(i + 1), later.first_mut()) {
                (Some(n), Some(kv)) => TailNext::Layer(n.as_next(kv)),
                _ if head_in_tail => {
                    TailNext::Head(FinalHead { output_norm: &self.output_norm, matrix: head, logits: &mut st.logits })
                }
                _ => TailNext::Nothing,
            };
            rope_done = b.layer_tail(LayerTail {
                m,
                shape: s,
                hidden: c.hidden,
                eps: c.rms_eps,
                pos: &st.pos,
                kv,
                attn_output: &layer.attn_output,
                ffn_norm: &layer.ffn_norm,
                gate_up: &layer.gate_up,
                down: &layer.down,
                next,
                rope: &self.rope,
                bufs: TailBuffers {
                    qkv: &mut st.qkv,
                    attn: &mut st.attn,
                    x: &mut st.x,
                    xn: &mut st.xn,
                    ffn: &mut st.ffn,
                    scratch: &mut st.tail_scratch,
                },
            })?;
        }
        match rows {
            _ if head_in_tail => {}
            LogitRows::All => {
                b.rms_norm(&st.x, m, c.hidden, &self.output_norm, c.rms_eps, &mut st.xn)?;
                b.matmul(head, &st.xn, m, &mut st.logits, Store::Overwrite)?;
            }
            LogitRows::Last => {
                b.copy_rows(&st.x, m - 1, 1, c.hidden, &mut st.last)?;
                b.rms_norm_matmul(&st.last, 1, c.hidden, &self.output_norm, c.rms_eps, &mut st.xn, head, &mut st.logits, Store::Overwrite)?;
            }
        }
        b.advance_position(&mut st.pos, m)?;
        st.n_past += m;
        Ok(())
    }
}

//! qwen35, the hybrid architecture of Bonsai 27B and Bonsai 2 (reference/bonsai2.md §3): Gated
//! DeltaNet layers with a recurrent state and gated full-attention layers with a KV cache, plus
//! Bonsai 2's blockwise signed Hadamard fold (§4), as a [`Program`] any backend runs.
//!
//! Per layer: `xn = rmsnorm(x; attn_norm)`, then
//! * attention: `q|k|v = xn·Wqkv`, `gate = xn·Wgate` (the gate rows of `attn_q`), per-head
//!   QK-norm + partial NeoX RoPE (the first `rot_dims` of each head), KV cache, causal GQA,
//!   `x += (attn ⊙ sigmoid(gate))·Wo`;
//! * DeltaNet: `mixed = xn·Wqkv`, `z = xn·Wz`, `alpha = xn·Wα`, `beta = xn·Wβ` (f32), the causal
//!   conv and SiLU with the conv state, the DeltaNet core with the recurrent state, gated RMSNorm
//!   with z, `x += y·Wout`;
//!
//! then `xn = rmsnorm(x; post_attention_norm)`, `x += swiglu(xn·Wgate|up)·Wdown`; the final norm
//! and the LM head. With a Hadamard fold, every folded matmul reads `BlockH(s ⊙ x)` of its input
//! (one transform per activation, shared by q|k|v|gate, qkv|z and gate|up; never alpha / beta;
//! ssm_out's input permuted tiled -> grouped first when the file says so), and the embedding rows
//! get `s ⊙ BlockH(z)` after the lookup.
//!
//! State per sequence (see [`crate::program::Sequence`]): a KV cache per attention layer only,
//! and per DeltaNet layer a conv state `(K-1) x conv_channels` and a DeltaNet state
//! `v_heads x d x d` (f32).

pub mod gguf_file;
pub mod host_weights;

use std::collections::BTreeMap;

use bonsai_gguf::Qwen35Config;
use bonsai_kernels::ops::gated_delta::DeltaShape;
use bonsai_kernels::ops::hadamard::VHeadPerm;
use bonsai_kernels::ops::{HeadShape, Store};

use crate::program::{Act, Dims, HybridDims, MatrixId, Op, Program, VectorId};
use crate::qwen3::LogitRows;
pub use host_weights::{HostHadamard, HostLayer, HostMixer, HostWeights, LayerFolds};

/// A folded matmul input: the sign vector of its width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fold {
    pub signs: VectorId,
    pub width: usize,
}

/// A gated attention layer's weights, by id; `cache` indexes the sequence's KV caches.
#[derive(Clone, Copy, Debug)]
pub struct AttentionIds {
    pub qkv: MatrixId,
    pub gate: MatrixId,
    pub q_norm: VectorId,
    pub k_norm: VectorId,
    pub output: MatrixId,
    pub cache: usize,
}

/// A DeltaNet layer's weights, by id; `slot` indexes the sequence's conv and DeltaNet states.
#[derive(Clone, Copy, Debug)]
pub struct RecurrentIds {
    pub qkv: MatrixId,
    pub z: MatrixId,
    pub alpha: VectorId,
    pub beta: VectorId,
    pub conv: VectorId,
    pub dt_bias: VectorId,
    pub ssm_a: VectorId,
    pub norm: VectorId,
    pub out: MatrixId,
    pub slot: usize,
}

#[derive(Clone, Copy, Debug)]
pub enum MixerIds {
    Attention(AttentionIds),
    Recurrent(RecurrentIds),
}

/// One layer: weights by id and the transforms its matmul inputs need.
#[derive(Clone, Copy, Debug)]
pub struct LayerIds {
    pub attn_norm: VectorId,
    pub mixer: MixerIds,
    pub post_norm: VectorId,
    pub gate_up: MatrixId,
    pub down: MatrixId,
    pub mixer_in: Option<Fold>,
    pub mixer_out: Option<Fold>,
    pub ffn_in: Option<Fold>,
    pub ffn_down: Option<Fold>,
}

/// Every weight of a qwen35 model, by id.
#[derive(Clone, Debug)]
pub struct ModelIds {
    pub token_embd: MatrixId,
    pub head: MatrixId,
    pub output_norm: VectorId,
    pub layers: Vec<LayerIds>,
    /// The Hadamard block (0 without a fold).
    pub block: usize,
    /// `s ⊙ BlockH(z)` after the embedding lookup.
    pub embedding_inverse: Option<Fold>,
    pub head_in: Option<Fold>,
    /// ssm_out's input is permuted tiled -> grouped before its transform.
    pub ssm_out_perm: Option<VHeadPerm>,
}

/// The dimensions of a qwen35 program.
pub fn dims(config: &Qwen35Config) -> Dims {
    let shape = HeadShape { n_q: config.n_q_heads, n_kv: config.n_kv_heads, head_dim: config.head_dim };
    let delta = DeltaShape { k_heads: config.ssm_k_heads, v_heads: config.ssm_v_heads, head_dim: config.ssm_head_dim };
    let max_rot_width = [config.hidden, config.ssm_value_dim(), shape.q_len(), config.ffn].into_iter().max().unwrap_or(0);
    Dims {
        hidden: config.hidden,
        ffn: config.ffn,
        vocab: config.vocab,
        shape,
        eps: config.rms_eps,
        hybrid: Some(HybridDims { delta, conv_kernel: config.conv_kernel, max_rot_width }),
    }
}

/// Sign vectors on the backend by width (see [`crate::qwen3::Qwen3::new_qwen35`]).
pub type SignIds = BTreeMap<usize, VectorId>;

/// The program builder's view of the transforms.
struct Builder {
    p: Program,
    block: usize,
}

impl Builder {
    fn op(&mut self, op: Op) {
        self.p.ops.push(op);
    }

    /// The activation a folded matmul reads: `x` itself, or `BlockH(s ⊙ P(x))` in [`Act::Rot`].
    fn fold_input(&mut self, x: Act, fold: Option<Fold>, perm: Option<VHeadPerm>) -> Act {
        let Some(f) = fold else { return x };
        let block = self.block;
        self.op(Op::Hadamard { x, out: Act::Rot, signs: f.signs, width: f.width, block, inverse: false, perm });
        Act::Rot
    }
}

/// The forward pass of a batch whose sequence b contributes `rows[b]` tokens.
pub fn forward_program(dims: Dims, ids: &ModelIds, rows: Vec<usize>, logits: LogitRows) -> Program {
    let mut b = Builder { p: Program::new(dims, rows), block: ids.block };
    match ids.embedding_inverse {
        None => b.op(Op::Embed { table: ids.token_embd, out: Act::X }),
        Some(f) => {
            b.op(Op::Embed { table: ids.token_embd, out: Act::Xn });
            let block = b.block;
            b.op(Op::Hadamard { x: Act::Xn, out: Act::X, signs: f.signs, width: f.width, block, inverse: true, perm: None });
        }
    }
    for w in &ids.layers {
        b.op(Op::RmsNorm { x: Act::X, weight: w.attn_norm, out: Act::Xn });
        let input = b.fold_input(Act::Xn, w.mixer_in, None);
        match w.mixer {
            MixerIds::Attention(a) => {
                b.op(Op::Matmul { w: a.qkv, x: input, y: Act::Qkv, store: Store::Overwrite });
                b.op(Op::Matmul { w: a.gate, x: input, y: Act::AttnGate, store: Store::Overwrite });
                b.op(Op::QkNormRope { qkv: Act::Qkv, q_norm: a.q_norm, k_norm: a.k_norm });
                b.op(Op::KvWrite { qkv: Act::Qkv, layer: a.cache });
                b.op(Op::Attention { qkv: Act::Qkv, layer: a.cache, out: Act::Attn });
                b.op(Op::SigmoidGate { x: Act::Attn, gate: Act::AttnGate, out: Act::AttnGated });
                let o = b.fold_input(Act::AttnGated, w.mixer_out, None);
                b.op(Op::Matmul { w: a.output, x: o, y: Act::X, store: Store::Add });
            }
            MixerIds::Recurrent(r) => {
                let (v_heads, hidden) = (dims.hybrid.map_or(0, |h| h.delta.v_heads), dims.hidden);
                b.op(Op::Matmul { w: r.qkv, x: input, y: Act::Mixed, store: Store::Overwrite });
                b.op(Op::Matmul { w: r.z, x: input, y: Act::Z, store: Store::Overwrite });
                // alpha and beta read the un-rotated normed hidden (never folded): one op for both.
                let (x, second) = (Act::Xn, Some((r.beta, Act::Beta)));
                b.op(Op::MatmulF32 { w: r.alpha, n: v_heads, k: hidden, x, y: Act::Alpha, second });
                b.op(Op::SsmConv { x: Act::Mixed, weight: r.conv, slot: r.slot, out: Act::Conv });
                b.op(Op::GatedDelta {
                    conv: Act::Conv,
                    alpha: Act::Alpha,
                    beta: Act::Beta,
                    ssm_a: r.ssm_a,
                    dt_bias: r.dt_bias,
                    slot: r.slot,
                    out: Act::Delta,
                });
                b.op(Op::GatedRmsNorm { x: Act::Delta, z: Act::Z, weight: r.norm, out: Act::Gated });
                let o = b.fold_input(Act::Gated, w.mixer_out, ids.ssm_out_perm);
                b.op(Op::Matmul { w: r.out, x: o, y: Act::X, store: Store::Add });
            }
        }
        b.op(Op::RmsNorm { x: Act::X, weight: w.post_norm, out: Act::Xn });
        let input = b.fold_input(Act::Xn, w.ffn_in, None);
        b.op(Op::GateUpSwiglu { w: w.gate_up, x: input, out: Act::Ffn });
        let down_in = b.fold_input(Act::Ffn, w.ffn_down, None);
        b.op(Op::Matmul { w: w.down, x: down_in, y: Act::X, store: Store::Add });
    }
    let head_in = match logits {
        LogitRows::Last if !b.p.one_row_each() => {
            b.op(Op::LastRows { x: Act::X, out: Act::Last });
            Act::Last
        }
        _ => Act::X,
    };
    b.op(Op::RmsNorm { x: head_in, weight: ids.output_norm, out: Act::Xn });
    let input = b.fold_input(Act::Xn, ids.head_in, None);
    b.op(Op::Matmul { w: ids.head, x: input, y: Act::Logits, store: Store::Overwrite });
    b.op(Op::Advance);
    b.p
}

//! qwen35 weights on the host in kernel layout, before upload (bonsai2.md §3.2): per attention
//! layer q|k|v fused (the gate rows of `attn_q`, interleaved per head in the file, split off into
//! their own matrix), per DeltaNet layer `attn_qkv`, `attn_gate`, `ssm_out` as quantized matrices,
//! `ssm_alpha` / `ssm_beta` (BF16 in Bonsai 2) as f32, conv / dt / a / norms f32; gate|up fused.
//! Where the file carries a Hadamard fold, records which input activations need the transform
//! and checks that the file's list is exactly what this model consumes.

use std::collections::{BTreeMap, BTreeSet};

use bonsai_gguf::keys::tensor as names;
use bonsai_gguf::{HadamardConfig, LayerKind, Qwen35Config};
use bonsai_kernels::weights::{Q1Matrix, Q2Matrix, Q1_WORDS, Q2_WORDS};
use bonsai_kernels::QMatrix;

use crate::qwen3::host_weights::{concat_rows, TensorSource};
use crate::ModelError;

/// A gated full-attention layer's mixer.
pub struct HostAttention {
    /// Rows [Q (n_q·hd) | K (n_kv·hd) | V (n_kv·hd)].
    pub qkv: QMatrix,
    /// The output gate rows of `attn_q` (n_q·hd), head-major.
    pub gate: QMatrix,
    pub q_norm: Vec<f32>,
    pub k_norm: Vec<f32>,
    pub output: QMatrix,
}

/// A Gated DeltaNet layer's mixer (V heads in the file's tiled order).
pub struct HostRecurrent {
    /// Rows [q | k | v] (conv channels).
    pub qkv: QMatrix,
    /// z (value_dim rows).
    pub z: QMatrix,
    /// `[v_heads, hidden]` f32.
    pub alpha: Vec<f32>,
    pub beta: Vec<f32>,
    /// `[channels, kernel]`.
    pub conv: Vec<f32>,
    pub dt_bias: Vec<f32>,
    pub ssm_a: Vec<f32>,
    pub norm: Vec<f32>,
    pub out: QMatrix,
}

pub enum HostMixer {
    Attention(HostAttention),
    Recurrent(HostRecurrent),
}

pub struct HostLayer {
    pub attn_norm: Vec<f32>,
    pub mixer: HostMixer,
    pub post_norm: Vec<f32>,
    /// Rows [gate (ffn) | up (ffn)].
    pub gate_up: QMatrix,
    pub down: QMatrix,
}

/// Which matmul inputs get the forward transform `BlockH(s ⊙ x)` (each true only if the file
/// folds every weight that reads that input).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LayerFolds {
    /// The normed hidden into q|k|v|gate (attention) or qkv|z (DeltaNet).
    pub mixer_in: bool,
    /// The attention output (into attn_output) or the gated DeltaNet output (into ssm_out).
    pub mixer_out: bool,
    /// The normed hidden into gate|up.
    pub ffn_in: bool,
    /// The SwiGLU activation into ffn_down.
    pub ffn_down: bool,
}

/// The Hadamard plan of a folded file: block, one sign vector per width, where to apply it.
pub struct HostHadamard {
    pub block: usize,
    pub signs: BTreeMap<usize, Vec<f32>>,
    pub layers: Vec<LayerFolds>,
    /// The embedding rows are stored rotated: `s ⊙ BlockH(z)` after the lookup.
    pub inverse_embedding: bool,
    /// The LM head's input gets the forward transform.
    pub head: bool,
    /// ssm_out's columns are grouped: permute tiled -> grouped before the transform.
    pub ssm_out_grouped: bool,
}

pub struct HostWeights {
    pub token_embd: QMatrix,
    /// `None` when the LM head is `token_embd`.
    pub output: Option<QMatrix>,
    pub output_norm: Vec<f32>,
    pub layers: Vec<HostLayer>,
    pub hadamard: Option<HostHadamard>,
}

fn tensor_error(name: &str, detail: String) -> ModelError {
    ModelError::Tensor { name: name.to_string(), detail }
}

/// The rows `rows` of `m`, in that order (each row's blocks are contiguous in kernel layout).
pub fn select_rows(name: &str, m: &QMatrix, rows: &[usize]) -> Result<QMatrix, ModelError> {
    let (n, k) = (m.n(), m.k());
    if let Some(&bad) = rows.iter().find(|&&r| r >= n) {
        return Err(tensor_error(name, format!("row {bad} of {n}")));
    }
    let shape = |e| tensor_error(name, format!("{e}"));
    let pick = |scales: &[half::f16], words: &[u32], words_per_block: usize| {
        let bpr = k / bonsai_kernels::weights::GROUP;
        let mut s = Vec::with_capacity(rows.len() * bpr);
        let mut w = Vec::with_capacity(rows.len() * bpr * words_per_block);
        for &r in rows {
            s.extend_from_slice(&scales[r * bpr..(r + 1) * bpr]);
            w.extend_from_slice(&words[r * bpr * words_per_block..(r + 1) * bpr * words_per_block]);
        }
        (s, w)
    };
    Ok(match m {
        QMatrix::Q1(q) => {
            let (s, w) = pick(&q.scales, &q.bits, Q1_WORDS);
            QMatrix::Q1(Q1Matrix::new(rows.len(), k, s, w).map_err(shape)?)
        }
        QMatrix::Q2(q) => {
            let (s, w) = pick(&q.scales, &q.codes, Q2_WORDS);
            QMatrix::Q2(Q2Matrix::new(rows.len(), k, s, w).map_err(shape)?)
        }
    })
}

/// Records the folded weights the model consumes, to compare with the file's list at the end.
struct FoldTracker<'a> {
    config: Option<&'a HadamardConfig>,
    consumed: BTreeSet<String>,
}

impl FoldTracker<'_> {
    /// Whether the weights `names`, read by one input activation, are folded: all or none.
    fn group(&mut self, names: &[String]) -> Result<bool, ModelError> {
        let Some(h) = self.config else { return Ok(false) };
        let folded: Vec<bool> = names.iter().map(|n| h.folds(n)).collect();
        if folded.iter().any(|&f| f != folded[0]) {
            return Err(ModelError::Unsupported(format!(
                "the Hadamard fold covers only some of {names:?}, which read one activation: all or none must be folded"
            )));
        }
        self.consumed.extend(names.iter().cloned());
        Ok(folded[0])
    }
}

impl HostWeights {
    /// Reads every tensor the config calls for (see the module doc).
    pub fn load(config: &Qwen35Config, mut src: impl TensorSource) -> Result<Self, ModelError> {
        let h = config.hidden;
        let hd = config.head_dim;
        let (q_rows, kv_rows) = (config.n_q_heads * hd, config.n_kv_heads * hd);
        let (channels, value_dim) = (config.ssm_conv_channels(), config.ssm_value_dim());
        let mut folds = FoldTracker { config: config.hadamard.as_ref(), consumed: BTreeSet::new() };
        let mut layers = Vec::with_capacity(config.n_layers);
        let mut layer_folds = Vec::with_capacity(config.n_layers);
        for (l, kind) in config.layers.iter().enumerate() {
            let t = |stem: &str| names::block(stem, l);
            let mut f = LayerFolds::default();
            let mixer = match kind {
                LayerKind::FullAttention => {
                    f.mixer_in = folds.group(&[t(names::ATTN_Q), t(names::ATTN_K), t(names::ATTN_V)])?;
                    f.mixer_out = folds.group(&[t(names::ATTN_OUTPUT)])?;
                    // attn_q rows: per head j, [q_j (hd) | gate_j (hd)].
                    let q_gate = src.matrix(&t(names::ATTN_Q), 2 * q_rows, h)?;
                    let head_rows = |offset: usize| -> Vec<usize> {
                        (0..config.n_q_heads).flat_map(|j| (0..hd).map(move |d| j * 2 * hd + offset + d)).collect()
                    };
                    let q = select_rows(&t(names::ATTN_Q), &q_gate, &head_rows(0))?;
                    let gate = select_rows(&t(names::ATTN_Q), &q_gate, &head_rows(hd))?;
                    let parts = vec![q, src.matrix(&t(names::ATTN_K), kv_rows, h)?, src.matrix(&t(names::ATTN_V), kv_rows, h)?];
                    HostMixer::Attention(HostAttention {
                        qkv: concat_rows(&format!("blk.{l}.attn_qkv (fused)"), parts)?,
                        gate,
                        q_norm: src.vector(&t(names::ATTN_Q_NORM), hd)?,
                        k_norm: src.vector(&t(names::ATTN_K_NORM), hd)?,
                        output: src.matrix(&t(names::ATTN_OUTPUT), h, q_rows)?,
                    })
                }
                LayerKind::Recurrent => {
                    f.mixer_in = folds.group(&[t(names::ATTN_QKV), t(names::ATTN_GATE)])?;
                    f.mixer_out = folds.group(&[t(names::SSM_OUT)])?;
                    let v_heads = config.ssm_v_heads;
                    HostMixer::Recurrent(HostRecurrent {
                        qkv: src.matrix(&t(names::ATTN_QKV), channels, h)?,
                        z: src.matrix(&t(names::ATTN_GATE), value_dim, h)?,
                        alpha: src.vector(&t(names::SSM_ALPHA), v_heads * h)?,
                        beta: src.vector(&t(names::SSM_BETA), v_heads * h)?,
                        conv: src.vector(&t(names::SSM_CONV1D), channels * config.conv_kernel)?,
                        dt_bias: src.vector(&names::ssm_dt_bias(l), v_heads)?,
                        ssm_a: src.vector(&names::ssm_a(l), v_heads)?,
                        norm: src.vector(&t(names::SSM_NORM), config.ssm_head_dim)?,
                        out: src.matrix(&t(names::SSM_OUT), h, value_dim)?,
                    })
                }
            };
            f.ffn_in = folds.group(&[t(names::FFN_GATE), t(names::FFN_UP)])?;
            f.ffn_down = folds.group(&[t(names::FFN_DOWN)])?;
            let gate_up = vec![src.matrix(&t(names::FFN_GATE), config.ffn, h)?, src.matrix(&t(names::FFN_UP), config.ffn, h)?];
            layers.push(HostLayer {
                attn_norm: src.vector(&t(names::ATTN_NORM), h)?,
                mixer,
                post_norm: src.vector(&t(names::POST_ATTENTION_NORM), h)?,
                gate_up: concat_rows(&format!("blk.{l}.ffn_gate_up (fused)"), gate_up)?,
                down: src.matrix(&t(names::FFN_DOWN), h, config.ffn)?,
            });
            layer_folds.push(f);
        }
        let output = if src.has(names::OUTPUT) { Some(src.matrix(names::OUTPUT, config.vocab, h)?) } else { None };
        let head_folded = match (&output, config.hadamard.as_ref()) {
            (Some(_), _) => folds.group(&[names::OUTPUT.to_string()])?,
            // Version 2: the rotated embedding table read forward-folded as the LM head.
            (None, Some(had)) => had.tied_output,
            (None, None) => false,
        };
        let hadamard = match config.hadamard.as_ref() {
            None => None,
            Some(had) => {
                if let Some(extra) = had.weight_names.difference(&folds.consumed).next() {
                    return Err(ModelError::Unsupported(format!(
                        "the Hadamard fold lists {extra}, which a qwen35 model does not read"
                    )));
                }
                if output.is_none() && had.inverse_token_embd && !had.tied_output {
                    return Err(ModelError::Unsupported(
                        "a rotated token_embd as the LM head needs prism.hadamard.version 2 (tied_output)".into(),
                    ));
                }
                let widths = [h, value_dim, q_rows, config.ffn];
                let signs = widths.iter().filter_map(|&w| had.sign_vector(w).map(|s| (w, s))).collect();
                Some(HostHadamard {
                    block: had.block,
                    signs,
                    layers: layer_folds,
                    inverse_embedding: had.inverse_token_embd,
                    head: head_folded,
                    ssm_out_grouped: had.gdn_v_grouped,
                })
            }
        };
        Ok(Self {
            token_embd: src.matrix(names::TOKEN_EMBD, config.vocab, h)?,
            output,
            output_norm: src.vector(names::OUTPUT_NORM, h)?,
            layers,
            hadamard,
        })
    }

    /// Bytes of weights read to decode one token (every matrix and f32 projection once, plus
    /// one embedding row).
    pub fn decode_bytes_per_token(&self) -> usize {
        let f32_bytes = |v: &Vec<f32>| v.len() * 4;
        let layer_bytes: usize = self
            .layers
            .iter()
            .map(|l| {
                let mixer = match &l.mixer {
                    HostMixer::Attention(a) => a.qkv.len_bytes() + a.gate.len_bytes() + a.output.len_bytes(),
                    HostMixer::Recurrent(r) => {
                        r.qkv.len_bytes() + r.z.len_bytes() + r.out.len_bytes() + f32_bytes(&r.alpha) + f32_bytes(&r.beta)
                    }
                };
                mixer + l.gate_up.len_bytes() + l.down.len_bytes()
            })
            .sum();
        let head = self.output.as_ref().unwrap_or(&self.token_embd).len_bytes();
        layer_bytes + head + self.token_embd.len_bytes() / self.token_embd.n().max(1)
    }
}

//! Qwen3 weights on the host in kernel layout, before upload: Q|K|V fused into one matrix
//! (rows [Q | K | V]) and gate|up fused (rows [gate | up]), from any [`TensorSource`] (a GGUF
//! file, or named tensors built in memory).

use bonsai_gguf::keys::tensor as names;
use bonsai_gguf::{GgufFile, Qwen3Config, TensorType, TwoBitLayout};
use bonsai_kernels::weights::{Q1Matrix, Q2Matrix};
use bonsai_kernels::QMatrix;

use crate::weights::{q1_from_q1_0_blocks, q2_from_level_blocks, q2_from_two_bit_blocks, TwoBitBlocks};
use crate::ModelError;

/// Where named tensors come from. Each tensor is taken once.
pub trait TensorSource {
    /// The `[n, k]` matrix `name` (GGUF shape `[k, n]`), converted to kernel layout.
    fn matrix(&mut self, name: &str, n: usize, k: usize) -> Result<QMatrix, ModelError>;
    /// The f32 vector `name` of length `len`.
    fn vector(&mut self, name: &str, len: usize) -> Result<Vec<f32>, ModelError>;
    /// Whether the source has a tensor of this name.
    fn has(&self, name: &str) -> bool;
}

fn tensor_error(name: &str, detail: String) -> ModelError {
    ModelError::Tensor { name: name.to_string(), detail }
}

impl TensorSource for &GgufFile {
    fn matrix(&mut self, name: &str, n: usize, k: usize) -> Result<QMatrix, ModelError> {
        let view = self.tensor(name).ok_or_else(|| tensor_error(name, "missing from the file".into()))?;
        let shape = &view.info.shape;
        if shape.as_slice() != [k as u64, n as u64] {
            return Err(tensor_error(name, format!("shape {shape:?}, expected [{k}, {n}] from the config")));
        }
        Ok(match view.info.ty {
            TensorType::Q1_0 => QMatrix::Q1(q1_from_q1_0_blocks(name, n, k, view.data)?),
            TensorType::TwoBit(TwoBitLayout::Tq2G128ScaleLast) => {
                QMatrix::Q2(q2_from_two_bit_blocks(name, TwoBitBlocks::TernaryScaleLast, n, k, view.data)?)
            }
            TensorType::TwoBit(TwoBitLayout::Pq2G128ScaleFirst) => {
                QMatrix::Q2(q2_from_two_bit_blocks(name, TwoBitBlocks::PrismScaleFirst, n, k, view.data)?)
            }
            TensorType::TwoBit(TwoBitLayout::Q2G64ScaleFirst) => {
                QMatrix::Q2(q2_from_two_bit_blocks(name, TwoBitBlocks::PairedG64, n, k, view.data)?)
            }
            ty @ (TensorType::Ptq1_0 | TensorType::Tq1_0 | TensorType::Tq2_0) => {
                QMatrix::Q2(q2_from_level_blocks(name, ty, n, k, view.data)?)
            }
            other => {
                return Err(tensor_error(
                    name,
                    format!(
                        "has type {}; linear weights must be Q1_0, a 2-bit type (Q2_0, PQ2_0) or a ternary one (PTQ1_0, TQ1_0, TQ2_0)",
                        other.name()
                    ),
                ))
            }
        })
    }

    fn vector(&mut self, name: &str, len: usize) -> Result<Vec<f32>, ModelError> {
        let view = self.tensor(name).ok_or_else(|| tensor_error(name, "missing from the file".into()))?;
        if view.info.n_elems() != len as u64 {
            return Err(tensor_error(name, format!("has {} elements, expected {len}", view.info.n_elems())));
        }
        Ok(view.dequantize_to_vec()?)
    }

    fn has(&self, name: &str) -> bool {
        self.tensor(name).is_some()
    }
}

/// One decoder layer, fused and in kernel layout.
pub struct HostLayer {
    pub attn_norm: Vec<f32>,
    /// Rows [Q (n_q·hd) | K (n_kv·hd) | V (n_kv·hd)], K = hidden.
    pub qkv: QMatrix,
    pub q_norm: Vec<f32>,
    pub k_norm: Vec<f32>,
    pub attn_output: QMatrix,
    pub ffn_norm: Vec<f32>,
    /// Rows [gate (ffn) | up (ffn)], K = hidden.
    pub gate_up: QMatrix,
    pub down: QMatrix,
}

pub struct HostWeights {
    pub token_embd: QMatrix,
    /// `None` when the LM head is tied to `token_embd`.
    pub output: Option<QMatrix>,
    pub output_norm: Vec<f32>,
    pub layers: Vec<HostLayer>,
}

/// Stacks matrices with the same K and type row-wise (their blocks are row-major, so this is a
/// concatenation of the scale and payload arrays).
pub fn concat_rows(name: &str, parts: Vec<QMatrix>) -> Result<QMatrix, ModelError> {
    let k = parts.first().map(QMatrix::k).unwrap_or(0);
    if parts.iter().any(|p| p.k() != k) {
        return Err(tensor_error(name, "fused parts have different K".into()));
    }
    let n: usize = parts.iter().map(QMatrix::n).sum();
    let mixed = || tensor_error(name, "fused parts mix 1-bit and 2-bit types; the fused kernel needs one".into());
    let shape = |e| ModelError::Tensor { name: name.to_string(), detail: format!("{e}") };
    let q1 = match parts.first() {
        Some(first) => matches!(first, QMatrix::Q1(_)),
        None => return Err(tensor_error(name, "nothing to fuse".into())),
    };
    let (mut scales, mut words) = (Vec::new(), Vec::new());
    for p in parts {
        let (s, w) = match p {
            QMatrix::Q1(p) if q1 => (p.scales, p.bits),
            QMatrix::Q2(p) if !q1 => (p.scales, p.codes),
            _ => return Err(mixed()),
        };
        scales.extend(s);
        words.extend(w);
    }
    let fused = if q1 {
        Q1Matrix::new(n, k, scales, words).map(QMatrix::Q1)
    } else {
        Q2Matrix::new(n, k, scales, words).map(QMatrix::Q2)
    };
    fused.map_err(shape)
}

impl HostWeights {
    /// Reads and fuses every tensor the config calls for.
    pub fn load(config: &Qwen3Config, mut src: impl TensorSource) -> Result<Self, ModelError> {
        let (h, hd) = (config.hidden, config.head_dim);
        let (q_rows, kv_rows) = (config.n_q_heads * hd, config.n_kv_heads * hd);
        let mut layers = Vec::with_capacity(config.n_layers);
        for l in 0..config.n_layers {
            let t = |stem: &str| names::block(stem, l);
            let qkv_parts = vec![
                src.matrix(&t(names::ATTN_Q), q_rows, h)?,
                src.matrix(&t(names::ATTN_K), kv_rows, h)?,
                src.matrix(&t(names::ATTN_V), kv_rows, h)?,
            ];
            let gate_up_parts =
                vec![src.matrix(&t(names::FFN_GATE), config.ffn, h)?, src.matrix(&t(names::FFN_UP), config.ffn, h)?];
            layers.push(HostLayer {
                attn_norm: src.vector(&t(names::ATTN_NORM), h)?,
                qkv: concat_rows(&format!("blk.{l}.attn_qkv (fused)"), qkv_parts)?,
                q_norm: src.vector(&t(names::ATTN_Q_NORM), hd)?,
                k_norm: src.vector(&t(names::ATTN_K_NORM), hd)?,
                attn_output: src.matrix(&t(names::ATTN_OUTPUT), h, q_rows)?,
                ffn_norm: src.vector(&t(names::FFN_NORM), h)?,
                gate_up: concat_rows(&format!("blk.{l}.ffn_gate_up (fused)"), gate_up_parts)?,
                down: src.matrix(&t(names::FFN_DOWN), h, config.ffn)?,
            });
        }
        let output = if src.has(names::OUTPUT) { Some(src.matrix(names::OUTPUT, config.vocab, h)?) } else { None };
        Ok(Self {
            token_embd: src.matrix(names::TOKEN_EMBD, config.vocab, h)?,
            output,
            output_norm: src.vector(names::OUTPUT_NORM, h)?,
            layers,
        })
    }

    /// Bytes of weights read to decode one token (every matrix once, plus one embedding row).
    pub fn decode_bytes_per_token(&self) -> usize {
        let layer_bytes: usize = self
            .layers
            .iter()
            .map(|l| l.qkv.len_bytes() + l.attn_output.len_bytes() + l.gate_up.len_bytes() + l.down.len_bytes())
            .sum();
        let head = self.output.as_ref().unwrap_or(&self.token_embd).len_bytes();
        layer_bytes + head + self.token_embd.len_bytes() / self.token_embd.n().max(1)
    }
}

//! Random-weight Qwen3 models built in memory: for tests (tiny), the built-in demo, and speed
//! measurements at real geometries (`bonsai bench --synthetic`). Deterministic per seed.
//!
//! Scales are drawn around 1/sqrt(K) so each matmul output stays O(1) for unit-RMS inputs (a
//! ±d dot product of K terms has standard deviation d·sqrt(K)); the residual stream is kept in
//! range by the RMSNorms, so logits are finite and varied, which is what the tests need.

use std::collections::HashMap;

use bonsai_gguf::{Qwen3Config, TensorType, TwoBitLayout};
use bonsai_kernels::weights::{Q1Matrix, Q2Matrix, GROUP, Q1_WORDS, Q2_WORDS};
use bonsai_kernels::QMatrix;
use half::f16;

use crate::qwen3::{HostWeights, TensorSource};
use crate::sampler::Rng;
use crate::weights::{normalise_ternary_codes, Q1_0_BLOCK_BYTES, Q2_G128_BLOCK_BYTES};
use crate::ModelError;

/// RoPE base of every Bonsai/Qwen3 file.
pub const QWEN3_ROPE_THETA: f64 = 1_000_000.0;
/// RMSNorm epsilon of every Bonsai/Qwen3 file.
pub const QWEN3_RMS_EPS: f32 = 1e-6;
/// Spread of random norm weights around 1.
const NORM_WEIGHT_SPREAD: f64 = 0.2;

/// Model dimensions (what a GGUF's `qwen3.*` keys say).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub n_layers: usize,
    pub hidden: usize,
    pub ffn: usize,
    pub n_q_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    pub vocab: usize,
    pub context_len: usize,
    /// No `output` tensor: the LM head reuses `token_embd`.
    pub tied_embeddings: bool,
}

impl Geometry {
    /// Bonsai-1.7B (SPEC §2).
    pub fn bonsai_1_7b() -> Self {
        Self { n_layers: 28, hidden: 2048, ffn: 6144, n_q_heads: 16, n_kv_heads: 8, head_dim: 128, vocab: 151_669, context_len: 32_768, tied_embeddings: true }
    }
    /// Bonsai-8B (SPEC §2).
    pub fn bonsai_8b() -> Self {
        Self { n_layers: 36, hidden: 4096, ffn: 12_288, n_q_heads: 32, n_kv_heads: 8, head_dim: 128, vocab: 151_669, context_len: 65_536, tied_embeddings: false }
    }
    /// Bonsai-4B (SPEC §2): tied embeddings.
    pub fn bonsai_4b() -> Self {
        Self { n_layers: 36, hidden: 2560, ffn: 9728, n_q_heads: 32, n_kv_heads: 8, head_dim: 128, vocab: 151_669, context_len: 32_768, tied_embeddings: true }
    }
    /// A few-layer model for fast tests and `bonsai bench --synthetic tiny`; head_dim 128 as every
    /// Bonsai model, so it takes the same decode kernels (attention with planes, the planes GEMVs).
    pub fn tiny() -> Self {
        Self { n_layers: 2, hidden: 256, ffn: 512, n_q_heads: 4, n_kv_heads: 2, head_dim: 128, vocab: 512, context_len: 1024, tied_embeddings: false }
    }
    /// A two-layer model of GQA group `group` (`group` query heads per kv head, 2 kv heads; 4 kv
    /// heads for group 1) and `head_dim`, with a hidden size, FFN width and vocabulary that are
    /// not those of any Bonsai model: the geometries the GPU must run as the CPU does.
    pub fn gqa_test(group: usize, head_dim: usize) -> Self {
        let n_kv_heads = if group == 1 { 4 } else { 2 };
        // Hidden sizes a multiple of 128 but not a power of two; vocabularies odd and unaligned.
        let (hidden, ffn, vocab) = match (group + head_dim / 64) % 3 {
            0 => (384, 768, 777),
            1 => (256, 640, 1003),
            _ => (512, 1152, 501),
        };
        Self { n_layers: 2, hidden, ffn, n_q_heads: group * n_kv_heads, n_kv_heads, head_dim, vocab, context_len: 1024, tied_embeddings: false }
    }
    /// The built-in demo: byte vocab (256 bytes + 3 ChatML specials).
    pub fn demo() -> Self {
        Self { n_layers: 4, hidden: 256, ffn: 768, n_q_heads: 4, n_kv_heads: 2, head_dim: 64, vocab: 259, context_len: 4096, tied_embeddings: false }
    }

    pub fn config(&self) -> Qwen3Config {
        Qwen3Config {
            n_layers: self.n_layers,
            hidden: self.hidden,
            ffn: self.ffn,
            n_q_heads: self.n_q_heads,
            n_kv_heads: self.n_kv_heads,
            head_dim: self.head_dim,
            vocab: self.vocab,
            context_len: self.context_len,
            rope_theta: QWEN3_ROPE_THETA,
            rms_eps: QWEN3_RMS_EPS,
            rope_scaling: None,
            tied_embeddings: self.tied_embeddings,
        }
    }
}

/// Which quantization the random linear weights use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightKind {
    /// Q1_0: ±d.
    OneBit,
    /// Ternary {-d, 0, +d} in the 2-bit kernel layout.
    Ternary,
    /// Q2_0's whole code set {-d, 0, +d, +2d}, every code equally likely: the +2d weights (code
    /// 3) keep every matrix off the binary GEMV (gemv_tc serves them one token at a time).
    TwoBit,
}

/// A named tensor held in memory.
pub enum MemTensor {
    Matrix(QMatrix),
    Vector(Vec<f32>),
}

/// Named tensors in memory, in insertion order; a [`TensorSource`].
#[derive(Default)]
pub struct MemoryTensors {
    pub order: Vec<String>,
    pub tensors: HashMap<String, MemTensor>,
}

impl MemoryTensors {
    fn insert(&mut self, name: String, t: MemTensor) {
        self.order.push(name.clone());
        self.tensors.insert(name, t);
    }

    fn take(&mut self, name: &str) -> Result<MemTensor, ModelError> {
        self.tensors.remove(name).ok_or_else(|| ModelError::Tensor { name: name.into(), detail: "missing".into() })
    }
}

fn wrong(name: &str, detail: String) -> ModelError {
    ModelError::Tensor { name: name.into(), detail }
}

impl TensorSource for MemoryTensors {
    fn matrix(&mut self, name: &str, n: usize, k: usize) -> Result<QMatrix, ModelError> {
        match self.take(name)? {
            MemTensor::Matrix(m) if m.n() == n && m.k() == k => Ok(m),
            MemTensor::Matrix(m) => Err(wrong(name, format!("is [{} x {}], expected [{n} x {k}]", m.n(), m.k()))),
            MemTensor::Vector(_) => Err(wrong(name, "is a vector, expected a matrix".into())),
        }
    }
    fn vector(&mut self, name: &str, len: usize) -> Result<Vec<f32>, ModelError> {
        match self.take(name)? {
            MemTensor::Vector(v) if v.len() == len => Ok(v),
            _ => Err(wrong(name, format!("expected a vector of {len}"))),
        }
    }
    fn has(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }
}

fn random_scales(rng: &mut Rng, n_blocks: usize, k: usize) -> Vec<f16> {
    let base = 1.0 / (k as f64).sqrt();
    (0..n_blocks).map(|_| f16::from_f64(base * (0.5 + rng.next_f64()))).collect()
}

pub fn random_matrix(rng: &mut Rng, kind: WeightKind, n: usize, k: usize) -> Result<QMatrix, ModelError> {
    if k % GROUP != 0 {
        return Err(ModelError::Unsupported(format!("a random matrix with K = {k} (not a multiple of {GROUP})")));
    }
    let n_blocks = n * (k / GROUP);
    let scales = random_scales(rng, n_blocks, k);
    let matrix = match kind {
        WeightKind::OneBit => {
            let bits = (0..n_blocks * Q1_WORDS).map(|_| rng.next_u64() as u32).collect();
            Q1Matrix::new(n, k, scales, bits).map(QMatrix::Q1)
        }
        WeightKind::Ternary => {
            let codes = (0..n_blocks * Q2_WORDS).map(|_| normalise_ternary_codes(rng.next_u64() as u32)).collect();
            Q2Matrix::new(n, k, scales, codes).map(QMatrix::Q2)
        }
        WeightKind::TwoBit => {
            let mut codes: Vec<u32> = (0..n_blocks * Q2_WORDS).map(|_| rng.next_u64() as u32).collect();
            codes[0] |= 3; // at least one +2d weight, whatever the draw
            Q2Matrix::new(n, k, scales, codes).map(QMatrix::Q2)
        }
    };
    matrix.map_err(|e| ModelError::Unsupported(format!("a random matrix [{n} x {k}]: {e}")))
}

fn random_norm(rng: &mut Rng, len: usize) -> Vec<f32> {
    (0..len).map(|_| (1.0 + NORM_WEIGHT_SPREAD * (rng.next_f64() - 0.5)) as f32).collect()
}

/// Every tensor of a Qwen3 file of this geometry, with random values (GGUF names).
pub fn random_tensors(g: &Geometry, kind: WeightKind, seed: u64) -> Result<MemoryTensors, ModelError> {
    use bonsai_gguf::keys::tensor as names;
    let mut rng = Rng::new(seed);
    let mut t = MemoryTensors::default();
    let (h, q, kv) = (g.hidden, g.n_q_heads * g.head_dim, g.n_kv_heads * g.head_dim);
    let embd = random_matrix(&mut rng, kind, g.vocab, h)?;
    t.insert(names::TOKEN_EMBD.into(), MemTensor::Matrix(embd));
    for l in 0..g.n_layers {
        let name = |stem: &str| names::block(stem, l);
        t.insert(name(names::ATTN_NORM), MemTensor::Vector(random_norm(&mut rng, h)));
        for (stem, n) in [(names::ATTN_Q, q), (names::ATTN_K, kv), (names::ATTN_V, kv)] {
            t.insert(name(stem), MemTensor::Matrix(random_matrix(&mut rng, kind, n, h)?));
        }
        t.insert(name(names::ATTN_Q_NORM), MemTensor::Vector(random_norm(&mut rng, g.head_dim)));
        t.insert(name(names::ATTN_K_NORM), MemTensor::Vector(random_norm(&mut rng, g.head_dim)));
        t.insert(name(names::ATTN_OUTPUT), MemTensor::Matrix(random_matrix(&mut rng, kind, h, q)?));
        t.insert(name(names::FFN_NORM), MemTensor::Vector(random_norm(&mut rng, h)));
        t.insert(name(names::FFN_GATE), MemTensor::Matrix(random_matrix(&mut rng, kind, g.ffn, h)?));
        t.insert(name(names::FFN_UP), MemTensor::Matrix(random_matrix(&mut rng, kind, g.ffn, h)?));
        t.insert(name(names::FFN_DOWN), MemTensor::Matrix(random_matrix(&mut rng, kind, h, g.ffn)?));
    }
    t.insert(names::OUTPUT_NORM.into(), MemTensor::Vector(random_norm(&mut rng, h)));
    if !g.tied_embeddings {
        t.insert(names::OUTPUT.into(), MemTensor::Matrix(random_matrix(&mut rng, kind, g.vocab, h)?));
    }
    Ok(t)
}

/// Fused host weights of a random model (what `Qwen3::new` uploads).
pub fn random_host_weights(g: &Geometry, kind: WeightKind, seed: u64) -> Result<HostWeights, ModelError> {
    HostWeights::load(&g.config(), random_tensors(g, kind, seed)?)
}

/// GGUF block bytes of a kernel-layout matrix (the inverse of `crate::weights`): Q1 -> Q1_0,
/// Q2 -> PrismML Q2_0 g128 (scale first, codes as they are), with the tensor type to write.
pub fn gguf_blocks(m: &QMatrix) -> (TensorType, Vec<u8>) {
    match m {
        QMatrix::Q1(m) => {
            let mut out = Vec::with_capacity(m.scales.len() * Q1_0_BLOCK_BYTES);
            for (d, words) in m.scales.iter().zip(m.bits.chunks_exact(Q1_WORDS)) {
                out.extend_from_slice(&d.to_le_bytes());
                words.iter().for_each(|w| out.extend_from_slice(&w.to_le_bytes()));
            }
            (TensorType::Q1_0, out)
        }
        QMatrix::Q2(m) => {
            let mut out = Vec::with_capacity(m.scales.len() * Q2_G128_BLOCK_BYTES);
            for (d, words) in m.scales.iter().zip(m.codes.chunks_exact(Q2_WORDS)) {
                out.extend_from_slice(&d.to_le_bytes());
                words.iter().for_each(|w| out.extend_from_slice(&w.to_le_bytes()));
            }
            (TensorType::TwoBit(TwoBitLayout::Pq2G128ScaleFirst), out)
        }
    }
}

//! Random-weight Qwen3 and qwen35 models built in memory: for tests (tiny), the built-in demo, and speed
//! measurements at real geometries (`bonsai bench --synthetic`). Deterministic per seed.
//!
//! Scales are drawn around 1/sqrt(K) so each matmul output stays O(1) for unit-RMS inputs (a
//! ±d dot product of K terms has standard deviation d·sqrt(K)); the residual stream is kept in
//! range by the RMSNorms, so logits are finite and varied, which is what the tests need.

use std::collections::HashMap;

use bonsai_gguf::{HadamardConfig, LayerKind, Qwen35Config, Qwen3Config, Signs, TensorType, TwoBitLayout};
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

/// The Hadamard block of Bonsai 2 (bonsai2.md §4.1).
pub const BONSAI2_HADAMARD_BLOCK: usize = 1024;

/// Bonsai 2 27B's geometry (bonsai2.md §3.1: 64 layers, every 4th full attention, hidden 5120,
/// FFN 17408, 24/4 heads of 256 with RoPE over 64 dims, DeltaNet 16 K / 48 V heads of 128) with
/// its Hadamard fold (block 1024, every foldable weight folded, signs drawn from `seed`).
pub fn bonsai2_27b_config(seed: u64) -> Qwen35Config {
    qwen35_config(Qwen35Shape { n_layers: 64, hidden: 5120, ffn: 17_408, n_q: 24, n_kv: 4, head_dim: 256, rot_dims: 64, ssm_head_dim: 128, k_heads: 16, v_heads: 48, vocab: 248_320, context_len: 262_144, block: BONSAI2_HADAMARD_BLOCK }, seed)
}

/// A four-layer qwen35 (three DeltaNet layers, one attention) with a Hadamard fold of block 128:
/// the golden tests' geometry with a larger vocabulary, for fast runs of the whole path.
pub fn qwen35_tiny_config(seed: u64) -> Qwen35Config {
    qwen35_config(Qwen35Shape { n_layers: 4, hidden: 256, ffn: 512, n_q: 4, n_kv: 2, head_dim: 64, rot_dims: 16, ssm_head_dim: 64, k_heads: 2, v_heads: 6, vocab: 512, context_len: 1024, block: 128 }, seed)
}

struct Qwen35Shape {
    n_layers: usize,
    hidden: usize,
    ffn: usize,
    n_q: usize,
    n_kv: usize,
    head_dim: usize,
    rot_dims: usize,
    ssm_head_dim: usize,
    k_heads: usize,
    v_heads: usize,
    vocab: usize,
    context_len: usize,
    block: usize,
}

fn qwen35_config(s: Qwen35Shape, seed: u64) -> Qwen35Config {
    use bonsai_gguf::keys::tensor as names;
    let layers: Vec<LayerKind> =
        (0..s.n_layers).map(|i| if (i + 1) % 4 == 0 { LayerKind::FullAttention } else { LayerKind::Recurrent }).collect();
    let mut rng = Rng::new(seed ^ 0x5167_a5a1);
    let value_dim = s.v_heads * s.ssm_head_dim;
    let signs = [s.hidden, value_dim, s.n_q * s.head_dim, s.ffn]
        .into_iter()
        .map(|w| (w, (0..w).map(|_| if rng.next_u64() & 1 == 1 { 1.0 } else { -1.0 }).collect()))
        .collect();
    let mut weight_names: std::collections::BTreeSet<String> = [names::OUTPUT.to_string()].into();
    for (l, kind) in layers.iter().enumerate() {
        let stems: &[&str] = match kind {
            LayerKind::FullAttention => &[names::ATTN_Q, names::ATTN_K, names::ATTN_V, names::ATTN_OUTPUT],
            LayerKind::Recurrent => &[names::ATTN_QKV, names::ATTN_GATE, names::SSM_OUT],
        };
        for stem in stems.iter().chain(&[names::FFN_GATE, names::FFN_UP, names::FFN_DOWN]) {
            weight_names.insert(names::block(stem, l));
        }
    }
    Qwen35Config {
        n_layers: s.n_layers,
        hidden: s.hidden,
        ffn: s.ffn,
        n_q_heads: s.n_q,
        n_kv_heads: s.n_kv,
        head_dim: s.head_dim,
        rot_dims: s.rot_dims,
        rope_sections: [s.rot_dims / 6 + 1, s.rot_dims / 6 + 1, s.rot_dims / 2 - 2 * (s.rot_dims / 6 + 1), 0],
        vocab: s.vocab,
        context_len: s.context_len,
        rope_theta: 1e7,
        rms_eps: QWEN3_RMS_EPS,
        conv_kernel: 4,
        ssm_head_dim: s.ssm_head_dim,
        ssm_k_heads: s.k_heads,
        ssm_v_heads: s.v_heads,
        layers,
        tied_embeddings: false,
        hadamard: Some(HadamardConfig {
            version: 1,
            block: s.block,
            signs: Signs::Explicit(signs),
            weight_names,
            inverse_token_embd: true,
            gdn_v_grouped: true,
            tied_output: false,
        }),
    }
}

fn uniform(rng: &mut Rng, len: usize, lo: f64, hi: f64) -> Vec<f32> {
    (0..len).map(|_| (lo + (hi - lo) * rng.next_f64()) as f32).collect()
}

/// Every tensor of a qwen35 file of `c`'s geometry with random values (GGUF names): ternary
/// matrices (the PQ2_0 / PTQ1_0 values of Bonsai 2), f32 alpha / beta, conv, gates and norms.
pub fn random_qwen35_tensors(c: &Qwen35Config, seed: u64) -> Result<MemoryTensors, ModelError> {
    use bonsai_gguf::keys::tensor as names;
    let mut rng = Rng::new(seed);
    let mut t = MemoryTensors::default();
    let kind = WeightKind::Ternary;
    let (h, hd, q) = (c.hidden, c.head_dim, c.n_q_heads * c.head_dim);
    let (channels, value_dim, v_heads) = (c.ssm_conv_channels(), c.ssm_value_dim(), c.ssm_v_heads);
    let matrix = |t: &mut MemoryTensors, rng: &mut Rng, name: String, n, k| -> Result<(), ModelError> {
        t.insert(name, MemTensor::Matrix(random_matrix(rng, kind, n, k)?));
        Ok(())
    };
    matrix(&mut t, &mut rng, names::TOKEN_EMBD.into(), c.vocab, h)?;
    for (l, layer) in c.layers.iter().enumerate() {
        let name = |stem: &str| names::block(stem, l);
        t.insert(name(names::ATTN_NORM), MemTensor::Vector(random_norm(&mut rng, h)));
        t.insert(name(names::POST_ATTENTION_NORM), MemTensor::Vector(random_norm(&mut rng, h)));
        match layer {
            LayerKind::FullAttention => {
                matrix(&mut t, &mut rng, name(names::ATTN_Q), 2 * q, h)?;
                matrix(&mut t, &mut rng, name(names::ATTN_K), c.n_kv_heads * hd, h)?;
                matrix(&mut t, &mut rng, name(names::ATTN_V), c.n_kv_heads * hd, h)?;
                matrix(&mut t, &mut rng, name(names::ATTN_OUTPUT), h, q)?;
                t.insert(name(names::ATTN_Q_NORM), MemTensor::Vector(random_norm(&mut rng, hd)));
                t.insert(name(names::ATTN_K_NORM), MemTensor::Vector(random_norm(&mut rng, hd)));
            }
            LayerKind::Recurrent => {
                let scale = 1.0 / (h as f64).sqrt();
                matrix(&mut t, &mut rng, name(names::ATTN_QKV), channels, h)?;
                matrix(&mut t, &mut rng, name(names::ATTN_GATE), value_dim, h)?;
                matrix(&mut t, &mut rng, name(names::SSM_OUT), h, value_dim)?;
                t.insert(name(names::SSM_ALPHA), MemTensor::Vector(uniform(&mut rng, v_heads * h, -scale, scale)));
                t.insert(name(names::SSM_BETA), MemTensor::Vector(uniform(&mut rng, v_heads * h, -scale, scale)));
                t.insert(name(names::SSM_CONV1D), MemTensor::Vector(uniform(&mut rng, channels * c.conv_kernel, -0.5, 0.5)));
                t.insert(names::ssm_dt_bias(l), MemTensor::Vector(uniform(&mut rng, v_heads, -1.0, 1.0)));
                t.insert(names::ssm_a(l), MemTensor::Vector(uniform(&mut rng, v_heads, -4.0, -0.5)));
                t.insert(name(names::SSM_NORM), MemTensor::Vector(random_norm(&mut rng, c.ssm_head_dim)));
            }
        }
        matrix(&mut t, &mut rng, name(names::FFN_GATE), c.ffn, h)?;
        matrix(&mut t, &mut rng, name(names::FFN_UP), c.ffn, h)?;
        matrix(&mut t, &mut rng, name(names::FFN_DOWN), h, c.ffn)?;
    }
    t.insert(names::OUTPUT_NORM.into(), MemTensor::Vector(random_norm(&mut rng, h)));
    matrix(&mut t, &mut rng, names::OUTPUT.into(), c.vocab, h)?;
    Ok(t)
}

/// Host weights of a random qwen35 model (what `Qwen3::new_qwen35` uploads).
pub fn random_qwen35_host_weights(c: &Qwen35Config, seed: u64) -> Result<crate::qwen35::HostWeights, ModelError> {
    crate::qwen35::HostWeights::load(c, random_qwen35_tensors(c, seed)?)
}

//! Shared test helpers: a seeded generator (seed printed, so a failure can be replayed with
//! BONSAI_TEST_SEED=<seed>) and a small synthetic Qwen3-shaped GGUF builder.
#![allow(dead_code)]

use bonsai_gguf::{keys, quantize, GgufWriter, MetaValue, TensorType, ValueType};

/// SplitMix64: tiny, good enough for test inputs, no dependency.
pub struct Rng(pub u64);

impl Rng {
    /// Seeded from BONSAI_TEST_SEED or the clock; prints the seed (shown when a test fails).
    pub fn fresh(test: &str) -> Rng {
        let seed = std::env::var("BONSAI_TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |d| d.as_nanos() as u64)
            });
        println!("{test}: seed {seed} (replay with BONSAI_TEST_SEED={seed})");
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [-scale, scale).
    pub fn sym(&mut self, scale: f32) -> f32 {
        ((self.unit() * 2.0 - 1.0) as f32) * scale
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    pub fn vec(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.sym(scale)).collect()
    }
}

/// Small Qwen3 geometry used by synthetic files.
pub const HIDDEN: u64 = 256;
pub const FFN: u64 = 384;
pub const VOCAB: u64 = 40;
pub const HEADS: u64 = 4;
pub const KV_HEADS: u64 = 2;
pub const HEAD_DIM: u64 = 64;
pub const LAYERS: u64 = 2;

/// A tiny, complete Qwen3-like model: every tensor of every layer, weights of `linear_ty`.
pub fn tiny_qwen3(rng: &mut Rng, linear_ty: TensorType, tied: bool) -> GgufWriter {
    let mut w = GgufWriter::new();
    let s = |v: &str| MetaValue::String(v.to_string());
    w.add_metadata(keys::GENERAL_ARCHITECTURE, s("qwen3"));
    w.add_metadata(keys::QWEN3_BLOCK_COUNT, MetaValue::U32(LAYERS as u32));
    w.add_metadata(keys::QWEN3_EMBEDDING_LENGTH, MetaValue::U32(HIDDEN as u32));
    w.add_metadata(keys::QWEN3_FEED_FORWARD_LENGTH, MetaValue::U64(FFN));
    w.add_metadata(keys::QWEN3_HEAD_COUNT, MetaValue::U32(HEADS as u32));
    w.add_metadata(keys::QWEN3_HEAD_COUNT_KV, MetaValue::U16(KV_HEADS as u16));
    w.add_metadata(keys::QWEN3_KEY_LENGTH, MetaValue::U32(HEAD_DIM as u32));
    w.add_metadata(keys::QWEN3_CONTEXT_LENGTH, MetaValue::U32(4096));
    w.add_metadata(keys::QWEN3_ROPE_FREQ_BASE, MetaValue::F32(1_000_000.0));
    w.add_metadata(keys::QWEN3_RMS_EPS, MetaValue::F32(1e-6));
    w.add_metadata(keys::TOKENIZER_MODEL, s("gpt2"));
    w.add_metadata(keys::TOKENIZER_PRE, s("qwen2"));
    let tokens: Vec<MetaValue> = (0..VOCAB).map(|i| s(&format!("tok{i}"))).collect();
    w.add_metadata(keys::TOKENIZER_TOKENS, MetaValue::Array(ValueType::String, tokens));
    let types = (0..VOCAB).map(|i| MetaValue::I32(if i + 2 >= VOCAB { 3 } else { 1 })).collect();
    w.add_metadata(keys::TOKENIZER_TOKEN_TYPE, MetaValue::Array(ValueType::I32, types));
    w.add_metadata(
        keys::TOKENIZER_MERGES,
        MetaValue::Array(ValueType::String, vec![s("t o"), s("to k")]),
    );
    w.add_metadata(keys::TOKENIZER_EOS_ID, MetaValue::U32((VOCAB - 1) as u32));
    w.add_metadata(keys::TOKENIZER_CHAT_TEMPLATE, s("{{ messages }}"));

    let mut add = |w: &mut GgufWriter, name: &str, shape: &[u64], ty: TensorType| {
        let n: u64 = shape.iter().product();
        let data = quantize(ty, &rng.vec(n as usize, 0.5)).expect("quantize synthetic weights");
        w.add_tensor(name, shape, ty, data).expect("add synthetic tensor");
    };
    add(&mut w, keys::tensor::TOKEN_EMBD, &[HIDDEN, VOCAB], linear_ty);
    for layer in 0..LAYERS as usize {
        let b = |stem| keys::tensor::block(stem, layer);
        use keys::tensor::*;
        add(&mut w, &b(ATTN_NORM), &[HIDDEN], TensorType::F32);
        add(&mut w, &b(ATTN_Q), &[HIDDEN, HEADS * HEAD_DIM], linear_ty);
        add(&mut w, &b(ATTN_K), &[HIDDEN, KV_HEADS * HEAD_DIM], linear_ty);
        add(&mut w, &b(ATTN_V), &[HIDDEN, KV_HEADS * HEAD_DIM], linear_ty);
        add(&mut w, &b(ATTN_Q_NORM), &[HEAD_DIM], TensorType::F32);
        add(&mut w, &b(ATTN_K_NORM), &[HEAD_DIM], TensorType::F32);
        add(&mut w, &b(ATTN_OUTPUT), &[HEADS * HEAD_DIM, HIDDEN], linear_ty);
        add(&mut w, &b(FFN_NORM), &[HIDDEN], TensorType::F32);
        add(&mut w, &b(FFN_GATE), &[HIDDEN, FFN], linear_ty);
        add(&mut w, &b(FFN_UP), &[HIDDEN, FFN], linear_ty);
        add(&mut w, &b(FFN_DOWN), &[FFN, HIDDEN], linear_ty);
    }
    add(&mut w, keys::tensor::OUTPUT_NORM, &[HIDDEN], TensorType::F32);
    if !tied {
        add(&mut w, keys::tensor::OUTPUT, &[HIDDEN, VOCAB], linear_ty);
    }
    w
}

pub fn to_bytes(w: &GgufWriter) -> Vec<u8> {
    let mut out = Vec::new();
    w.write_to(&mut out).expect("write to memory");
    out
}

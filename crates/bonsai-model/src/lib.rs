//! Qwen3 as Bonsai uses it, over a backend interface; KV cache, sampler, tokenizer, chat template
//! and the generation loop.
//!
//! * [`program`]: what a model computes, as ops over named buffers (a `Program`), and each op's
//!   meaning in primitive backend ops.
//! * [`backend`]: the `Backend` trait (buffers, primitive ops, plans) and the CPU and CUDA backends.
//! * [`qwen3`]: the Qwen3 forward pass as a program; weights fused at load.
//! * [`qwen35`]: the qwen35 hybrid (Bonsai 2: Gated DeltaNet + gated attention, Hadamard fold).
//! * [`generate`]: prefill + decode loop with stop tokens, streaming and timings.
//! * [`sampler`], [`tokenizer`], [`chat`]: token choice, text <-> ids, prompts.
//! * [`synthetic`], [`demo`]: random-weight models (tests, demo, speed at real geometry).

pub mod backend;
pub mod chat;
pub mod convert;
pub mod demo;
pub mod generate;
pub mod kv_blocks;
pub mod loader;
pub mod program;
pub mod qwen3;
pub mod qwen35;
pub mod requantize;
pub mod sampler;
pub mod synthetic;
pub mod tokenizer;
pub mod weights;

pub use backend::{Backend, BackendError, CpuBackend, CudaBackend};
pub use qwen3::{DevicePick, LogitRows, Qwen3, Qwen3State, SeqPick};

/// Why loading or running the model failed. Messages are one line and name the tensor/op.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error(transparent)]
    Gguf(#[from] bonsai_gguf::GgufError),
    #[error(transparent)]
    Convert(#[from] weights::ConvertError),
    #[error(transparent)]
    Tokenizer(#[from] tokenizer::TokenizerError),
    #[error(transparent)]
    Sampler(#[from] sampler::SamplerError),
    #[error("tensor '{name}' {detail}")]
    Tensor { name: String, detail: String },
    #[error("context full: {need} tokens needed but the context holds {ctx} (raise --ctx)")]
    ContextFull { need: usize, ctx: usize },
    #[error("KV cache full: {need} more blocks of {block} tokens needed but {free} of {total} are free")]
    KvFull { need: usize, free: usize, total: usize, block: usize },
    #[error("unsupported: {0}")]
    Unsupported(String),
}

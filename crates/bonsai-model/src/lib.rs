//! Qwen3 as Bonsai uses it, over a backend interface; KV cache, sampler, tokenizer, chat template
//! and the generation loop.

pub mod chat;
pub mod convert;
pub mod demo;
pub mod sampler;
pub mod tokenizer;
pub mod weights;

//! Qwen3 as Bonsai uses it, over a backend interface; KV cache, sampler, tokenizer, chat template
//! and the generation loop.

pub mod convert;

//! GGUF v2/v3 reading (memory-mapped, zero-copy) and writing, block formats and quantizers,
//! and the Qwen3 model config read from metadata.

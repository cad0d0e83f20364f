//! Device memory a model needs, computed before anything is allocated, so an out-of-memory GPU
//! is one clear error naming bytes needed and available instead of a failure halfway through an
//! upload.
//!
//! The plan covers the weights as uploaded (scale and payload arrays, f32 norms), the RoPE table,
//! the f16 KV cache of every layer for `max_seq` tokens (whole blocks), one sequence state with `max_batch`
//! activation rows and logits for every row (perplexity's worst case), and the attention scratch
//! (decode: one token over the whole cache; prefill: `max_batch` tokens over the whole cache) with
//! its counters.

use bonsai_gguf::Qwen3Config;
use bonsai_kernels::launch::attention::{counters_len, scratch_len};
use bonsai_kernels::ops::{kv_block_len, kv_table_len, HeadShape};

use super::BackendError;
use crate::qwen3::HostWeights;

/// Prompt tokens per forward call the plan provisions for (the CLI's prefill chunk).
pub const PLANNED_MAX_BATCH: usize = 512;
/// Left free beyond the plan: the caching allocator's rounding, the captured graph, the driver's
/// own per-launch buffers. 256 MiB is well above what those take on an H200 (a few MiB).
pub const SAFETY_MARGIN_BYTES: usize = 256 << 20;

const F32_BYTES: usize = 4;
const F16_BYTES: usize = 2;
const U32_BYTES: usize = 4;
const U64_BYTES: usize = 8;

/// Bytes per category.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryPlan {
    pub weights_bytes: usize,
    pub rope_bytes: usize,
    pub kv_cache_bytes: usize,
    pub activation_bytes: usize,
    pub scratch_bytes: usize,
}

/// Bytes the uploaded weights take: every matrix's scales + payload and every f32 norm.
pub fn weights_device_bytes(host: &HostWeights) -> usize {
    let layers: usize = host
        .layers
        .iter()
        .map(|l| {
            l.qkv.len_bytes()
                + l.attn_output.len_bytes()
                + l.gate_up.len_bytes()
                + l.down.len_bytes()
                + (l.attn_norm.len() + l.q_norm.len() + l.k_norm.len() + l.ffn_norm.len()) * F32_BYTES
        })
        .sum();
    let output = host.output.as_ref().map_or(0, |m| m.len_bytes());
    layers + output + host.token_embd.len_bytes() + host.output_norm.len() * F32_BYTES
}

impl MemoryPlan {
    /// The plan for a model with `weights_bytes` of weights, a cache of `max_seq` tokens and one
    /// state of `max_batch` rows.
    pub fn new(config: &Qwen3Config, weights_bytes: usize, max_seq: usize, max_batch: usize) -> Self {
        let shape = HeadShape { n_q: config.n_q_heads, n_kv: config.n_kv_heads, head_dim: config.head_dim };
        let max_batch = max_batch.max(1);
        // cos and sin, [max_seq][head_dim / 2] f32 each.
        let rope_bytes = 2 * max_seq * (config.head_dim / 2) * F32_BYTES;
        // K and V pools per layer, the blocks of one sequence of max_seq tokens:
        // [blocks][n_kv][KV_BLOCK][head_dim] f16 each.
        let kv_cache_bytes = config.n_layers * 2 * kv_table_len(max_seq) * kv_block_len(shape) * F16_BYTES;
        // Qwen3State: x, xn, qkv, attn, ffn rows, the last row, all-row logits, token ids, position.
        let rows = 2 * config.hidden + shape.qkv_row_len() + shape.q_len() + config.ffn + config.vocab;
        // Plus the sampler: its generator state and candidate scratch (u64 each).
        let sampler_words = bonsai_kernels::launch::sample_top_k::RNG_WORDS + bonsai_kernels::launch::sample_top_k::candidate_scratch_len();
        let activation_bytes =
            (max_batch * rows + config.hidden) * F32_BYTES + (max_batch + 1) * U32_BYTES + sampler_words * U64_BYTES;
        let scratch_bytes = (scratch_len(1, shape, max_seq) + scratch_len(max_batch, shape, max_seq)) * F32_BYTES
            + counters_len(max_seq, shape) * U32_BYTES;
        Self { weights_bytes, rope_bytes, kv_cache_bytes, activation_bytes, scratch_bytes }
    }

    /// The plan for `host` (see [`MemoryPlan::new`]).
    pub fn for_weights(config: &Qwen3Config, host: &HostWeights, max_seq: usize, max_batch: usize) -> Self {
        Self::new(config, weights_device_bytes(host), max_seq, max_batch)
    }

    pub fn total_bytes(&self) -> usize {
        self.weights_bytes + self.rope_bytes + self.kv_cache_bytes + self.activation_bytes + self.scratch_bytes
    }

    /// Errors unless the plan plus [`SAFETY_MARGIN_BYTES`] fits in `free_bytes`.
    pub fn check_fits(&self, device: &str, free_bytes: usize) -> Result<(), BackendError> {
        let need = self.total_bytes() + SAFETY_MARGIN_BYTES;
        if need > free_bytes {
            return Err(BackendError::OutOfMemory { device: device.to_string(), need, free: free_bytes, plan: *self });
        }
        Ok(())
    }
}

impl std::fmt::Display for MemoryPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mb = |b: usize| b as f64 / 1e6;
        write!(
            f,
            "weights {:.1} MB + KV cache {:.1} MB + activations {:.1} MB + attention scratch {:.1} MB + RoPE {:.1} MB",
            mb(self.weights_bytes),
            mb(self.kv_cache_bytes),
            mb(self.activation_bytes),
            mb(self.scratch_bytes),
            mb(self.rope_bytes)
        )
    }
}

#[cfg(test)]
#[path = "memory_plan_tests.rs"]
mod tests;

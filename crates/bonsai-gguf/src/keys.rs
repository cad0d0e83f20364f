//! Metadata key names (llama.cpp conventions), shared by the reader, the model and the converter.

pub const GENERAL_ARCHITECTURE: &str = "general.architecture";
pub const GENERAL_NAME: &str = "general.name";
pub const GENERAL_ALIGNMENT: &str = "general.alignment";
pub const GENERAL_FILE_TYPE: &str = "general.file_type";
pub const GENERAL_QUANTIZATION_VERSION: &str = "general.quantization_version";
/// bonsai's own key naming the id-42 layout ("tq2_0_g128" | "q2_0_g128" | "q2_0_g64"); written
/// with Q2_0 g64 output (`convert`, `quantize`) so tiny files, where both block sizes fit the
/// offset table, still re-read. Read as a hint: the offsets must agree with it.
pub const BONSAI_TWO_BIT_LAYOUT: &str = "bonsai.two_bit_layout";

pub const ARCH_QWEN3: &str = "qwen3";

pub const QWEN3_BLOCK_COUNT: &str = "qwen3.block_count";
pub const QWEN3_EMBEDDING_LENGTH: &str = "qwen3.embedding_length";
pub const QWEN3_FEED_FORWARD_LENGTH: &str = "qwen3.feed_forward_length";
pub const QWEN3_HEAD_COUNT: &str = "qwen3.attention.head_count";
pub const QWEN3_HEAD_COUNT_KV: &str = "qwen3.attention.head_count_kv";
pub const QWEN3_KEY_LENGTH: &str = "qwen3.attention.key_length";
pub const QWEN3_VALUE_LENGTH: &str = "qwen3.attention.value_length";
pub const QWEN3_CONTEXT_LENGTH: &str = "qwen3.context_length";
pub const QWEN3_ROPE_FREQ_BASE: &str = "qwen3.rope.freq_base";
pub const QWEN3_RMS_EPS: &str = "qwen3.attention.layer_norm_rms_epsilon";
pub const QWEN3_ROPE_SCALING_TYPE: &str = "qwen3.rope.scaling.type";
pub const QWEN3_ROPE_SCALING_FACTOR: &str = "qwen3.rope.scaling.factor";
pub const QWEN3_ROPE_SCALING_ORIG_CTX: &str = "qwen3.rope.scaling.original_context_length";
pub const QWEN3_ROPE_SCALING_YARN_BETA_FAST: &str = "qwen3.rope.scaling.yarn_beta_fast";
pub const QWEN3_ROPE_SCALING_YARN_BETA_SLOW: &str = "qwen3.rope.scaling.yarn_beta_slow";
pub const QWEN3_VOCAB_SIZE: &str = "qwen3.vocab_size";

pub const TOKENIZER_MODEL: &str = "tokenizer.ggml.model";
pub const TOKENIZER_PRE: &str = "tokenizer.ggml.pre";
pub const TOKENIZER_TOKENS: &str = "tokenizer.ggml.tokens";
pub const TOKENIZER_TOKEN_TYPE: &str = "tokenizer.ggml.token_type";
pub const TOKENIZER_MERGES: &str = "tokenizer.ggml.merges";
pub const TOKENIZER_BOS_ID: &str = "tokenizer.ggml.bos_token_id";
pub const TOKENIZER_EOS_ID: &str = "tokenizer.ggml.eos_token_id";
pub const TOKENIZER_PAD_ID: &str = "tokenizer.ggml.padding_token_id";
pub const TOKENIZER_ADD_BOS: &str = "tokenizer.ggml.add_bos_token";
pub const TOKENIZER_CHAT_TEMPLATE: &str = "tokenizer.chat_template";

/// Tensor names (GGUF / llama.cpp) of a Qwen3 model.
pub mod tensor {
    pub const TOKEN_EMBD: &str = "token_embd.weight";
    pub const OUTPUT_NORM: &str = "output_norm.weight";
    pub const OUTPUT: &str = "output.weight";
    /// Per-layer tensor name, e.g. `block("attn_q", 3)` = "blk.3.attn_q.weight".
    pub fn block(stem: &str, layer: usize) -> String {
        format!("blk.{layer}.{stem}.weight")
    }
    pub const ATTN_Q: &str = "attn_q";
    pub const ATTN_K: &str = "attn_k";
    pub const ATTN_V: &str = "attn_v";
    pub const ATTN_OUTPUT: &str = "attn_output";
    pub const ATTN_NORM: &str = "attn_norm";
    pub const ATTN_Q_NORM: &str = "attn_q_norm";
    pub const ATTN_K_NORM: &str = "attn_k_norm";
    pub const FFN_GATE: &str = "ffn_gate";
    pub const FFN_UP: &str = "ffn_up";
    pub const FFN_DOWN: &str = "ffn_down";
    pub const FFN_NORM: &str = "ffn_norm";
}

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
    // qwen35 (bonsai2.md §3.2).
    pub const POST_ATTENTION_NORM: &str = "post_attention_norm";
    pub const ATTN_QKV: &str = "attn_qkv";
    pub const ATTN_GATE: &str = "attn_gate";
    pub const SSM_ALPHA: &str = "ssm_alpha";
    pub const SSM_BETA: &str = "ssm_beta";
    pub const SSM_CONV1D: &str = "ssm_conv1d";
    pub const SSM_NORM: &str = "ssm_norm";
    pub const SSM_OUT: &str = "ssm_out";
    /// `blk.N.ssm_dt.bias` (no `.weight` suffix).
    pub fn ssm_dt_bias(layer: usize) -> String {
        format!("blk.{layer}.ssm_dt.bias")
    }
    /// `blk.N.ssm_a` (no suffix): `-exp(A_log)`.
    pub fn ssm_a(layer: usize) -> String {
        format!("blk.{layer}.ssm_a")
    }
}

pub const ARCH_QWEN35: &str = "qwen35";

/// `qwen35.*` keys (bonsai2.md §3.1): the hybrid Gated DeltaNet / gated-attention geometry.
pub mod qwen35 {
    pub const BLOCK_COUNT: &str = "qwen35.block_count";
    pub const EMBEDDING_LENGTH: &str = "qwen35.embedding_length";
    pub const FEED_FORWARD_LENGTH: &str = "qwen35.feed_forward_length";
    pub const HEAD_COUNT: &str = "qwen35.attention.head_count";
    pub const HEAD_COUNT_KV: &str = "qwen35.attention.head_count_kv";
    pub const KEY_LENGTH: &str = "qwen35.attention.key_length";
    pub const VALUE_LENGTH: &str = "qwen35.attention.value_length";
    pub const CONTEXT_LENGTH: &str = "qwen35.context_length";
    pub const RMS_EPS: &str = "qwen35.attention.layer_norm_rms_epsilon";
    pub const ROPE_FREQ_BASE: &str = "qwen35.rope.freq_base";
    pub const ROPE_DIMENSION_COUNT: &str = "qwen35.rope.dimension_count";
    pub const ROPE_DIMENSION_SECTIONS: &str = "qwen35.rope.dimension_sections";
    pub const ROPE_SCALING_TYPE: &str = "qwen35.rope.scaling.type";
    pub const SSM_CONV_KERNEL: &str = "qwen35.ssm.conv_kernel";
    pub const SSM_STATE_SIZE: &str = "qwen35.ssm.state_size";
    pub const SSM_GROUP_COUNT: &str = "qwen35.ssm.group_count";
    pub const SSM_TIME_STEP_RANK: &str = "qwen35.ssm.time_step_rank";
    pub const SSM_INNER_SIZE: &str = "qwen35.ssm.inner_size";
    pub const FULL_ATTENTION_INTERVAL: &str = "qwen35.full_attention_interval";
    pub const RECURRENT_LAYERS: &str = "qwen35.attention.recurrent_layers";
    pub const NEXTN_PREDICT_LAYERS: &str = "qwen35.nextn_predict_layers";
}

/// `prism.hadamard.*` keys (bonsai2.md §4.1): the blockwise signed Hadamard fold of Bonsai 2.
pub mod hadamard {
    /// Every key of the `prism.` namespace bonsai understands starts with this.
    pub const PREFIX: &str = "prism.hadamard.";
    pub const VERSION: &str = "prism.hadamard.version";
    pub const BLOCK_SIZE: &str = "prism.hadamard.block_size";
    pub const TRANSFORM: &str = "prism.hadamard.transform";
    pub const AXIS: &str = "prism.hadamard.axis";
    pub const SIGN_MODE: &str = "prism.hadamard.sign_mode";
    pub const SIGN_WIDTHS: &str = "prism.hadamard.sign_widths";
    pub const SIGN_VALUES: &str = "prism.hadamard.sign_values";
    pub const WEIGHT_NAMES: &str = "prism.hadamard.weight_names";
    pub const INVERSE_WEIGHT_NAMES: &str = "prism.hadamard.inverse_weight_names";
    pub const GDN_V_GROUPED: &str = "prism.hadamard.gdn_v_grouped";
    pub const TIED_OUTPUT: &str = "prism.hadamard.tied_output";
    pub const ALL: [&str; 11] = [
        VERSION,
        BLOCK_SIZE,
        TRANSFORM,
        AXIS,
        SIGN_MODE,
        SIGN_WIDTHS,
        SIGN_VALUES,
        WEIGHT_NAMES,
        INVERSE_WEIGHT_NAMES,
        GDN_V_GROUPED,
        TIED_OUTPUT,
    ];
    pub const TRANSFORM_SYLVESTER: &str = "normalized-sylvester-walsh-hadamard";
    pub const AXIS_INPUT_LAST: &str = "input-last-dimension";
    pub const SIGN_MODE_EXPLICIT: &str = "explicit";
    pub const SIGN_MODE_IDENTITY: &str = "identity";
}

/// `general.sampling.*` (llama.cpp's `LLAMA_MODEL_META_KEY_SAMPLING_*`): the sampler settings the
/// model's makers recommend, used where the user gives none (Bonsai 2: temp 1.0, top-k 20, top-p 0.95).
pub mod sampling {
    pub const TEMP: &str = "general.sampling.temp";
    pub const TOP_K: &str = "general.sampling.top_k";
    pub const TOP_P: &str = "general.sampling.top_p";
    pub const MIN_P: &str = "general.sampling.min_p";
    pub const PENALTY_REPEAT: &str = "general.sampling.penalty_repeat";
}

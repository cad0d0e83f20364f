//! Which Hugging Face tensors a Qwen3 GGUF holds, under which names, with which shapes.
//!
//! HF stores a linear weight as `[out, in]` row-major (`in` contiguous); GGUF lists dimensions
//! contiguous-first, so the same bytes are GGUF shape `[in, out]`. No data is transposed.

use super::hf_config::HfQwen3Config;

/// How a tensor is stored in the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TensorRole {
    /// A matrix (incl. the embedding and the LM head): gets the requested type.
    Linear,
    /// A norm weight: always F32.
    Norm,
}

/// One tensor of the output file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedTensor {
    pub hf_name: String,
    pub gguf_name: String,
    pub role: TensorRole,
    /// Shape as config.json implies it, HF order (`[out, in]` or `[n]`).
    pub hf_shape: Vec<usize>,
}

impl PlannedTensor {
    /// GGUF order: contiguous dimension first.
    pub fn gguf_shape(&self) -> Vec<u64> {
        self.hf_shape.iter().rev().map(|&d| d as u64).collect()
    }

    /// Length of one contiguous row (the matmul K for a linear weight).
    pub fn row_len(&self) -> usize {
        self.hf_shape.last().copied().unwrap_or(1)
    }
}

/// Every tensor of the output in writing order: embedding, the blocks, final norm, LM head
/// (absent when `tie_word_embeddings`).
pub fn plan_tensors(config: &HfQwen3Config) -> Vec<PlannedTensor> {
    let d = |v: u64| v as usize;
    let hidden = d(config.hidden);
    let q_dim = d(config.n_q_heads * config.head_dim);
    let kv_dim = d(config.n_kv_heads * config.head_dim);
    let ffn = d(config.ffn);
    let head_dim = d(config.head_dim);
    let vocab = d(config.vocab);

    let mut out = Vec::new();
    let mut push = |hf: String, gguf: String, role: TensorRole, shape: Vec<usize>| {
        out.push(PlannedTensor { hf_name: hf, gguf_name: gguf, role, hf_shape: shape });
    };
    use TensorRole::{Linear, Norm};
    push(
        "model.embed_tokens.weight".into(),
        "token_embd.weight".into(),
        Linear,
        vec![vocab, hidden],
    );
    for layer in 0..config.n_layers {
        let hf = |suffix: &str| format!("model.layers.{layer}.{suffix}.weight");
        let gg = |suffix: &str| format!("blk.{layer}.{suffix}.weight");
        let layer_tensors: [(&str, &str, TensorRole, Vec<usize>); 11] = [
            ("input_layernorm", "attn_norm", Norm, vec![hidden]),
            ("self_attn.q_proj", "attn_q", Linear, vec![q_dim, hidden]),
            ("self_attn.k_proj", "attn_k", Linear, vec![kv_dim, hidden]),
            ("self_attn.v_proj", "attn_v", Linear, vec![kv_dim, hidden]),
            ("self_attn.q_norm", "attn_q_norm", Norm, vec![head_dim]),
            ("self_attn.k_norm", "attn_k_norm", Norm, vec![head_dim]),
            ("self_attn.o_proj", "attn_output", Linear, vec![hidden, q_dim]),
            ("post_attention_layernorm", "ffn_norm", Norm, vec![hidden]),
            ("mlp.gate_proj", "ffn_gate", Linear, vec![ffn, hidden]),
            ("mlp.up_proj", "ffn_up", Linear, vec![ffn, hidden]),
            ("mlp.down_proj", "ffn_down", Linear, vec![hidden, ffn]),
        ];
        for (hf_suffix, gguf_suffix, role, shape) in layer_tensors {
            push(hf(hf_suffix), gg(gguf_suffix), role, shape);
        }
    }
    push("model.norm.weight".into(), "output_norm.weight".into(), Norm, vec![hidden]);
    if !config.tie_word_embeddings {
        push("lm_head.weight".into(), "output.weight".into(), Linear, vec![vocab, hidden]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::hf_config::HfQwen3Config;

    fn config(tied: bool) -> HfQwen3Config {
        HfQwen3Config {
            n_layers: 3,
            hidden: 256,
            ffn: 640,
            n_q_heads: 4,
            n_kv_heads: 2,
            head_dim: 128,
            vocab: 300,
            context_len: 64,
            rope_theta: 1e6,
            rms_eps: 1e-6,
            tie_word_embeddings: tied,
            rope_scaling: None,
            bos_token_id: None,
            eos_token_id: None,
            pad_token_id: None,
        }
    }

    #[test]
    fn plan_names_shapes_and_tying() {
        let plan = plan_tensors(&config(false));
        assert_eq!(plan.len(), 1 + 3 * 11 + 2);
        let find = |n: &str| plan.iter().find(|t| t.gguf_name == n).unwrap();
        // q dim (4 * 128 = 512) differs from hidden (256): shapes follow head_dim, not hidden.
        let q = find("blk.2.attn_q.weight");
        assert_eq!(q.hf_name, "model.layers.2.self_attn.q_proj.weight");
        assert_eq!(q.gguf_shape(), vec![256, 512]);
        assert_eq!(find("blk.0.attn_output.weight").gguf_shape(), vec![512, 256]);
        assert_eq!(find("blk.1.ffn_down.weight").row_len(), 640);
        assert_eq!(find("blk.1.attn_k_norm.weight").gguf_shape(), vec![128]);
        assert_eq!(find("output.weight").gguf_shape(), vec![256, 300]);
        assert_eq!(find("token_embd.weight").role, TensorRole::Linear);
        assert_eq!(find("output_norm.weight").role, TensorRole::Norm);

        let tied = plan_tensors(&config(true));
        assert_eq!(tied.len(), plan.len() - 1);
        assert!(tied.iter().all(|t| t.gguf_name != "output.weight"));
    }
}

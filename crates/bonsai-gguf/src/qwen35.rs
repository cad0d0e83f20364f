//! The qwen35 geometry (Qwen3.5 hybrid: Gated DeltaNet layers and gated full attention, the
//! architecture of Bonsai 27B and Bonsai 2), read from `qwen35.*` metadata (bonsai2.md §3.1,
//! §3.3), plus the optional `prism.hadamard.*` contract ([`HadamardConfig`]).

use crate::config::{dim, gqa_heads, out_of_range, vocab_size};
use crate::error::GgufError;
use crate::hadamard::HadamardConfig;
use crate::keys::{self, qwen35 as k, tensor};
use crate::reader::GgufFile;
use crate::value::MetaValue;

/// llama.cpp's default when `full_attention_interval` is absent.
pub const DEFAULT_FULL_ATTENTION_INTERVAL: usize = 4;

/// What a layer's token mixer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerKind {
    /// Gated DeltaNet (linear attention with a recurrent state).
    Recurrent,
    /// Gated full attention with a KV cache.
    FullAttention,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Qwen35Config {
    pub n_layers: usize,
    pub hidden: usize,
    pub ffn: usize,
    pub n_q_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    /// Leading dims of each attention head that RoPE rotates (NeoX pairing within them).
    pub rot_dims: usize,
    /// M-RoPE sections (text positions make every component equal: plain partial RoPE).
    pub rope_sections: [usize; 4],
    pub vocab: usize,
    pub context_len: usize,
    pub rope_theta: f64,
    pub rms_eps: f32,
    pub conv_kernel: usize,
    /// Key / value head dimension of the DeltaNet layers (`ssm.state_size`).
    pub ssm_head_dim: usize,
    /// K (and Q) heads of the DeltaNet layers (`ssm.group_count`).
    pub ssm_k_heads: usize,
    /// V heads of the DeltaNet layers (`ssm.time_step_rank`).
    pub ssm_v_heads: usize,
    /// Each layer's mixer, from `attention.recurrent_layers` or `full_attention_interval`.
    pub layers: Vec<LayerKind>,
    /// True when the file has no `output.weight`: the LM head is `token_embd`.
    pub tied_embeddings: bool,
    /// The Bonsai 2 Hadamard fold, when the file carries one.
    pub hadamard: Option<HadamardConfig>,
}

fn layer_schedule(file: &GgufFile, n_layers: usize) -> Result<Vec<LayerKind>, GgufError> {
    let kind = |recurrent: bool| if recurrent { LayerKind::Recurrent } else { LayerKind::FullAttention };
    if file.get(k::RECURRENT_LAYERS).is_some() {
        let (_, flags) = file.get_array(k::RECURRENT_LAYERS)?;
        if flags.len() != n_layers {
            return Err(out_of_range(
                k::RECURRENT_LAYERS,
                format!("{} entries", flags.len()),
                &format!("needs one per layer ({n_layers})"),
            ));
        }
        return flags
            .iter()
            .map(|f| match f {
                MetaValue::Bool(b) => Ok(kind(*b)),
                other => match other.as_integer() {
                    Some(0) => Ok(kind(false)),
                    Some(1) => Ok(kind(true)),
                    _ => Err(out_of_range(k::RECURRENT_LAYERS, format!("{other:?}"), "entries must be booleans")),
                },
            })
            .collect();
    }
    let interval = match file.get(k::FULL_ATTENTION_INTERVAL) {
        None => DEFAULT_FULL_ATTENTION_INTERVAL,
        Some(_) => dim(file, k::FULL_ATTENTION_INTERVAL)?,
    };
    // llama.cpp qwen35.cpp: layer i is recurrent unless (i + 1) % interval == 0.
    Ok((0..n_layers).map(|i| kind((i + 1) % interval != 0)).collect())
}


impl Qwen35Config {
    pub fn from_gguf(file: &GgufFile) -> Result<Qwen35Config, GgufError> {
        let arch = file.get_str(keys::GENERAL_ARCHITECTURE)?;
        if arch != keys::ARCH_QWEN35 {
            return Err(GgufError::UnsupportedArchitecture(crate::parse::escape_for_message(arch)));
        }
        let hidden = dim(file, k::EMBEDDING_LENGTH)?;
        let n_layers = dim(file, k::BLOCK_COUNT)?;
        let (n_q_heads, n_kv_heads) = gqa_heads(file, k::HEAD_COUNT, k::HEAD_COUNT_KV)?;
        let head_dim = dim(file, k::KEY_LENGTH)?;
        if file.get(k::VALUE_LENGTH).is_some() && file.get_usize(k::VALUE_LENGTH)? != head_dim {
            return Err(out_of_range(k::VALUE_LENGTH, file.get_usize(k::VALUE_LENGTH)?, "must equal key_length"));
        }
        let rot_dims = dim(file, k::ROPE_DIMENSION_COUNT)?;
        if rot_dims > head_dim || rot_dims % 2 != 0 {
            return Err(out_of_range(
                k::ROPE_DIMENSION_COUNT,
                rot_dims,
                &format!("must be even and at most the head dimension {head_dim}"),
            ));
        }
        let (_, sections) = file.get_array(k::ROPE_DIMENSION_SECTIONS)?;
        let sections: Vec<usize> = sections
            .iter()
            .map(|v| v.as_integer().and_then(|i| usize::try_from(i).ok()))
            .collect::<Option<_>>()
            .ok_or_else(|| out_of_range(k::ROPE_DIMENSION_SECTIONS, format!("{sections:?}"), "must hold integers"))?;
        let mut rope_sections = [0usize; 4];
        if sections.len() > 4 || sections.iter().sum::<usize>() > rot_dims / 2 {
            return Err(out_of_range(
                k::ROPE_DIMENSION_SECTIONS,
                format!("{sections:?}"),
                &format!("at most 4 sections covering at most {} rotary pairs", rot_dims / 2),
            ));
        }
        rope_sections[..sections.len()].copy_from_slice(&sections);
        let rope_theta = file.get_f64(k::ROPE_FREQ_BASE)?;
        if !(rope_theta.is_finite() && rope_theta > 0.0) {
            return Err(out_of_range(k::ROPE_FREQ_BASE, rope_theta, "must be finite and positive"));
        }
        if let Some(kind) = file.get(k::ROPE_SCALING_TYPE) {
            if kind.as_str() != Some("none") {
                return Err(out_of_range(k::ROPE_SCALING_TYPE, format!("{kind:?}"), "bonsai runs qwen35 without RoPE scaling"));
            }
        }
        let rms_eps = file.get_f32(k::RMS_EPS)?;
        if !(rms_eps.is_finite() && rms_eps > 0.0) {
            return Err(out_of_range(k::RMS_EPS, rms_eps, "must be finite and positive"));
        }
        if file.get(k::NEXTN_PREDICT_LAYERS).is_some() && file.get_usize(k::NEXTN_PREDICT_LAYERS)? != 0 {
            return Err(out_of_range(
                k::NEXTN_PREDICT_LAYERS,
                file.get_usize(k::NEXTN_PREDICT_LAYERS)?,
                "multi-token-prediction layers are not supported",
            ));
        }
        let ssm_head_dim = dim(file, k::SSM_STATE_SIZE)?;
        let ssm_k_heads = dim(file, k::SSM_GROUP_COUNT)?;
        let ssm_v_heads = dim(file, k::SSM_TIME_STEP_RANK)?;
        if ssm_v_heads % ssm_k_heads != 0 {
            return Err(out_of_range(
                k::SSM_TIME_STEP_RANK,
                ssm_v_heads,
                &format!("must be a multiple of the {ssm_k_heads} K heads ({})", k::SSM_GROUP_COUNT),
            ));
        }
        let inner = dim(file, k::SSM_INNER_SIZE)?;
        if inner != ssm_v_heads * ssm_head_dim {
            return Err(out_of_range(
                k::SSM_INNER_SIZE,
                inner,
                &format!("must equal time_step_rank x state_size = {}", ssm_v_heads * ssm_head_dim),
            ));
        }
        let layers = layer_schedule(file, n_layers)?;
        Ok(Qwen35Config {
            n_layers,
            hidden,
            ffn: dim(file, k::FEED_FORWARD_LENGTH)?,
            n_q_heads,
            n_kv_heads,
            head_dim,
            rot_dims,
            rope_sections,
            vocab: vocab_size(file, hidden, k::EMBEDDING_LENGTH)?,
            context_len: dim(file, k::CONTEXT_LENGTH)?,
            rope_theta,
            rms_eps,
            conv_kernel: dim(file, k::SSM_CONV_KERNEL)?,
            ssm_head_dim,
            ssm_k_heads,
            ssm_v_heads,
            layers,
            tied_embeddings: file.tensor_info(tensor::OUTPUT).is_none(),
            hadamard: HadamardConfig::from_gguf(file)?,
        })
    }

    /// Width of a DeltaNet layer's q|k|v projection (and conv channels).
    pub fn ssm_conv_channels(&self) -> usize {
        2 * self.ssm_k_heads * self.ssm_head_dim + self.ssm_v_heads * self.ssm_head_dim
    }

    /// Width of a DeltaNet layer's value (and z, and ssm_out input).
    pub fn ssm_value_dim(&self) -> usize {
        self.ssm_v_heads * self.ssm_head_dim
    }
}

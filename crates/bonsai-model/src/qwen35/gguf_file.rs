//! A qwen35 model's metadata and vector tensors as GGUF, in the keys and shapes that llama.cpp's
//! `qwen35` loader reads (bonsai2.md §3.1-§3.2): what `bench --synthetic bonsai2-27b --write-gguf`
//! writes, so both engines run the same file. The caller adds the matrices in the format it wants.
//!
//! Only files without a Hadamard fold are written: an engine without the transform (mainline
//! llama.cpp) computes a plain qwen35 file exactly as bonsai does.

use bonsai_gguf::keys::{self, qwen35 as k, tensor as names};
use bonsai_gguf::{GgufWriter, LayerKind, MetaValue, Qwen35Config, TensorType, TokenizerMeta, ValueType};

use crate::demo::add_tokenizer_metadata;
use crate::synthetic::{MemTensor, MemoryTensors};
use crate::ModelError;

/// The GGUF of `c` with its metadata, `tokenizer` when given and the vector tensors of `vectors`
/// (in their order; matrices in it are skipped).
pub fn qwen35_gguf_writer(
    c: &Qwen35Config,
    vectors: &MemoryTensors,
    tokenizer: Option<&TokenizerMeta>,
) -> Result<GgufWriter, ModelError> {
    if c.hadamard.is_some() {
        return Err(ModelError::Unsupported("writing a Hadamard-folded qwen35 model (prism.hadamard keys)".into()));
    }
    let interval = full_attention_interval(&c.layers).ok_or_else(|| {
        ModelError::Unsupported("a qwen35 layer schedule other than one full-attention layer every N layers".into())
    })?;
    let mut w = GgufWriter::new();
    let u32_of = |n: usize| MetaValue::U32(n as u32);
    w.add_metadata(keys::GENERAL_ARCHITECTURE, MetaValue::String(keys::ARCH_QWEN35.into()));
    w.add_metadata(keys::GENERAL_NAME, MetaValue::String("bonsai random-weight qwen35 model".into()));
    w.add_metadata(k::BLOCK_COUNT, u32_of(c.n_layers));
    w.add_metadata(k::EMBEDDING_LENGTH, u32_of(c.hidden));
    w.add_metadata(k::FEED_FORWARD_LENGTH, u32_of(c.ffn));
    w.add_metadata(k::HEAD_COUNT, u32_of(c.n_q_heads));
    w.add_metadata(k::HEAD_COUNT_KV, u32_of(c.n_kv_heads));
    w.add_metadata(k::KEY_LENGTH, u32_of(c.head_dim));
    w.add_metadata(k::VALUE_LENGTH, u32_of(c.head_dim));
    w.add_metadata(k::CONTEXT_LENGTH, u32_of(c.context_len));
    w.add_metadata(k::RMS_EPS, MetaValue::F32(c.rms_eps));
    w.add_metadata(k::ROPE_FREQ_BASE, MetaValue::F32(c.rope_theta as f32));
    w.add_metadata(k::ROPE_DIMENSION_COUNT, u32_of(c.rot_dims));
    // Integer arrays as i32, as the published files hold them.
    let sections = c.rope_sections.iter().map(|&s| MetaValue::I32(s as i32)).collect();
    w.add_metadata(k::ROPE_DIMENSION_SECTIONS, MetaValue::Array(ValueType::I32, sections));
    w.add_metadata(k::SSM_CONV_KERNEL, u32_of(c.conv_kernel));
    w.add_metadata(k::SSM_STATE_SIZE, u32_of(c.ssm_head_dim));
    w.add_metadata(k::SSM_GROUP_COUNT, u32_of(c.ssm_k_heads));
    w.add_metadata(k::SSM_TIME_STEP_RANK, u32_of(c.ssm_v_heads));
    w.add_metadata(k::SSM_INNER_SIZE, u32_of(c.ssm_value_dim()));
    w.add_metadata(k::FULL_ATTENTION_INTERVAL, u32_of(interval));
    if let Some(tokenizer) = tokenizer {
        add_tokenizer_metadata(&mut w, tokenizer);
    }
    for name in &vectors.order {
        let Some(MemTensor::Vector(v)) = vectors.tensors.get(name) else { continue };
        let (shape, ty) = vector_layout(c, name, v.len());
        w.add_tensor(name, &shape, ty, bonsai_gguf::quantize(ty, v)?)?;
    }
    Ok(w)
}

/// N when layer i is full attention exactly where (i + 1) % N == 0 (llama.cpp's reading of
/// `full_attention_interval`).
fn full_attention_interval(layers: &[LayerKind]) -> Option<usize> {
    let n = layers.iter().position(|&l| l == LayerKind::FullAttention)? + 1;
    let periodic = layers.iter().enumerate().all(|(i, &l)| (l == LayerKind::FullAttention) == ((i + 1) % n == 0));
    periodic.then_some(n)
}

/// GGUF shape (`ne`, fastest first) and type of a vector tensor: alpha / beta are the
/// `[hidden, v_heads]` matrices the published files store in BF16, the conv weights
/// `[kernel, channels]`; everything else is one f32 row.
fn vector_layout(c: &Qwen35Config, name: &str, len: usize) -> (Vec<u64>, TensorType) {
    let stem = name.rsplit_once('.').map_or(name, |(head, _)| head);
    let stem = stem.rsplit_once('.').map_or(stem, |(_, s)| s);
    match stem {
        names::SSM_ALPHA | names::SSM_BETA => (vec![c.hidden as u64, c.ssm_v_heads as u64], TensorType::BF16),
        names::SSM_CONV1D => (vec![c.conv_kernel as u64, c.ssm_conv_channels() as u64], TensorType::F32),
        _ => (vec![len as u64], TensorType::F32),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::{qwen35_tiny_config, random_qwen35_tensors};
    use bonsai_gguf::GgufFile;

    /// The written metadata reads back as the same geometry, and alpha / beta / conv get the
    /// shapes llama.cpp's loader asks for.
    #[test]
    fn a_written_qwen35_file_reads_back_as_its_config() {
        let mut c = qwen35_tiny_config(3);
        c.hadamard = None;
        let tensors = random_qwen35_tensors(&c, 3).unwrap();
        let mut w = qwen35_gguf_writer(&c, &tensors, None).unwrap();
        // Matrices as the caller adds them (here: the shared g128 blocks).
        for name in &tensors.order {
            if let Some(MemTensor::Matrix(m)) = tensors.tensors.get(name) {
                let (ty, bytes) = crate::synthetic::gguf_blocks(m);
                w.add_tensor(name, &[m.k() as u64, m.n() as u64], ty, bytes).unwrap();
            }
        }
        let mut bytes = Vec::new();
        w.write_to(&mut bytes).unwrap();
        let file = GgufFile::from_bytes(bytes).unwrap();
        assert_eq!(Qwen35Config::from_gguf(&file).unwrap(), c);
        let alpha = file.tensor_info("blk.0.ssm_alpha.weight").unwrap();
        assert_eq!((alpha.shape.clone(), alpha.ty), (vec![c.hidden as u64, c.ssm_v_heads as u64], TensorType::BF16));
        let conv = file.tensor_info("blk.0.ssm_conv1d.weight").unwrap();
        assert_eq!(conv.shape, vec![c.conv_kernel as u64, c.ssm_conv_channels() as u64]);
        assert_eq!(file.tensor_info("blk.0.ssm_a").unwrap().shape, vec![c.ssm_v_heads as u64]);
    }

    #[test]
    fn folded_models_and_irregular_schedules_are_refused() {
        let folded = qwen35_tiny_config(3);
        assert!(qwen35_gguf_writer(&folded, &MemoryTensors::default(), None).is_err());
        let mut irregular = qwen35_tiny_config(3);
        irregular.hadamard = None;
        irregular.layers[0] = LayerKind::FullAttention;
        assert!(qwen35_gguf_writer(&irregular, &MemoryTensors::default(), None).is_err());
    }
}

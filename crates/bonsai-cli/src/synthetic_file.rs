//! `bench --synthetic G --write-gguf FILE`: a random-weight model of a real geometry as a GGUF
//! file that bonsai and upstream llama.cpp both load (`scripts/cpu-vs-llama.sh` benchmarks and
//! checks the two on the same file).
//!
//! Weights: the bench's own (same seed). qwen35 models (`bonsai2-27b`, `qwen35-tiny`) are written
//! without their Hadamard fold, in the keys and shapes of llama.cpp's `qwen35` loader
//! (`qwen35::gguf_file`): mainline llama.cpp has no transform, so only an unfolded file is the
//! same computation in both engines. Q1_0 is written as it is (upstream's block_q1_0 has the
//! same bytes). Ternary is written as upstream's Q2_0, 64-weight blocks, each 128-group split into
//! two blocks that repeat its scale: upstream reads it as it is, and bonsai reads such paired
//! blocks back exactly (`q2_from_two_bit_blocks`). The tokenizer is the demo's byte-level one,
//! padded to the geometry's vocabulary with NORMAL tokens `[unused_N]` (printable, so both
//! engines print every id as its name, and no engine treats them as control tokens).

use std::path::Path;

use anyhow::Context;
use bonsai_gguf::{keys, MetaValue, Qwen35Config, TensorType, TwoBitLayout};
use bonsai_kernels::QMatrix;
use bonsai_model::demo::{demo_tokenizer_parts, model_gguf_writer};
use bonsai_model::qwen35::gguf_file::qwen35_gguf_writer;
use bonsai_model::synthetic::{gguf_blocks, random_qwen35_tensors, random_tensors, Geometry, MemTensor, MemoryTensors};
use bonsai_model::tokenizer::token_type;

use crate::bench::{SyntheticModel, BENCH_SEED};

/// The architecture a synthetic model is written as.
enum Arch {
    Qwen3(Geometry),
    /// Unfolded: the bench's random weights read without the Hadamard transform, which mainline
    /// llama.cpp does not apply (the same computation in both engines).
    Qwen35(Qwen35Config),
}

/// Writes the model; returns the file's size in bytes.
pub fn write(kind: SyntheticModel, path: &Path) -> anyhow::Result<u64> {
    let arch = match (kind.geometry(), kind.qwen35(BENCH_SEED)) {
        (Some(g), _) => Arch::Qwen3(g),
        (None, Some(c)) => Arch::Qwen35(Qwen35Config { hadamard: None, ..c }),
        (None, None) => anyhow::bail!("{} has no geometry to write", kind.name()),
    };
    let (tensors, vocab) = match &arch {
        Arch::Qwen3(g) => (random_tensors(g, kind.kind(), BENCH_SEED), g.vocab),
        Arch::Qwen35(c) => (random_qwen35_tensors(c, BENCH_SEED), c.vocab),
    };
    let tensors = tensors.with_context(|| format!("building the random {} model", kind.name()))?;
    let mut tokenizer = demo_tokenizer_parts();
    anyhow::ensure!(vocab >= tokenizer.tokens.len(), "the {} vocabulary is smaller than the byte tokenizer", kind.name());
    for id in tokenizer.tokens.len()..vocab {
        tokenizer.tokens.push(format!("[unused_{id}]"));
        tokenizer.token_types.push(token_type::NORMAL);
    }
    // Vectors through the architecture's writer; matrices added after, in the format both
    // engines read.
    let mut vectors = MemoryTensors {
        order: tensors.order.iter().filter(|n| matches!(tensors.tensors.get(*n), Some(MemTensor::Vector(_)))).cloned().collect(),
        tensors: Default::default(),
    };
    let mut matrices = Vec::new();
    let MemoryTensors { order, tensors: mut map } = tensors;
    for name in order {
        match map.remove(&name) {
            Some(MemTensor::Vector(v)) => {
                vectors.tensors.insert(name, MemTensor::Vector(v));
            }
            Some(MemTensor::Matrix(m)) => matrices.push((name, m)),
            None => {}
        }
    }
    let mut w = match &arch {
        Arch::Qwen3(g) => model_gguf_writer(g, &vectors, Some(&tokenizer), None)?,
        Arch::Qwen35(c) => qwen35_gguf_writer(c, &vectors, Some(&tokenizer))?,
    };
    w.add_metadata(keys::GENERAL_NAME, MetaValue::String(format!("bonsai random-weight {}", kind.name())));
    let mut two_bit = false;
    // By value: each matrix is freed once its blocks are made (the 27B's would not fit twice).
    for (name, m) in matrices {
        let shape = [m.k() as u64, m.n() as u64];
        match m {
            QMatrix::Q1(_) => {
                let (ty, bytes) = gguf_blocks(&m);
                w.add_tensor(&name, &shape, ty, bytes)?;
            }
            QMatrix::Q2(_) => {
                two_bit = true;
                w.add_tensor(&name, &shape, TensorType::TwoBit(TwoBitLayout::Q2G64ScaleFirst), q2_g64_blocks(&m))?;
            }
        }
    }
    if two_bit {
        w.add_metadata(keys::BONSAI_TWO_BIT_LAYOUT, MetaValue::String("q2_0_g64".into()));
    }
    w.write_file(path).with_context(|| format!("writing {}", path.display()))?;
    Ok(std::fs::metadata(path)?.len())
}

/// Upstream Q2_0 blocks (f16 d, then 16 bytes of 2-bit codes, 64 weights) of a Q2 matrix: each
/// 128-group's scale and its two halves of code bytes (the code bytes are laid out alike).
fn q2_g64_blocks(m: &QMatrix) -> Vec<u8> {
    let (_, g128) = gguf_blocks(m);
    const G128_BYTES: usize = 2 + 32;
    let mut out = Vec::with_capacity(g128.len() / G128_BYTES * 36);
    for block in g128.chunks_exact(G128_BYTES) {
        let (d, codes) = block.split_at(2);
        for half in codes.chunks_exact(16) {
            out.extend_from_slice(d);
            out.extend_from_slice(half);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use bonsai_model::sampler::Rng;
    use bonsai_model::synthetic::{random_matrix, WeightKind};
    use bonsai_model::weights::{q2_from_two_bit_blocks, TwoBitBlocks};

    /// A ternary matrix written as paired g64 blocks reads back as the same matrix.
    #[test]
    fn ternary_matrices_round_trip_through_upstream_q2_0() {
        let mut rng = Rng::new(7);
        let m = random_matrix(&mut rng, WeightKind::Ternary, 5, 384).unwrap();
        let bytes = q2_g64_blocks(&m);
        assert_eq!(bytes.len(), 5 * 384 / 64 * 18);
        let back = q2_from_two_bit_blocks("t", TwoBitBlocks::PairedG64, 5, 384, &bytes).unwrap();
        assert_eq!(QMatrix::Q2(back), m);
    }

    /// The tiny model's file loads in bonsai with the padded vocabulary.
    #[test]
    fn the_tiny_file_loads_with_its_padded_tokenizer() {
        let path = std::env::temp_dir().join(format!("bonsai-synthetic-file-{}.gguf", std::process::id()));
        write(SyntheticModel::Tiny, &path).unwrap();
        let loaded = bonsai_model::loader::open_model(&path, bonsai_model::CpuBackend, Some(16));
        std::fs::remove_file(&path).ok();
        let loaded = loaded.unwrap();
        let tokenizer = loaded.tokenizer.expect("a tokenizer");
        assert_eq!(loaded.model.config().vocab, SyntheticModel::Tiny.geometry().expect("qwen3").vocab);
        assert_eq!(tokenizer.vocab_size(), SyntheticModel::Tiny.geometry().expect("qwen3").vocab);
        assert_eq!(tokenizer.encode("ab").unwrap().len(), 2);
    }

    /// The qwen35 file reads back as the bench's geometry without its fold, and runs.
    #[test]
    fn the_qwen35_file_is_the_unfolded_bench_model() {
        let path = std::env::temp_dir().join(format!("bonsai-synthetic-qwen35-{}.gguf", std::process::id()));
        write(SyntheticModel::Qwen35Tiny, &path).unwrap();
        let file = bonsai_gguf::GgufFile::open(&path).unwrap();
        let mut want = SyntheticModel::Qwen35Tiny.qwen35(BENCH_SEED).expect("qwen35");
        want.hadamard = None;
        assert_eq!(bonsai_gguf::Qwen35Config::from_gguf(&file).unwrap(), want);
        let loaded = bonsai_model::loader::open_model(&path, bonsai_model::CpuBackend, Some(16));
        std::fs::remove_file(&path).ok();
        let loaded = loaded.unwrap();
        let ids = loaded.tokenizer.expect("a tokenizer").encode("ab").unwrap();
        let model = &loaded.model;
        let mut state = model.new_state(ids.len(), false).unwrap();
        model.forward_chunk(&mut state, &ids, bonsai_model::LogitRows::Last).unwrap();
        let mut logits = vec![0.0; want.vocab];
        model.logits(&state, 0, &mut logits).unwrap();
        assert!(logits.iter().all(|x| x.is_finite()) && logits.iter().any(|&x| x != 0.0));
    }
}

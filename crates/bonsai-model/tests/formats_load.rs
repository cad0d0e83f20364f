//! One ternary model stored in every ternary format bonsai reads (PQ2_0, PTQ1_0, TQ2_0, TQ1_0,
//! and Q2_0 g64 with paired scales) loads to the same kernel weights, so the logits are
//! bit-identical; the files are made by `requantize` (the `bonsai quantize` path), whose exact
//! re-packs are what is under test together with the loader's transcodes.

mod common;

use bonsai_gguf::{GgufFile, TensorType, TwoBitLayout};
use bonsai_kernels::QMatrix;
use bonsai_model::demo::{demo_tokenizer_parts, model_gguf_writer};
use bonsai_model::loader::load_model;
use bonsai_model::requantize::{requantize, RequantizeError};
use bonsai_model::synthetic::{random_tensors, Geometry, MemTensor, WeightKind};
use bonsai_model::{CpuBackend, LogitRows};
use common::{fresh_seed, tiny_geometry};

fn logits_of(file: &GgufFile) -> Vec<f32> {
    let loaded = load_model(file, CpuBackend, None).unwrap();
    let tokens = loaded.text_tokenizer().unwrap().encode("<|im_start|>user\nhi there").unwrap();
    let model = &loaded.model;
    let mut state = model.new_state(tokens.len(), false).unwrap();
    model.forward_chunk(&mut state, &tokens, LogitRows::Last).unwrap();
    let mut out = vec![0.0; model.config().vocab];
    model.logits(&state, 0, &mut out).unwrap();
    out
}

fn repacked(
    file: &GgufFile,
    to: TensorType,
    allow_lossy: bool,
) -> Result<GgufFile, RequantizeError> {
    let mut bytes = Vec::new();
    requantize(file, to, allow_lossy, &mut bytes, &mut |_| {})?;
    Ok(GgufFile::from_bytes(bytes).unwrap())
}

#[test]
fn every_ternary_format_gives_bit_identical_logits() {
    // Every K (hidden 256, ffn 512, q rows 256) is a multiple of TQ's 256-weight group.
    let g = Geometry { vocab: 259, ..tiny_geometry() };
    let seed = fresh_seed();
    let mut tensors = random_tensors(&g, WeightKind::Ternary, seed).unwrap();
    // TQ1_0/TQ2_0 share one scale per 256 weights: give each pair of 128-groups one scale.
    for t in tensors.tensors.values_mut() {
        if let MemTensor::Matrix(QMatrix::Q2(m)) = t {
            for pair in m.scales.chunks_exact_mut(2) {
                pair[1] = pair[0];
            }
        }
    }
    let mut bytes = Vec::new();
    model_gguf_writer(&g, &tensors, Some(&demo_tokenizer_parts()), None)
        .unwrap()
        .write_to(&mut bytes)
        .unwrap();
    let pq2 = GgufFile::from_bytes(bytes).unwrap();
    assert_eq!(pq2.tensor("blk.0.attn_q.weight").unwrap().info.type_id, 142);
    let want = logits_of(&pq2);
    assert!(want.iter().all(|x| x.is_finite()), "seed {seed}");

    for (to, id) in [
        (TensorType::Ptq1_0, 143),
        (TensorType::Tq2_0, 35),
        (TensorType::Tq1_0, 34),
        (TensorType::TwoBit(TwoBitLayout::Q2G64ScaleFirst), 42),
    ] {
        let file = repacked(&pq2, to, false)
            .unwrap_or_else(|e| panic!("{}: {e} (seed {seed})", to.name()));
        let info = &file.tensor("blk.1.ffn_down.weight").unwrap().info;
        assert_eq!((info.ty, info.type_id), (to, id), "seed {seed}");
        let got = logits_of(&file);
        let first_diff = got.iter().zip(&want).position(|(a, b)| a.to_bits() != b.to_bits());
        assert_eq!(first_diff, None, "{}: logits differ from PQ2_0 (seed {seed})", to.name());
    }
}

#[test]
fn unpaired_scales_are_lossy_for_256_groups_and_refused_by_name() {
    let g = Geometry { vocab: 259, ..tiny_geometry() };
    let seed = fresh_seed();
    // Independent scales per 128-group (the synthetic default) cannot share TQ's one scale.
    let tensors = random_tensors(&g, WeightKind::Ternary, seed).unwrap();
    let mut bytes = Vec::new();
    model_gguf_writer(&g, &tensors, Some(&demo_tokenizer_parts()), None)
        .unwrap()
        .write_to(&mut bytes)
        .unwrap();
    let pq2 = GgufFile::from_bytes(bytes).unwrap();
    let err = repacked(&pq2, TensorType::Tq2_0, false).expect_err("lossy");
    let msg = err.to_string();
    assert!(
        msg.contains("different scales")
            && msg.contains("--allow-lossy")
            && msg.contains("tensor '"),
        "{msg}"
    );
    // PTQ1_0 keeps 128-groups: exact, and the same logits.
    let ptq1 = repacked(&pq2, TensorType::Ptq1_0, false).unwrap();
    assert_eq!(logits_of(&ptq1), logits_of(&pq2), "seed {seed}");
}

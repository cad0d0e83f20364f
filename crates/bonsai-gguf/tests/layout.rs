//! Detection of the three layouts behind GGUF type id 42.

mod common;

use bonsai_gguf::blocks::type_id;
use bonsai_gguf::{
    keys, quantize, GgufError, GgufFile, GgufWriter, MetaValue, TensorType, TwoBitLayout,
};
use common::{to_bytes, Rng};

const LAYOUTS: [TwoBitLayout; 3] = [
    TwoBitLayout::Tq2G128ScaleLast,
    TwoBitLayout::Pq2G128ScaleFirst,
    TwoBitLayout::Q2G64ScaleFirst,
];
/// 256 x 16 weights: 32 blocks of 128 (1088 B) or 64 blocks of 64 (1152 B). The two sizes differ
/// by more than the 32-byte alignment, so the block size is decided by length alone.
const SHAPE: [u64; 2] = [256, 16];

/// (name, shape, type, on-disk type id, bytes)
type TensorSpec<'a> = (&'a str, &'a [u64], TensorType, u32, Vec<u8>);

fn file_with(tensors: &[TensorSpec<'_>], meta: &[(&str, &str)]) -> Result<GgufFile, GgufError> {
    let mut w = GgufWriter::new();
    for (k, v) in meta {
        w.add_metadata(k, MetaValue::String(v.to_string()));
    }
    for (name, shape, ty, id, data) in tensors {
        w.add_tensor_with_type_id(name, shape, *ty, *id, data.clone())?;
    }
    GgufFile::from_bytes(to_bytes(&w))
}

fn random_two_bit(rng: &mut Rng, layout: TwoBitLayout) -> (Vec<u8>, Vec<f32>) {
    let ty = TensorType::TwoBit(layout);
    let data = quantize(ty, &rng.vec(4096, 1.0)).expect("quantize");
    let mut decoded = vec![0.0; 4096];
    bonsai_gguf::dequantize(ty, &data, &mut decoded).expect("dequantize");
    (data, decoded)
}

#[test]
fn each_layout_is_detected_from_length_and_structure() {
    let mut rng = Rng::fresh("detect");
    for layout in LAYOUTS {
        let ty = TensorType::TwoBit(layout);
        let (data, expected) = random_two_bit(&mut rng, layout);
        // A second tensor after it makes the region bound the next offset, not the file end.
        let norm = quantize(TensorType::F32, &rng.vec(256, 1.0)).expect("f32");
        let file = file_with(
            &[
                ("w", &SHAPE, ty, type_id::TWO_BIT_SHARED, data),
                ("n", &[256], TensorType::F32, 0, norm),
            ],
            &[],
        )
        .unwrap_or_else(|e| panic!("{}: {e}", ty.name()));
        let view = file.tensor("w").expect("w");
        assert_eq!(view.info.ty, ty, "detected layout");
        assert_eq!(view.info.type_id, 42);
        assert_eq!(view.dequantize_to_vec().expect("dequantize"), expected);
    }
}

#[test]
fn metadata_tags_decide_the_byte_order() {
    let mut rng = Rng::fresh("hint");
    // All-zero tensors read as both byte orders structurally, so only the tag can decide.
    let zeros = quantize(TensorType::TwoBit(TwoBitLayout::Tq2G128ScaleLast), &[0.0; 4096])
        .expect("quantize");
    let cases = [
        (keys::BONSAI_TWO_BIT_LAYOUT, "tq2_0_g128", TwoBitLayout::Tq2G128ScaleLast),
        (keys::BONSAI_TWO_BIT_LAYOUT, "q2_0_g128", TwoBitLayout::Pq2G128ScaleFirst),
        (keys::GENERAL_QUANTIZATION_VERSION, "TQ2_0_G128", TwoBitLayout::Tq2G128ScaleLast),
        (keys::GENERAL_FILE_TYPE, "PQ2_0", TwoBitLayout::Pq2G128ScaleFirst),
    ];
    for (key, tag, layout) in cases {
        let ty = TensorType::TwoBit(layout);
        let file =
            file_with(&[("w", &SHAPE, ty, 42, zeros.clone())], &[(key, tag)]).expect("tagged file");
        assert_eq!(file.tensor("w").expect("w").info.ty, ty, "{key} = {tag}");
    }
    // A tag that contradicts the tensor's length is an error naming the tensor.
    let (g64, _) = random_two_bit(&mut rng, TwoBitLayout::Q2G64ScaleFirst);
    let ty = TensorType::TwoBit(TwoBitLayout::Q2G64ScaleFirst);
    let err =
        file_with(&[("w", &SHAPE, ty, 42, g64)], &[(keys::BONSAI_TWO_BIT_LAYOUT, "tq2_0_g128")])
            .expect_err("conflict");
    assert!(matches!(&err, GgufError::AmbiguousLayout { name, .. } if name == "w"), "{err}");
    // An unknown value in bonsai's own key is rejected, not ignored.
    let err = file_with(&[], &[(keys::BONSAI_TWO_BIT_LAYOUT, "q3")]).expect_err("bad tag");
    assert!(err.to_string().contains(keys::BONSAI_TWO_BIT_LAYOUT), "{err}");
}

#[test]
fn undecidable_tensors_are_errors_naming_the_tensor() {
    // All-zero g128 data: scale 0 at the end and 0x55 0x55 (= 85.3) at the start both look valid.
    let ty = TensorType::TwoBit(TwoBitLayout::Tq2G128ScaleLast);
    let zeros = quantize(ty, &[0.0; 4096]).expect("quantize");
    let err = file_with(&[("blk.0.ffn_up.weight", &SHAPE, ty, 42, zeros)], &[])
        .expect_err("ambiguous order");
    let msg = err.to_string();
    assert!(msg.starts_with("tensor 'blk.0.ffn_up.weight': cannot tell"), "{msg}");

    // One row of 128: 34 B and 36 B both fit the 64-byte padded region.
    let mut rng = Rng::fresh("undecidable");
    let small = quantize(ty, &rng.vec(128, 1.0)).expect("quantize");
    let err = file_with(&[("tiny", &[128], ty, 42, small)], &[]).expect_err("ambiguous size");
    assert!(err.to_string().contains("both 64- and 128-weight blocks fit"), "{err}");

    // Garbage where neither end holds a plausible scale (all bytes 0xFF: NaN f16, codes 11).
    let err = file_with(&[("junk", &SHAPE, ty, 42, vec![0xFF; 1088])], &[]).expect_err("no scale");
    assert!(err.to_string().contains("no plausible f16 scale"), "{err}");
}

#[test]
fn id_142_and_code_11_mean_scale_first() {
    let ty = TensorType::TwoBit(TwoBitLayout::Pq2G128ScaleFirst);
    // Id 142 is unambiguous even for data that sniffs both ways.
    let zeros = quantize(ty, &[0.0; 4096]).expect("quantize");
    let file = file_with(&[("w", &SHAPE, ty, type_id::PQ2_0, zeros)], &[]).expect("id 142");
    assert_eq!(file.tensor("w").expect("w").info.ty, ty);
    // Id 42 blocks with d = 0.5 first and codes 11 (+2): the TQ2 reading is excluded by the 11s.
    let block = [half::f16::from_f32(0.5).to_le_bytes().to_vec(), vec![0xFF; 32]].concat();
    let data = block.repeat(32);
    let file = file_with(&[("w", &SHAPE, ty, 42, data)], &[]).expect("code 11");
    let view = file.tensor("w").expect("w");
    assert_eq!(view.info.ty, ty);
    assert!(
        view.dequantize_to_vec().expect("dequantize").iter().all(|&v| v == 1.0),
        "(3 - 1) * 0.5"
    );
}

#[test]
fn one_file_one_layout_decided_by_its_unambiguous_tensors() {
    let mut rng = Rng::fresh("one_layout");
    let g64 = TensorType::TwoBit(TwoBitLayout::Q2G64ScaleFirst);
    let (big, _) = random_two_bit(&mut rng, TwoBitLayout::Q2G64ScaleFirst);
    // One row of 128 fits both block sizes on its own; the big tensor decides for the file.
    let tiny = quantize(g64, &rng.vec(128, 1.0)).expect("quantize");
    let file = file_with(&[("big", &SHAPE, g64, 42, big.clone()), ("tiny", &[128], g64, 42, tiny.clone())], &[])
        .expect("resolved by the big tensor");
    assert_eq!(file.tensor("tiny").expect("tiny").info.ty, g64);
    let resolution = file.two_bit_resolution().expect("resolution");
    assert_eq!(resolution.layout, TwoBitLayout::Q2G64ScaleFirst);
    assert!(
        resolution.reason.starts_with("18-byte blocks of 64 weights fit the offset table for all 2 id-42 tensors"),
        "{}",
        resolution.reason
    );
    assert_eq!(file.type_reason(g64, 42), resolution.reason);

    // A g128 tensor next to a g64 one: the file holds two layouts under one id, refused.
    let pq2 = TensorType::TwoBit(TwoBitLayout::Pq2G128ScaleFirst);
    let (g128, _) = random_two_bit(&mut rng, TwoBitLayout::Pq2G128ScaleFirst);
    let err = file_with(&[("a", &SHAPE, g64, 42, big), ("b", &SHAPE, pq2, 42, g128.clone())], &[])
        .expect_err("mixed block sizes");
    assert!(err.to_string().contains("disagree on the block size"), "{err}");

    // The g128 reason names the block size and the byte-order evidence.
    let file = file_with(&[("w", &SHAPE, pq2, 42, g128)], &[]).expect("g128");
    let reason = &file.two_bit_resolution().expect("resolution").reason;
    assert!(reason.starts_with("34-byte blocks of 128 weights fit the offset table"), "{reason}");
    assert!(reason.contains("scale first"), "{reason}");
    // Other ids say so.
    assert_eq!(file.type_reason(TensorType::Ptq1_0, type_id::PTQ1_0), "type id 143 is PTQ1_0's own");
}

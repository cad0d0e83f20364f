//! `Qwen35Config` and the `prism.hadamard.*` contract: every field read, and one clear error for
//! each way the contract can be broken (bonsai2.md §3.1, §3.3, §4.1).

use bonsai_gguf::keys::{hadamard as hk, qwen35 as k};
use bonsai_gguf::{GgufFile, GgufWriter, LayerKind, MetaValue, Qwen35Config, Signs, TensorType, ValueType};

const HIDDEN: u64 = 256;
const VOCAB: u64 = 8;
const BLOCK: u32 = 128;

fn u32v(v: u32) -> MetaValue {
    MetaValue::U32(v)
}

fn strv(s: &str) -> MetaValue {
    MetaValue::String(s.to_string())
}

fn str_array(items: &[&str]) -> MetaValue {
    MetaValue::Array(ValueType::String, items.iter().map(|s| strv(s)).collect())
}

/// A metadata-complete qwen35 file (2 layers: recurrent, full) with the tensors whose widths the
/// Hadamard contract checks: token_embd, output, and one folded matrix per width.
fn base_writer() -> GgufWriter {
    writer_with(2, Some(2))
}

/// [`base_writer`] with `n_layers` layers and `full_attention_interval` (None: key absent).
fn writer_with(n_layers: u32, interval: Option<u32>) -> GgufWriter {
    let mut w = GgufWriter::new();
    let meta: [(&str, MetaValue); 18] = [
        ("general.architecture", strv("qwen35")),
        (k::BLOCK_COUNT, u32v(n_layers)),
        (k::EMBEDDING_LENGTH, u32v(HIDDEN as u32)),
        (k::FEED_FORWARD_LENGTH, u32v(512)),
        (k::HEAD_COUNT, u32v(4)),
        (k::HEAD_COUNT_KV, u32v(2)),
        (k::KEY_LENGTH, u32v(64)),
        (k::VALUE_LENGTH, u32v(64)),
        (k::CONTEXT_LENGTH, u32v(512)),
        (k::RMS_EPS, MetaValue::F32(1e-6)),
        (k::ROPE_FREQ_BASE, MetaValue::F32(1e7)),
        (k::ROPE_DIMENSION_COUNT, u32v(16)),
        (k::ROPE_DIMENSION_SECTIONS, MetaValue::Array(ValueType::I32, [3, 3, 2, 0].map(MetaValue::I32).to_vec())),
        (k::SSM_CONV_KERNEL, u32v(4)),
        (k::SSM_STATE_SIZE, u32v(64)),
        (k::SSM_GROUP_COUNT, u32v(2)),
        (k::SSM_TIME_STEP_RANK, u32v(6)),
        (k::SSM_INNER_SIZE, u32v(384)),
    ];
    for (key, v) in meta {
        w.add_metadata(key, v);
    }
    if let Some(interval) = interval {
        w.add_metadata(k::FULL_ATTENTION_INTERVAL, u32v(interval));
    }
    for (name, shape) in [
        ("token_embd.weight", [HIDDEN, VOCAB]),
        ("output.weight", [HIDDEN, VOCAB]),
        ("blk.0.attn_qkv.weight", [HIDDEN, 640]),
        ("blk.0.ssm_out.weight", [384, HIDDEN]),
        ("blk.0.ffn_down.weight", [512, HIDDEN]),
    ] {
        let n = (shape[0] * shape[1]) as usize;
        w.add_tensor(name, &shape, TensorType::F32, vec![0u8; 4 * n]).expect("tensor");
    }
    w
}

/// Explicit signs for widths 256, 384, 512 (alternating ±1), as `elem`-typed values.
fn sign_values(elem: ValueType) -> MetaValue {
    let n = 256 + 384 + 512;
    let v = |i: usize| if i.is_multiple_of(3) { -1i64 } else { 1 };
    let items = (0..n)
        .map(|i| match elem {
            ValueType::I8 => MetaValue::I8(v(i) as i8),
            ValueType::I32 => MetaValue::I32(v(i) as i32),
            ValueType::I64 => MetaValue::I64(v(i)),
            ValueType::F32 => MetaValue::F32(v(i) as f32),
            ValueType::F64 => MetaValue::F64(v(i) as f64),
            other => panic!("{other:?}"),
        })
        .collect();
    MetaValue::Array(elem, items)
}

fn with_hadamard(w: &mut GgufWriter) {
    w.add_metadata(hk::VERSION, u32v(1));
    w.add_metadata(hk::BLOCK_SIZE, u32v(BLOCK));
    w.add_metadata(hk::TRANSFORM, strv(hk::TRANSFORM_SYLVESTER));
    w.add_metadata(hk::AXIS, strv(hk::AXIS_INPUT_LAST));
    w.add_metadata(hk::SIGN_MODE, strv(hk::SIGN_MODE_EXPLICIT));
    w.add_metadata(hk::SIGN_WIDTHS, MetaValue::Array(ValueType::I32, [256, 384, 512].map(MetaValue::I32).to_vec()));
    w.add_metadata(hk::SIGN_VALUES, sign_values(ValueType::I32));
    w.add_metadata(
        hk::WEIGHT_NAMES,
        str_array(&["output.weight", "blk.0.attn_qkv.weight", "blk.0.ssm_out.weight", "blk.0.ffn_down.weight"]),
    );
    w.add_metadata(hk::INVERSE_WEIGHT_NAMES, str_array(&["token_embd.weight"]));
    w.add_metadata(hk::GDN_V_GROUPED, MetaValue::Bool(true));
}

fn read(w: &GgufWriter) -> Result<Qwen35Config, bonsai_gguf::GgufError> {
    let mut bytes = Vec::new();
    w.write_to(&mut bytes).expect("write");
    Qwen35Config::from_gguf(&GgufFile::from_bytes(bytes).expect("read"))
}

/// The error message of the base Hadamard file after `edit`.
fn hadamard_error(edit: impl FnOnce(&mut GgufWriter)) -> String {
    let mut w = base_writer();
    with_hadamard(&mut w);
    edit(&mut w);
    read(&w).expect_err("broken contract accepted").to_string()
}

#[test]
fn plain_config_reads_every_field_and_the_interval_schedule() {
    let c = read(&base_writer()).expect("config");
    assert_eq!((c.n_layers, c.hidden, c.ffn, c.vocab, c.context_len), (2, 256, 512, 8, 512));
    assert_eq!((c.n_q_heads, c.n_kv_heads, c.head_dim, c.rot_dims), (4, 2, 64, 16));
    assert_eq!(c.rope_sections, [3, 3, 2, 0]);
    assert_eq!((c.rope_theta, c.rms_eps), (1e7, 1e-6));
    assert_eq!((c.conv_kernel, c.ssm_head_dim, c.ssm_k_heads, c.ssm_v_heads), (4, 64, 2, 6));
    assert_eq!((c.ssm_conv_channels(), c.ssm_value_dim()), (640, 384));
    // interval 2: layer 1 ((1 + 1) % 2 == 0) is full attention.
    assert_eq!(c.layers, [LayerKind::Recurrent, LayerKind::FullAttention]);
    assert!(!c.tied_embeddings);
    assert!(c.hadamard.is_none());
}

#[test]
fn recurrent_layers_override_the_interval() {
    let mut w = base_writer();
    w.add_metadata(k::RECURRENT_LAYERS, MetaValue::Array(ValueType::Bool, vec![MetaValue::Bool(false), MetaValue::Bool(true)]));
    assert_eq!(read(&w).expect("config").layers, [LayerKind::FullAttention, LayerKind::Recurrent]);
    w.add_metadata(k::RECURRENT_LAYERS, MetaValue::Array(ValueType::Bool, vec![MetaValue::Bool(true)]));
    let msg = read(&w).expect_err("length").to_string();
    assert!(msg.contains("recurrent_layers") && msg.contains("one per layer"), "{msg}");
}

#[test]
fn default_interval_is_four() {
    let layers = read(&writer_with(8, None)).expect("config").layers;
    let full: Vec<usize> = (0..8).filter(|&i| layers[i] == LayerKind::FullAttention).collect();
    assert_eq!(full, [3, 7]);
}

#[test]
fn geometry_errors_name_the_key() {
    let cases: [(&str, MetaValue, &str); 5] = [
        (k::ROPE_DIMENSION_COUNT, u32v(15), "even"),
        (k::ROPE_DIMENSION_COUNT, u32v(128), "at most the head dimension"),
        (k::SSM_TIME_STEP_RANK, u32v(5), "multiple of the 2 K heads"),
        (k::SSM_INNER_SIZE, u32v(256), "time_step_rank x state_size"),
        (k::NEXTN_PREDICT_LAYERS, u32v(1), "multi-token-prediction"),
    ];
    for (key, value, needle) in cases {
        let mut w = base_writer();
        w.add_metadata(key, value);
        let msg = read(&w).expect_err(key).to_string();
        assert!(msg.contains(key) && msg.contains(needle), "{key}: {msg}");
    }
}

#[test]
fn hadamard_contract_reads_signs_of_any_numeric_type() {
    for elem in [ValueType::I8, ValueType::I32, ValueType::I64, ValueType::F32, ValueType::F64] {
        let mut w = base_writer();
        with_hadamard(&mut w);
        w.add_metadata(hk::SIGN_VALUES, sign_values(elem));
        let h = read(&w).expect("config").hadamard.expect("hadamard");
        assert_eq!((h.version, h.block), (1, 128));
        assert!(h.inverse_token_embd && h.gdn_v_grouped && !h.tied_output);
        assert!(h.folds("blk.0.ssm_out.weight") && !h.folds("blk.0.ssm_alpha.weight"));
        let s384 = h.sign_vector(384).expect("384 signs");
        // Width 384 starts at value 256 of the concatenation; value i is -1 when i % 3 == 0, so
        // values 256, 257, 258 are +1, +1, -1.
        assert_eq!(&s384[..3], &[1.0, 1.0, -1.0], "{elem:?}");
        assert!(h.sign_vector(128).is_none());
        assert!(matches!(h.signs, Signs::Explicit(ref m) if m.len() == 3));
    }
}

#[test]
fn identity_sign_mode_gives_all_plus_one_for_any_block_multiple() {
    let mut w = base_writer();
    with_hadamard(&mut w);
    w.add_metadata(hk::SIGN_MODE, strv(hk::SIGN_MODE_IDENTITY));
    let h = read(&w).expect("config").hadamard.expect("hadamard");
    assert_eq!(h.signs, Signs::Identity);
    assert_eq!(h.sign_vector(384), Some(vec![1.0; 384]));
    assert_eq!(h.sign_vector(100), None);
}

#[test]
fn hadamard_rejects_unknown_variants() {
    let msg = hadamard_error(|w| w.add_metadata(hk::VERSION, u32v(3)));
    assert!(msg.contains("prism.hadamard.version") && msg.contains("is 3"), "{msg}");
    let msg = hadamard_error(|w| w.add_metadata(hk::TRANSFORM, strv("dct")));
    assert!(msg.contains("prism.hadamard.transform") && msg.contains("\"dct\""), "{msg}");
    let msg = hadamard_error(|w| w.add_metadata(hk::AXIS, strv("output-first-dimension")));
    assert!(msg.contains("prism.hadamard.axis"), "{msg}");
    let msg = hadamard_error(|w| w.add_metadata(hk::SIGN_MODE, strv("random")));
    assert!(msg.contains("prism.hadamard.sign_mode") && msg.contains("random"), "{msg}");
    let msg = hadamard_error(|w| w.add_metadata("prism.rotation.kind", strv("givens")));
    assert!(msg.contains("prism.rotation.kind") && msg.contains("does not know"), "{msg}");
    let msg = hadamard_error(|w| w.add_metadata(hk::VERSION, MetaValue::String("1".into())));
    assert!(msg.contains("prism.hadamard.version") && msg.contains("string"), "{msg}");
}

#[test]
fn hadamard_rejects_bad_blocks_widths_and_values() {
    let msg = hadamard_error(|w| w.add_metadata(hk::BLOCK_SIZE, u32v(96)));
    assert!(msg.contains("block_size") && msg.contains("power of two"), "{msg}");
    let msg = hadamard_error(|w| w.add_metadata(hk::BLOCK_SIZE, u32v(0)));
    assert!(msg.contains("block_size"), "{msg}");
    // 384 is not a multiple of a 256 block.
    let msg = hadamard_error(|w| w.add_metadata(hk::BLOCK_SIZE, u32v(256)));
    assert!(msg.contains("sign_widths") && msg.contains("multiple of the block 256"), "{msg}");
    let msg = hadamard_error(|w| w.add_metadata(hk::SIGN_WIDTHS, MetaValue::Array(ValueType::I32, vec![])));
    assert!(msg.contains("sign_widths") && msg.contains("empty"), "{msg}");
    // Value count must match the widths exactly.
    let msg = hadamard_error(|w| {
        w.add_metadata(hk::SIGN_WIDTHS, MetaValue::Array(ValueType::I32, [256, 384].map(MetaValue::I32).to_vec()))
    });
    assert!(msg.contains("sign_values") && msg.contains("add up to 640"), "{msg}");
    let msg = hadamard_error(|w| {
        w.add_metadata(hk::SIGN_WIDTHS, MetaValue::Array(ValueType::I32, [256, 256, 640].map(MetaValue::I32).to_vec()))
    });
    assert!(msg.contains("twice"), "{msg}");
    // A value other than ±1, as an integer and as a float.
    let msg = hadamard_error(|w| {
        let mut v = sign_values(ValueType::I32);
        if let MetaValue::Array(_, items) = &mut v {
            items[5] = MetaValue::I32(0);
        }
        w.add_metadata(hk::SIGN_VALUES, v);
    });
    assert!(msg.contains("value 5 is 0"), "{msg}");
    let msg = hadamard_error(|w| {
        let mut v = sign_values(ValueType::F32);
        if let MetaValue::Array(_, items) = &mut v {
            items[7] = MetaValue::F32(0.5);
        }
        w.add_metadata(hk::SIGN_VALUES, v);
    });
    assert!(msg.contains("value 7 is 0.5"), "{msg}");
    let msg = hadamard_error(|w| w.add_metadata(hk::SIGN_VALUES, str_array(&["+"])));
    assert!(msg.contains("sign_values") && msg.contains("string"), "{msg}");
    // A folded weight whose width has no sign vector (ffn_down is 512 wide).
    let msg = hadamard_error(|w| {
        let mut v = sign_values(ValueType::I32);
        if let MetaValue::Array(_, items) = &mut v {
            items.truncate(640);
        }
        w.add_metadata(hk::SIGN_WIDTHS, MetaValue::Array(ValueType::I32, [256, 384].map(MetaValue::I32).to_vec()));
        w.add_metadata(hk::SIGN_VALUES, v);
    });
    assert!(msg.contains("no sign vector for width 512") && msg.contains("ffn_down"), "{msg}");
}

#[test]
fn hadamard_rejects_bad_weight_lists() {
    for bad in ["blk.0.ssm_alpha.weight", "token_embd.weight", "blk.x.attn_q.weight", "blk.0.attn_q", "attn_q.weight"] {
        let msg = hadamard_error(|w| w.add_metadata(hk::WEIGHT_NAMES, str_array(&["output.weight", bad])));
        assert!(msg.contains("weight_names") && msg.contains(bad), "{bad}: {msg}");
    }
    let msg = hadamard_error(|w| w.add_metadata(hk::WEIGHT_NAMES, str_array(&["output.weight", "output.weight"])));
    assert!(msg.contains("twice"), "{msg}");
    let msg = hadamard_error(|w| w.add_metadata(hk::WEIGHT_NAMES, str_array(&["blk.1.attn_q.weight"])));
    assert!(msg.contains("blk.1.attn_q.weight") && msg.contains("does not hold"), "{msg}");
    let msg = hadamard_error(|w| w.add_metadata(hk::INVERSE_WEIGHT_NAMES, str_array(&["output.weight"])));
    assert!(msg.contains("inverse_weight_names") && msg.contains("only token_embd.weight"), "{msg}");
}

#[test]
fn hadamard_version_two_needs_a_tied_head() {
    let msg = hadamard_error(|w| w.add_metadata(hk::VERSION, u32v(2)));
    assert!(msg.contains("version") && msg.contains("tied_output"), "{msg}");
    let msg = hadamard_error(|w| w.add_metadata(hk::TIED_OUTPUT, MetaValue::Bool(true)));
    assert!(msg.contains("tied_output") && msg.contains("only version 2"), "{msg}");
}

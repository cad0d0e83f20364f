//! Reader/writer round trips, typed metadata access, config and tokenizer parsing, and the error
//! for each kind of bad file.

mod common;

use bonsai_gguf::{
    keys, GgufError, GgufFile, GgufWriter, MetaValue, Qwen3Config, RopeScalingKind, TensorType,
    TokenizerMeta, ValueType,
};
use common::{tiny_qwen3, to_bytes, Rng};

fn every_value_type() -> Vec<(&'static str, MetaValue)> {
    let s = |v: &str| MetaValue::String(v.to_string());
    vec![
        ("t.u8", MetaValue::U8(200)),
        ("t.i8", MetaValue::I8(-100)),
        ("t.u16", MetaValue::U16(60000)),
        ("t.i16", MetaValue::I16(-30000)),
        ("t.u32", MetaValue::U32(4_000_000_000)),
        ("t.i32", MetaValue::I32(-2_000_000_000)),
        ("t.u64", MetaValue::U64(u64::MAX)),
        ("t.i64", MetaValue::I64(i64::MIN)),
        ("t.f32", MetaValue::F32(-1.5e-7)),
        ("t.f64", MetaValue::F64(std::f64::consts::PI)),
        ("t.bool", MetaValue::Bool(true)),
        ("t.str", s("héllo ✓")),
        ("t.empty_arr", MetaValue::Array(ValueType::F64, vec![])),
        (
            "t.nested",
            MetaValue::Array(
                ValueType::Array,
                vec![
                    MetaValue::Array(ValueType::I16, vec![MetaValue::I16(-1), MetaValue::I16(2)]),
                    MetaValue::Array(ValueType::String, vec![s("a"), s("")]),
                    MetaValue::Array(ValueType::Bool, vec![MetaValue::Bool(false)]),
                ],
            ),
        ),
    ]
}

#[test]
fn generated_file_round_trips_byte_identically() {
    let mut rng = Rng::fresh("round_trip");
    for ty in [TensorType::Q1_0, TensorType::Q8_0, TensorType::F16, TensorType::BF16] {
        let mut w = tiny_qwen3(&mut rng, ty, false);
        for (k, v) in every_value_type() {
            w.add_metadata(k, v);
        }
        let bytes = to_bytes(&w);
        let file = GgufFile::from_bytes(bytes.clone()).expect("read generated file");
        assert_eq!(file.version(), 3);
        assert_eq!(file.alignment(), bonsai_gguf::DEFAULT_ALIGNMENT);
        for (k, v) in every_value_type() {
            assert_eq!(file.get(k), Some(&v), "{k}");
        }
        let again = to_bytes(&GgufWriter::from_file(&file).expect("copy"));
        assert!(again == bytes, "{}: rewrite differs", ty.name());
        let embd = file.tensor(keys::tensor::TOKEN_EMBD).expect("token_embd");
        assert_eq!(embd.info.ty, ty);
        assert_eq!(embd.data.len() as u64, embd.info.len_bytes);
        assert_eq!(embd.info.offset % file.alignment(), 0);
    }
}

#[test]
fn custom_alignment_and_mmap_open_agree_with_from_bytes() {
    let mut rng = Rng::fresh("alignment");
    let mut w = tiny_qwen3(&mut rng, TensorType::Q1_0, true);
    w.add_metadata(keys::GENERAL_ALIGNMENT, MetaValue::U32(64));
    let dir = std::env::temp_dir().join(format!("bonsai-gguf-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("aligned.gguf");
    w.write_file(&path).expect("write file");
    let mapped = GgufFile::open(&path).expect("open");
    let owned = GgufFile::from_bytes(std::fs::read(&path).expect("read")).expect("from_bytes");
    assert_eq!(mapped.alignment(), 64);
    assert_eq!(mapped.data_offset() % 64, 0);
    assert_eq!(mapped.tensors(), owned.tensors());
    for t in mapped.tensors() {
        assert_eq!(t.offset % 64, 0, "{}", t.name);
        let a = mapped.tensor(&t.name).expect("mapped view");
        let b = owned.tensor(&t.name).expect("owned view");
        assert_eq!(a.data, b.data, "{}", t.name);
        assert_eq!(
            a.dequantize_to_vec().expect("dequantize"),
            b.dequantize_to_vec().expect("dequantize")
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn qwen3_config_and_tokenizer_read_every_field() {
    let mut rng = Rng::fresh("config");
    let mut w = tiny_qwen3(&mut rng, TensorType::Q1_0, false);
    w.add_metadata(keys::QWEN3_ROPE_SCALING_TYPE, MetaValue::String("yarn".into()));
    w.add_metadata(keys::QWEN3_ROPE_SCALING_FACTOR, MetaValue::F32(4.0));
    w.add_metadata(keys::QWEN3_ROPE_SCALING_ORIG_CTX, MetaValue::U32(16384));
    w.add_metadata(keys::QWEN3_ROPE_SCALING_YARN_BETA_FAST, MetaValue::F32(16.0));
    let file = GgufFile::from_bytes(to_bytes(&w)).expect("read");
    let c = Qwen3Config::from_gguf(&file).expect("config");
    use common::*;
    assert_eq!(
        (
            c.n_layers,
            c.hidden,
            c.ffn,
            c.n_q_heads,
            c.n_kv_heads,
            c.head_dim,
            c.vocab,
            c.context_len
        ),
        (
            LAYERS as usize,
            HIDDEN as usize,
            FFN as usize,
            HEADS as usize,
            KV_HEADS as usize,
            HEAD_DIM as usize,
            VOCAB as usize,
            4096
        )
    );
    assert_eq!((c.rope_theta, c.rms_eps, c.tied_embeddings), (1e6, 1e-6, false));
    let rs = c.rope_scaling.expect("yarn");
    assert_eq!(
        (rs.kind, rs.factor, rs.original_context_len, rs.beta_fast, rs.beta_slow),
        (RopeScalingKind::Yarn, 4.0, 16384, 16.0, 1.0)
    );

    let t = TokenizerMeta::from_gguf(&file).expect("tokenizer");
    assert_eq!((t.model.as_str(), t.pre.as_deref()), ("gpt2", Some("qwen2")));
    assert_eq!(t.tokens.len(), VOCAB as usize);
    assert_eq!(t.tokens[7], "tok7");
    assert_eq!(t.token_types[VOCAB as usize - 1], 3);
    assert_eq!(t.merges, ["t o", "to k"]);
    assert_eq!((t.bos_id, t.eos_id, t.pad_id), (None, Some(VOCAB as u32 - 1), None));
    assert_eq!(t.chat_template.as_deref(), Some("{{ messages }}"));

    let tied = GgufFile::from_bytes(to_bytes(&tiny_qwen3(&mut rng, TensorType::Q1_0, true)))
        .expect("read");
    let c = Qwen3Config::from_gguf(&tied).expect("config");
    assert!(c.tied_embeddings && c.rope_scaling.is_none());
}

#[test]
fn config_errors_name_the_key() {
    let mut rng = Rng::fresh("config_errors");
    let base = tiny_qwen3(&mut rng, TensorType::Q1_0, false);
    let file_with = |edit: &dyn Fn(&mut GgufWriter)| {
        let mut bytes_writer =
            GgufWriter::from_file(&GgufFile::from_bytes(to_bytes(&base)).expect("read"))
                .expect("copy");
        edit(&mut bytes_writer);
        GgufFile::from_bytes(to_bytes(&bytes_writer)).expect("read edited")
    };
    // Missing key: rebuild without qwen3.attention.key_length.
    let src = GgufFile::from_bytes(to_bytes(&base)).expect("read");
    let mut w = GgufWriter::new();
    for (k, v) in src.metadata() {
        if k != keys::QWEN3_KEY_LENGTH {
            w.add_metadata(k, v.clone());
        }
    }
    for t in src.tensors() {
        w.add_tensor(&t.name, &t.shape, t.ty, src.tensor(&t.name).expect("view").data.to_vec())
            .expect("add");
    }
    let err = Qwen3Config::from_gguf(&GgufFile::from_bytes(to_bytes(&w)).expect("read"))
        .expect_err("missing");
    assert_eq!(err.to_string(), "missing metadata key 'qwen3.attention.key_length'");

    let f = file_with(&|w| {
        w.add_metadata(keys::GENERAL_ARCHITECTURE, MetaValue::String("llama".into()))
    });
    assert_eq!(
        Qwen3Config::from_gguf(&f).expect_err("arch").to_string(),
        "unsupported architecture 'llama' (bonsai runs qwen3 and qwen35)"
    );

    let f = file_with(&|w| w.add_metadata(keys::QWEN3_BLOCK_COUNT, MetaValue::String("2".into())));
    let msg = Qwen3Config::from_gguf(&f).expect_err("type").to_string();
    assert!(msg.contains("qwen3.block_count") && msg.contains("string"), "{msg}");

    // Without token_embd the vocabulary comes from the tokenizer list (40 tokens here).
    let mut w = GgufWriter::new();
    for (k, v) in src.metadata() {
        w.add_metadata(k, v.clone());
    }
    assert_eq!(
        Qwen3Config::from_gguf(&GgufFile::from_bytes(to_bytes(&w)).expect("read"))
            .expect("config")
            .vocab,
        40
    );
    w.add_metadata(keys::TOKENIZER_TOKENS, MetaValue::U8(0));
    let msg = Qwen3Config::from_gguf(&GgufFile::from_bytes(to_bytes(&w)).expect("read"))
        .expect_err("not a list")
        .to_string();
    assert!(msg.contains(keys::TOKENIZER_TOKENS), "{msg}");

    let f = file_with(&|w| w.add_metadata(keys::QWEN3_HEAD_COUNT, MetaValue::I64(-4)));
    let msg = Qwen3Config::from_gguf(&f).expect_err("range").to_string();
    assert!(msg.contains("qwen3.attention.head_count") && msg.contains("-4"), "{msg}");
}

#[test]
fn integer_accessors_convert_only_when_lossless() {
    let mut w = GgufWriter::new();
    w.add_metadata("a", MetaValue::U16(7));
    w.add_metadata("b", MetaValue::I64(-1));
    w.add_metadata("c", MetaValue::U64(1 << 40));
    w.add_metadata("d", MetaValue::F64(0.25));
    let f = GgufFile::from_bytes(to_bytes(&w)).expect("read");
    assert_eq!(f.get_u32("a").expect("u16 -> u32"), 7);
    assert_eq!(f.get_i64("b").expect("i64"), -1);
    assert!(matches!(f.get_u32("b"), Err(GgufError::OutOfRange { .. })));
    assert!(matches!(f.get_u32("c"), Err(GgufError::OutOfRange { .. })));
    assert_eq!(f.get_u64("c").expect("u64"), 1 << 40);
    assert_eq!(f.get_f32("d").expect("f64 -> f32"), 0.25);
    assert_eq!(f.get_f32("a").expect("int -> f32"), 7.0);
    let msg = f.get_str("d").expect_err("not a string").to_string();
    assert_eq!(msg, "metadata key 'd' has type f64, expected string");
}

/// A file with one F32 tensor named "x" of 4 weights; returns its bytes and the position of the
/// tensor's type id in the header.
fn one_tensor_file() -> (Vec<u8>, usize) {
    let mut w = GgufWriter::new();
    w.add_metadata(keys::GENERAL_NAME, MetaValue::String("t".into()));
    let data: Vec<u8> = [1.0f32, -2.0, 3.0, 0.5].iter().flat_map(|v| v.to_le_bytes()).collect();
    w.add_tensor("x", &[4], TensorType::F32, data).expect("add");
    let bytes = to_bytes(&w);
    // name length (u64 = 1), "x", n_dims (u32 = 1), dim (u64 = 4), then the type id.
    let name_at =
        bytes.windows(9).position(|s| s == [1, 0, 0, 0, 0, 0, 0, 0, b'x']).expect("tensor name")
            + 9;
    (bytes, name_at + 4 + 8)
}

#[test]
fn bad_files_give_one_line_errors_naming_the_problem() {
    let (good, type_at) = one_tensor_file();
    GgufFile::from_bytes(good.clone()).expect("good file reads");

    let mut bad = good.clone();
    bad[..4].copy_from_slice(b"GGUX");
    let msg = GgufFile::from_bytes(bad).expect_err("magic").to_string();
    assert!(msg.starts_with("not a GGUF file (magic 0x58554747"), "{msg}");

    // Version 2 has the same layout as 3 (v3 only added big-endian files): it reads.
    let mut v2 = good.clone();
    v2[4] = 2;
    assert_eq!(GgufFile::from_bytes(v2).expect("v2 reads").version(), 2);

    let mut bad = good.clone();
    bad[4] = 1;
    assert!(matches!(GgufFile::from_bytes(bad), Err(GgufError::UnsupportedVersion(1))));

    let mut bad = good.clone();
    bad[type_at..type_at + 4].copy_from_slice(&77u32.to_le_bytes());
    assert_eq!(
        GgufFile::from_bytes(bad).expect_err("type").to_string(),
        "unknown tensor type id 77 for tensor 'x'"
    );

    let mut bad = good.clone();
    bad[type_at..type_at + 4].copy_from_slice(&12u32.to_le_bytes());
    let msg = GgufFile::from_bytes(bad).expect_err("Q4_K").to_string();
    assert!(msg.contains("Q4_K") && msg.contains("'x'"), "{msg}");

    // The tensor is the last 16 data bytes (then 16 bytes of padding to 32).
    let data_end = good.len() - 16;
    let msg = GgufFile::from_bytes(good[..data_end - 1].to_vec()).expect_err("short").to_string();
    assert_eq!(
        msg,
        format!(
            "tensor 'x' data ends at byte {data_end} past the file end ({} bytes)",
            data_end - 1
        )
    );

    // Every prefix of the file fails with a typed error (and never panics).
    for len in 0..data_end {
        let err = GgufFile::from_bytes(good[..len].to_vec()).expect_err("prefix must fail");
        assert!(
            matches!(err, GgufError::Truncated { .. } | GgufError::TensorPastEnd { .. }),
            "prefix {len}: {err}"
        );
        assert!(!err.to_string().contains('\n'));
    }

    // A misaligned offset (the u64 right after the type id).
    let mut bad = good.clone();
    bad[type_at + 4] = 3;
    let msg = GgufFile::from_bytes(bad).expect_err("misaligned").to_string();
    assert!(msg.contains("'x'") && msg.contains("alignment"), "{msg}");
}

#[test]
fn hostile_counts_fail_fast_without_huge_allocations() {
    let (good, _) = one_tensor_file();
    // Claim 2^60 metadata entries: must fail on truncation, not try to reserve them.
    let mut bad = good.clone();
    bad[16..24].copy_from_slice(&(1u64 << 60).to_le_bytes());
    assert!(GgufFile::from_bytes(bad).is_err());
    // A string length of u64::MAX in the first key.
    let mut bad = good.clone();
    bad[24..32].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(matches!(GgufFile::from_bytes(bad), Err(GgufError::Truncated { .. })));
    // Arrays nested beyond the limit.
    let mut w = GgufWriter::new();
    let mut v = MetaValue::Array(ValueType::U8, vec![MetaValue::U8(1)]);
    for _ in 0..20 {
        v = MetaValue::Array(ValueType::Array, vec![v]);
    }
    w.add_metadata("deep", v);
    assert!(matches!(GgufFile::from_bytes(to_bytes(&w)), Err(GgufError::NestingTooDeep { .. })));
}

#[test]
fn writer_rejects_inconsistent_input() {
    let mut w = GgufWriter::new();
    let err = w.add_tensor("x", &[128], TensorType::Q1_0, vec![0; 17]).expect_err("short");
    assert!(err.to_string().contains("'x'"), "{err}");
    assert!(
        w.add_tensor("y", &[100], TensorType::Q1_0, vec![0; 18]).is_err(),
        "row not a block multiple"
    );
    w.add_tensor("z", &[128], TensorType::Q1_0, vec![0; 18]).expect("ok");
    assert!(matches!(
        w.add_tensor("z", &[128], TensorType::Q1_0, vec![0; 18]),
        Err(GgufError::Duplicate { .. })
    ));
    w.add_metadata("mixed", MetaValue::Array(ValueType::U8, vec![MetaValue::U16(1)]));
    assert!(w.write_to(&mut Vec::new()).is_err(), "mixed array element types");
}

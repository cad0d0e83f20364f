//! The fixture written by llama.cpp's gguf-py (scripts/fixtures/make_gguf_fixture.py) reads back
//! with exactly the metadata and tensor bytes the script recorded, decodes to the values the
//! script computed, and re-writes byte-identically.

use bonsai_gguf::{GgufFile, GgufWriter, MetaValue, ValueType};
use serde_json::Value;
use std::path::PathBuf;

fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/gguf")
}

fn value_type(name: &str) -> ValueType {
    let all = [
        ("UINT8", ValueType::U8),
        ("INT8", ValueType::I8),
        ("UINT16", ValueType::U16),
        ("INT16", ValueType::I16),
        ("UINT32", ValueType::U32),
        ("INT32", ValueType::I32),
        ("FLOAT32", ValueType::F32),
        ("BOOL", ValueType::Bool),
        ("STRING", ValueType::String),
        ("ARRAY", ValueType::Array),
        ("UINT64", ValueType::U64),
        ("INT64", ValueType::I64),
        ("FLOAT64", ValueType::F64),
    ];
    all.iter()
        .find(|(n, _)| *n == name)
        .map(|(_, t)| *t)
        .unwrap_or_else(|| panic!("unknown type {name}"))
}

/// A scalar of type `ty` from JSON.
fn scalar(ty: ValueType, v: &Value) -> MetaValue {
    let int = || v.as_i64().map(i128::from).or(v.as_u64().map(i128::from)).expect("integer");
    match ty {
        ValueType::U8 => MetaValue::U8(int() as u8),
        ValueType::I8 => MetaValue::I8(int() as i8),
        ValueType::U16 => MetaValue::U16(int() as u16),
        ValueType::I16 => MetaValue::I16(int() as i16),
        ValueType::U32 => MetaValue::U32(int() as u32),
        ValueType::I32 => MetaValue::I32(int() as i32),
        ValueType::U64 => MetaValue::U64(int() as u64),
        ValueType::I64 => MetaValue::I64(int() as i64),
        // The script writes f32 values as the exact double of the f32.
        ValueType::F32 => MetaValue::F32(v.as_f64().expect("float") as f32),
        ValueType::F64 => MetaValue::F64(v.as_f64().expect("float")),
        ValueType::Bool => MetaValue::Bool(v.as_bool().expect("bool")),
        ValueType::String => MetaValue::String(v.as_str().expect("string").to_string()),
        ValueType::Array => unreachable!("arrays are handled by expected_value"),
    }
}

fn expected_value(entry: &Value) -> MetaValue {
    let ty = value_type(entry["type"].as_str().expect("type"));
    if ty != ValueType::Array {
        return scalar(ty, &entry["value"]);
    }
    let elem = value_type(entry["elem"].as_str().expect("elem"));
    let items = entry["value"].as_array().expect("array");
    let items = items.iter().map(|v| {
        if elem == ValueType::Array {
            expected_value(v)
        } else {
            scalar(elem, v)
        }
    });
    MetaValue::Array(elem, items.collect())
}

#[test]
fn python_fixture_matches_the_scripts_record() {
    let dir = fixture_dir();
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("python_fixture.json")).expect("json"),
    )
    .expect("parse json");
    let path = dir.join("python_fixture.gguf");
    let file = GgufFile::open(&path).expect("open fixture");
    assert_eq!(u64::from(file.version()), expected["version"].as_u64().expect("version"));
    assert_eq!(file.alignment(), expected["alignment"].as_u64().expect("alignment"));

    let want_meta = expected["metadata"].as_array().expect("metadata");
    assert_eq!(file.metadata().len(), want_meta.len());
    for ((key, got), want) in file.metadata().iter().zip(want_meta) {
        assert_eq!(key, want["key"].as_str().expect("key"));
        assert_eq!(got, &expected_value(want), "{key}");
    }

    let want_tensors = expected["tensors"].as_array().expect("tensors");
    assert_eq!(file.tensors().len(), want_tensors.len());
    for (info, want) in file.tensors().iter().zip(want_tensors) {
        assert_eq!(info.name, want["name"].as_str().expect("name"));
        assert_eq!(
            u64::from(info.type_id),
            want["type_id"].as_u64().expect("type id"),
            "{}",
            info.name
        );
        let shape: Vec<u64> = want["shape"]
            .as_array()
            .expect("shape")
            .iter()
            .map(|d| d.as_u64().expect("dim"))
            .collect();
        assert_eq!(info.shape, shape, "{}", info.name);
        let view = file.tensor(&info.name).expect("view");
        let hex: String = view.data.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, want["data_hex"].as_str().expect("hex"), "{} bytes", info.name);
        // Dequantization is exact f32 arithmetic in both implementations (q·d, ±d, widening).
        let values: Vec<f32> = want["values"]
            .as_array()
            .expect("values")
            .iter()
            .map(|v| v.as_f64().expect("f") as f32)
            .collect();
        assert_eq!(view.dequantize_to_vec().expect("dequantize"), values, "{} values", info.name);
    }

    let mut rewritten = Vec::new();
    GgufWriter::from_file(&file).expect("copy").write_to(&mut rewritten).expect("write");
    assert!(
        rewritten == std::fs::read(&path).expect("read"),
        "re-written fixture differs from gguf-py's bytes"
    );
}

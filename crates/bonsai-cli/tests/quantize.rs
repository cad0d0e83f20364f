//! `bonsai quantize` run as a real process: exact re-packs between the low-bit types keep every
//! weight, every other tensor and the metadata; lossy ones are refused unless allowed; the input
//! is never written; `bonsai info` then names each type and why it reads so.

use std::path::{Path, PathBuf};
use std::process::Command;

use bonsai_gguf::{keys, GgufFile, MetaValue, TensorType};
use bonsai_model::demo::{demo_tokenizer_parts, model_gguf_writer};
use bonsai_model::synthetic::{random_tensors, Geometry, WeightKind};

fn geometry() -> Geometry {
    Geometry {
        n_layers: 1,
        hidden: 256,
        ffn: 512,
        n_q_heads: 4,
        n_kv_heads: 2,
        head_dim: 64,
        vocab: 259,
        context_len: 64,
        tied_embeddings: false,
    }
}

fn seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
}

fn temp_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bonsai-quantize-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// A random model of `kind` at `path`, with `general.file_type` set when `file_type` is given.
fn write_model(path: &Path, kind: WeightKind, seed: u64, file_type: Option<u32>) {
    let tensors = random_tensors(&geometry(), kind, seed).expect("tensors");
    let mut w = model_gguf_writer(&geometry(), &tensors, Some(&demo_tokenizer_parts()), None)
        .expect("writer");
    if let Some(ftype) = file_type {
        w.add_metadata(keys::GENERAL_FILE_TYPE, MetaValue::U32(ftype));
    }
    w.write_file(path).expect("write");
}

fn bonsai(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_bonsai")).args(args).output().expect("run bonsai");
    let text = |b: Vec<u8>| String::from_utf8(b).expect("utf-8");
    (out.status.code().unwrap_or(-1), text(out.stdout), text(out.stderr))
}

fn quantize(input: &Path, output: &Path, ty: &str, extra: &[&str]) -> (i32, String, String) {
    let (i, o) = (input.to_str().unwrap(), output.to_str().unwrap());
    bonsai(&[&["quantize", i, o, "--type", ty], extra].concat())
}

fn values(file: &GgufFile, name: &str) -> Vec<f32> {
    file.tensor(name).expect(name).dequantize_to_vec().expect("dequantize")
}

fn is_low_bit(ty: TensorType) -> bool {
    bonsai_gguf::blocks::level_range(ty).is_some()
}

#[test]
fn exact_re_packs_keep_every_weight_tensor_and_key() {
    let seed = seed();
    let dir = temp_dir("exact");
    let q1 = dir.join("q1.gguf");
    write_model(&q1, WeightKind::OneBit, seed, Some(40));
    let original = GgufFile::open(&q1).unwrap();
    let original_bytes = std::fs::read(&q1).unwrap();
    // Q1_0 -> PTQ1_0 -> PQ2_0 -> Q2_0 (g64) -> PQ2_0 (g64 pairs with one scale) -> PTQ1_0.
    let chain = [
        ("ptq1_0", "PTQ1_0", 143, 129),
        ("pq2_0", "PQ2_0", 142, 128),
        ("q2_0", "Q2_0_g64", 42, 41),
        ("pq2_0", "PQ2_0", 142, 128),
        ("ptq1_0", "PTQ1_0", 143, 129),
    ];
    let mut input = q1.clone();
    for (step, (ty, name, id, ftype)) in chain.into_iter().enumerate() {
        let output = dir.join(format!("step{step}-{ty}.gguf"));
        let (code, stdout, stderr) = quantize(&input, &output, ty, &[]);
        assert_eq!(code, 0, "{ty}: {stderr} (seed {seed})");
        assert!(stdout.contains("re-packed exactly") && !stdout.contains("with loss"), "{stdout}");
        let file = GgufFile::open(&output).unwrap();
        assert_eq!(file.tensors().len(), original.tensors().len());
        for (t, o) in file.tensors().iter().zip(original.tensors()) {
            assert_eq!((&t.name, &t.shape), (&o.name, &o.shape));
            if is_low_bit(o.ty) {
                assert_eq!((t.ty.name(), t.type_id), (name, id), "{}", t.name);
                assert_eq!(
                    values(&file, &t.name),
                    values(&original, &t.name),
                    "{ty}: {} (seed {seed})",
                    t.name
                );
            } else {
                assert_eq!(t.ty, o.ty);
                assert_eq!(
                    file.tensor(&t.name).unwrap().data,
                    original.tensor(&t.name).unwrap().data,
                    "{}",
                    t.name
                );
            }
        }
        // Metadata: the same keys in the same order and values, file type renamed, and bonsai's
        // id-42 key only on the Q2_0 g64 output.
        let keys_of = |f: &GgufFile| {
            f.metadata()
                .iter()
                .map(|(k, _)| k.clone())
                .filter(|k| k != keys::BONSAI_TWO_BIT_LAYOUT)
                .collect::<Vec<_>>()
        };
        assert_eq!(keys_of(&file), keys_of(&original));
        for (k, v) in original.metadata() {
            if k != keys::GENERAL_FILE_TYPE {
                assert_eq!(file.get(k), Some(v), "{k}");
            }
        }
        assert_eq!(file.get_u32(keys::GENERAL_FILE_TYPE).unwrap(), ftype, "{ty}");
        assert_eq!(file.get(keys::BONSAI_TWO_BIT_LAYOUT).is_some(), id == 42, "{ty}");
        input = output;
    }
    assert_eq!(std::fs::read(&q1).unwrap(), original_bytes, "the input is untouched");

    // info names each low-bit type and why it reads that way.
    let (code, text, _) = bonsai(&["info", dir.join("step2-q2_0.gguf").to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(text.contains("weights:       Q2_0_g64 (id 42, 9 tensors): 18-byte blocks of 64 weights fit the offset table for all 9 id-42 tensors"), "{text}");
    let (_, text, _) = bonsai(&["info", dir.join("step0-ptq1_0.gguf").to_str().unwrap()]);
    assert!(
        text.contains("weights:       PTQ1_0 (id 143, 9 tensors): type id 143 is PTQ1_0's own"),
        "{text}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn lossy_re_packs_need_the_flag_and_bad_requests_fail_cleanly() {
    let seed = seed();
    let dir = temp_dir("lossy");
    let ternary = dir.join("ternary.gguf");
    write_model(&ternary, WeightKind::Ternary, seed, None);
    let out = dir.join("out.gguf");

    // Ternary -> Q1_0 has no zero: refused, naming the tensor and the flag, nothing written.
    let (code, _, stderr) = quantize(&ternary, &out, "q1_0", &[]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.starts_with("error: ") && stderr.trim_end().lines().count() == 1, "{stderr}");
    assert!(
        stderr.contains("tensor '")
            && stderr.contains("no zero")
            && stderr.contains("--allow-lossy"),
        "{stderr}"
    );
    assert!(!out.exists());
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "no temporary left behind");

    // Allowed: every low-bit tensor re-quantized with Q1_0's rule (signs kept).
    let (code, stdout, stderr) = quantize(&ternary, &out, "q1_0", &["--allow-lossy"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("re-quantized with loss"), "{stdout}");
    let (src, dst) = (GgufFile::open(&ternary).unwrap(), GgufFile::open(&out).unwrap());
    assert_eq!(
        dst.get_u32(keys::GENERAL_FILE_TYPE).ok(),
        None,
        "no file type added where there was none"
    );
    for (a, b) in
        values(&src, "blk.0.ffn_up.weight").iter().zip(values(&dst, "blk.0.ffn_up.weight"))
    {
        assert_eq!(*a >= 0.0, b > 0.0, "Q1_0 keeps the sign (zero counts as positive)");
    }

    // Q2_0 g64 pairs with different scales cannot share a 128-weight scale.
    let g64 = dir.join("g64.gguf");
    let (code, _, stderr) = quantize(&ternary, &g64, "q2_0", &[]);
    assert_eq!(code, 0, "{stderr}");
    let file = GgufFile::open(&g64).unwrap();
    let name = "blk.0.attn_q.weight";
    let mut bytes = std::fs::read(&g64).unwrap();
    // Make the second block's scale of the first pair differ (its f16 sits 18 bytes in).
    let start = (file.data_offset() + file.tensor_info(name).unwrap().offset) as usize;
    bytes[start + 18..start + 20].copy_from_slice(&half::f16::from_f32(0.123).to_le_bytes());
    std::fs::write(&g64, &bytes).unwrap();
    let back = dir.join("back.gguf");
    let (code, _, stderr) = quantize(&g64, &back, "pq2_0", &[]);
    assert_eq!(code, 1);
    assert!(stderr.contains(name) && stderr.contains("different scales"), "{stderr}");
    let (code, _, stderr) = quantize(&g64, &back, "pq2_0", &["--allow-lossy"]);
    assert_eq!(code, 0, "{stderr}");

    // Never over the input; floats decode every weight exactly; the retired type names its replacements.
    let (code, _, stderr) = quantize(&ternary, &ternary, "ptq1_0", &[]);
    assert_eq!(code, 1);
    assert!(stderr.contains("is the input file"), "{stderr}");
    assert_eq!(GgufFile::open(&ternary).unwrap().tensor(name).unwrap().info.type_id, 142);
    let (code, stdout, stderr) = quantize(&ternary, &out, "f16", &[]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("F16"), "{stdout}");
    let decoded = GgufFile::open(&out).unwrap();
    assert_eq!(decoded.tensor(name).unwrap().info.ty, TensorType::F16);
    assert_eq!(values(&decoded, name), values(&GgufFile::open(&ternary).unwrap(), name));
    let (code, _, stderr) = quantize(&ternary, &out, "tq2_0_g128", &[]);
    assert_ne!(code, 0);
    assert!(stderr.contains("pq2_0") && stderr.contains("ptq1_0"), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}

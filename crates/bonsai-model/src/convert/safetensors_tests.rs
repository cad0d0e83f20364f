//! Safetensors parsing: round trip of every supported dtype, and rejection of malformed headers.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::safetensors::{parse_header, to_f32, Checkpoint, Dtype};
use super::ConvertError;

/// SplitMix64: a seeded source of test values without a dependency.
pub(crate) struct TestRng(u64);
impl TestRng {
    pub(crate) fn from_time() -> (Self, u64) {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0x5eed);
        (TestRng(seed), seed)
    }
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in [-1, 1).
    pub(crate) fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}

/// Builds a safetensors file by hand: u64 header length, JSON header, data.
pub(crate) fn encode(tensors: &[(&str, &str, Vec<usize>, Vec<u8>)]) -> Vec<u8> {
    let mut header = serde_json::Map::new();
    header.insert("__metadata__".into(), json!({"format": "pt"}));
    let mut data = Vec::new();
    for (name, dtype, shape, bytes) in tensors {
        let begin = data.len();
        data.extend_from_slice(bytes);
        header.insert(
            (*name).into(),
            json!({"dtype": dtype, "shape": shape, "data_offsets": [begin, data.len()]}),
        );
    }
    let header = serde_json::to_vec(&serde_json::Value::Object(header)).unwrap();
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&header);
    out.extend_from_slice(&data);
    out
}

pub(crate) fn temp_dir(tag: &str) -> PathBuf {
    let (mut rng, _) = TestRng::from_time();
    let dir = std::env::temp_dir().join(format!(
        "bonsai-convert-{tag}-{}-{:x}",
        std::process::id(),
        rng.next_u64()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn dtypes_decode_exactly() {
    let (mut rng, seed) = TestRng::from_time();
    let values: Vec<f32> = (0..37).map(|_| rng.unit() * 3.0).collect();
    // bf16: truncate to the top 16 bits, so the expected value is that truncation (exact).
    let bf16: Vec<u8> =
        values.iter().flat_map(|v| ((v.to_bits() >> 16) as u16).to_le_bytes()).collect();
    let f16: Vec<u8> =
        values.iter().flat_map(|v| half::f16::from_f32(*v).to_bits().to_le_bytes()).collect();
    let f32b: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut out = vec![f32::NAN; values.len()];
    to_f32("t", &Dtype::BF16, &bf16, &mut out).unwrap();
    for (o, v) in out.iter().zip(&values) {
        assert_eq!(o.to_bits(), v.to_bits() & 0xffff_0000, "seed {seed}");
    }
    to_f32("t", &Dtype::F16, &f16, &mut out).unwrap();
    for (o, v) in out.iter().zip(&values) {
        assert_eq!(*o, half::f16::from_f32(*v).to_f32(), "seed {seed}");
    }
    to_f32("t", &Dtype::F32, &f32b, &mut out).unwrap();
    assert_eq!(out, values, "seed {seed}");
    let err = to_f32("w", &Dtype::Other("I8".into()), &[0; 4], &mut out[..4]).unwrap_err();
    assert!(err.to_string().contains("'w'") && err.to_string().contains("I8"), "{err}");
}

#[test]
fn header_round_trip() {
    let bytes =
        encode(&[("a", "F32", vec![2, 3], vec![7; 24]), ("b", "BF16", vec![5], vec![1; 10])]);
    let entries = parse_header(Path::new("x.safetensors"), &bytes).unwrap();
    assert_eq!(entries.len(), 2);
    let a = entries.iter().find(|e| e.name == "a").unwrap();
    assert_eq!((a.shape.clone(), a.dtype.clone(), a.len_bytes()), (vec![2, 3], Dtype::F32, 24));
}

fn parse_err(bytes: &[u8]) -> String {
    match parse_header(Path::new("bad.safetensors"), bytes) {
        Ok(_) => panic!("malformed header accepted"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn malformed_headers_are_errors() {
    assert!(parse_err(&[1, 2, 3]).contains("too short"));
    let mut huge = u64::MAX.to_le_bytes().to_vec();
    huge.extend_from_slice(b"{}");
    assert!(parse_err(&huge).contains("exceeds"));
    // Data range past the end of the file.
    let mut bytes = encode(&[("a", "F32", vec![4], vec![0; 16])]);
    bytes.truncate(bytes.len() - 4);
    assert!(parse_err(&bytes).contains("'a'"));
    // Byte count disagrees with the shape.
    let bytes = encode(&[("a", "F32", vec![5], vec![0; 16])]);
    assert!(parse_err(&bytes).contains("needs 20"));
    // Offsets reversed.
    let header = br#"{"a":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}}"#;
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header);
    bytes.extend_from_slice(&[0; 8]);
    assert!(parse_err(&bytes).contains("outside"));
}

#[test]
fn sharded_checkpoint_via_index_and_duplicates() {
    let dir = temp_dir("shards");
    std::fs::write(dir.join("s1.safetensors"), encode(&[("x", "F32", vec![1], vec![0; 4])]))
        .unwrap();
    std::fs::write(dir.join("s2.safetensors"), encode(&[("y", "F16", vec![2], vec![0; 4])]))
        .unwrap();
    // An unrelated file not named by the index must be ignored.
    std::fs::write(dir.join("extra.safetensors"), encode(&[("x", "F32", vec![1], vec![0; 4])]))
        .unwrap();
    let index =
        json!({"metadata": {}, "weight_map": {"x": "s1.safetensors", "y": "s2.safetensors"}});
    std::fs::write(dir.join("model.safetensors.index.json"), index.to_string()).unwrap();
    let ckpt = Checkpoint::open(&dir).unwrap();
    assert_eq!(ckpt.tensor("y").unwrap().0.dtype, Dtype::F16);
    assert!(matches!(ckpt.tensor("z"), Err(ConvertError::MissingTensor(n)) if n == "z"));

    // Without the index every shard is read, and the duplicate 'x' is reported.
    std::fs::remove_file(dir.join("model.safetensors.index.json")).unwrap();
    let err = Checkpoint::open(&dir).err().unwrap().to_string();
    assert!(err.contains("'x'") && err.contains("more than one shard"), "{err}");

    // An index naming a shard that is not there.
    let index = json!({"weight_map": {"x": "gone.safetensors"}});
    std::fs::write(dir.join("model.safetensors.index.json"), index.to_string()).unwrap();
    let err = Checkpoint::open(&dir).err().unwrap().to_string();
    assert!(err.contains("missing file") && err.contains("gone.safetensors"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Random byte flips, truncations and header-length rewrites of a valid file: parsing returns Ok
/// or a typed error, never panics, and every accepted entry lies inside the file.
#[test]
fn mutated_files_never_panic() {
    const MUTATIONS: usize = 3000;
    let (mut rng, seed) = TestRng::from_time();
    let valid = encode(&[
        ("a", "F32", vec![2, 3], vec![7; 24]),
        ("b", "BF16", vec![5], vec![1; 10]),
        ("c", "F16", vec![1, 4], vec![2; 8]),
    ]);
    for _ in 0..MUTATIONS {
        let mut bytes = valid.clone();
        match rng.next_u64() % 3 {
            0 => {
                let flips = 1 + rng.next_u64() % 4;
                for _ in 0..flips {
                    let at = (rng.next_u64() % bytes.len() as u64) as usize;
                    bytes[at] = rng.next_u64() as u8;
                }
            }
            1 => bytes.truncate((rng.next_u64() % bytes.len() as u64) as usize),
            _ => {
                let len = rng.next_u64() % (bytes.len() as u64 * 2);
                bytes[..8].copy_from_slice(&len.to_le_bytes());
            }
        }
        if let Ok(entries) = parse_header(Path::new("m.safetensors"), &bytes) {
            for e in entries {
                assert!(e.len_bytes() <= bytes.len(), "seed {seed}: entry past the end");
            }
        }
    }
}

//! The golden checkpoints (tests/golden/{q1,tq2}, made by scripts/reference/make_golden.py) hold
//! weights that are already exact in their format, so `bonsai convert` must reproduce them bit
//! for bit; and their meta.json / logits.bin must agree in shape with the converted model. This
//! pins the golden files to the block formats independently of any model code.

use std::path::{Path, PathBuf};
use std::process::Command;

use bonsai_gguf::{dequantize, GgufFile, Qwen3Config, TokenizerMeta};
use bonsai_model::convert::{plan_tensors, to_f32, Checkpoint, HfQwen3Config};
use serde_json::Value;

/// (folder, --type, GGUF type name of the linear weights, the folder's own format in meta.json).
/// The ternary golden converts exactly to Q2_0 g64 as well: both blocks of a pair get the
/// 128-group's scale.
const GOLDEN: [(&str, &str, &str, &str); 3] = [
    ("q1", "q1_0", "Q1_0", "q1_0"),
    ("tq2", "pq2_0", "PQ2_0", "pq2_0"),
    ("tq2", "q2_0", "Q2_0_g64", "pq2_0"),
];
const F32_BYTES: usize = 4;
/// The golden tokenizer: 256 byte tokens, then <|endoftext|>, <|im_start|>, <|im_end|>.
const GOLDEN_VOCAB: usize = 259;
const IM_START_ID: usize = 257;
const IM_END_ID: u32 = 258;
const TOKEN_TYPE_CONTROL: i32 = 3;

fn golden_dir(folder: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden").join(folder)
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| {
        panic!("{}: {e} (run scripts/reference/make_golden.py)", path.display())
    });
    serde_json::from_str(&text).unwrap()
}

#[test]
fn golden_checkpoints_convert_exactly() {
    for (folder, ty, type_name, golden_format) in GOLDEN {
        let dir = golden_dir(folder);
        let out_dir =
            std::env::temp_dir().join(format!("bonsai-golden-{folder}-{}", std::process::id()));
        std::fs::create_dir_all(&out_dir).unwrap();
        let out = out_dir.join("golden.gguf");
        let run = Command::new(env!("CARGO_BIN_EXE_bonsai"))
            .arg("convert")
            .arg(&dir)
            .arg("-o")
            .arg(&out)
            .args(["--type", ty])
            .output()
            .unwrap();
        assert!(run.status.success(), "{folder}: {}", String::from_utf8_lossy(&run.stderr));

        let file = GgufFile::open(&out).unwrap();
        let config_text = std::fs::read_to_string(dir.join("config.json")).unwrap();
        let hf_config = HfQwen3Config::from_json_text(&config_text).unwrap();
        let checkpoint = Checkpoint::open(&dir).unwrap();
        for planned in plan_tensors(&hf_config) {
            let (entry, bytes) = checkpoint.tensor(&planned.hf_name).unwrap();
            let mut want = vec![0f32; entry.numel()];
            to_f32(&planned.hf_name, &entry.dtype, bytes, &mut want).unwrap();
            let view = file.tensor(&planned.gguf_name).unwrap();
            let expected_type = if entry.shape.len() == 1 { "F32" } else { type_name };
            assert_eq!(view.info.ty.name(), expected_type, "{folder}: {}", planned.gguf_name);
            let mut got = vec![f32::NAN; want.len()];
            dequantize(view.info.ty, view.data, &mut got).unwrap();
            // Exact: the golden weights are already in the format's code set with f16 scales.
            let first_diff = got.iter().zip(&want).position(|(g, w)| g.to_bits() != w.to_bits());
            assert_eq!(first_diff, None, "{folder}: {} differs", planned.gguf_name);
        }

        let config = Qwen3Config::from_gguf(&file).unwrap();
        let tok = TokenizerMeta::from_gguf(&file).unwrap();
        assert_eq!((config.vocab, tok.tokens.len()), (GOLDEN_VOCAB, GOLDEN_VOCAB), "{folder}");
        assert_eq!(tok.tokens[IM_START_ID], "<|im_start|>");
        assert_eq!(tok.token_types[IM_START_ID], TOKEN_TYPE_CONTROL);
        assert_eq!(tok.eos_id, Some(IM_END_ID), "{folder}: eos is <|im_end|>");
        assert!(tok.chat_template.as_deref().is_some_and(|t| t.contains("<|im_start|>")));

        let meta = read_json(&dir.join("meta.json"));
        let tokens: Vec<u64> =
            meta["tokens"].as_array().unwrap().iter().map(|t| t.as_u64().unwrap()).collect();
        assert!(tokens.iter().all(|&t| (t as usize) < GOLDEN_VOCAB));
        assert_eq!(meta["format"].as_str(), Some(golden_format));
        let shape = [tokens.len(), GOLDEN_VOCAB];
        assert_eq!(meta["logits_shape"], serde_json::json!(shape), "{folder}");
        let logits = std::fs::read(dir.join("logits.bin")).unwrap();
        assert_eq!(logits.len(), shape[0] * shape[1] * F32_BYTES, "{folder}: logits.bin size");
        let finite = logits
            .chunks_exact(F32_BYTES)
            .all(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]).is_finite());
        assert!(finite, "{folder}: non-finite logit");
        let greedy = meta["greedy_new_tokens"].as_array().unwrap();
        assert!(greedy.iter().all(|t| t.as_u64().is_some_and(|t| (t as usize) < GOLDEN_VOCAB)));
        std::fs::remove_dir_all(&out_dir).unwrap();
    }
}

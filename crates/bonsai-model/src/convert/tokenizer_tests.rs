//! tokenizer.json -> tokenizer.ggml.* extraction: ids, gaps, token types, merges, special ids,
//! chat template precedence.

use serde_json::{json, Value};

use super::tokenizer::*;
use bonsai_gguf::TokenizerMeta;

/// Vocabulary "a"=0, "b"=1, "ab"=2; added tokens at 4 (special), 5 (`<|x|>` not flagged special),
/// 6 (plain added), 8 (SentencePiece-space user token); ids 3 and 7 are gaps; vocab_size 10 leaves
/// 9 as a gap too.
fn tokenizer_json(merges: Value) -> Value {
    json!({
        "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": merges},
        "added_tokens": [
            {"id": 4, "content": "<|endoftext|>", "special": true, "normalized": false},
            {"id": 5, "content": "<|im_end|>", "special": false},
            {"id": 6, "content": "<think>", "special": false},
            {"id": 8, "content": "\u{2581}hi", "special": false}
        ]
    })
}

fn extract(tj: &Value, tc: Option<&Value>, file: Option<&str>) -> Result<TokenizerMeta, String> {
    extract_tokenizer(&TokenizerSources {
        tokenizer_json: tj,
        tokenizer_config: tc,
        chat_template_file: file.map(str::to_string),
        vocab_size: 10,
        config_bos_id: Some(4),
        config_eos_id: Some(4),
        config_pad_id: None,
    })
    .map_err(|e| e.to_string())
}

#[test]
fn tokens_types_and_gaps() {
    let data = extract(&tokenizer_json(json!(["a b"])), None, None).unwrap();
    assert_eq!(
        data.tokens,
        [
            "a",
            "b",
            "ab",
            "[PAD3]",
            "<|endoftext|>",
            "<|im_end|>",
            "<think>",
            "[PAD7]",
            " hi",
            "[PAD9]"
        ]
    );
    use super::tokenizer::{
        TOKEN_TYPE_CONTROL as C, TOKEN_TYPE_NORMAL as N, TOKEN_TYPE_UNUSED as U,
        TOKEN_TYPE_USER_DEFINED as D,
    };
    assert_eq!(data.token_types, [N, N, N, U, C, C, D, U, D, U]);
    assert_eq!(data.merges, ["a b"]);
    assert_eq!((data.bos_id, data.eos_id, data.pad_id), (Some(4), Some(4), None));
    assert_eq!(data.chat_template, None);
}

#[test]
fn merges_pair_form_joins_with_space_and_encodes_inner_spaces() {
    let data = extract(&tokenizer_json(json!([["a", "b"], ["x y", "z"]])), None, None).unwrap();
    assert_eq!(data.merges, ["a b", "x\u{0120}y z"]);
    let err = extract(&tokenizer_json(json!([["a"]])), None, None).unwrap_err();
    assert!(err.contains("merges[0]"), "{err}");
}

#[test]
fn special_ids_from_tokenizer_config_override_config_json() {
    let tc = json!({
        "eos_token": "<|im_end|>",
        "pad_token": {"content": "<|endoftext|>", "lstrip": false},
        "bos_token": null,
        "chat_template": "{{ messages }}"
    });
    let data = extract(&tokenizer_json(json!([])), Some(&tc), Some("from file")).unwrap();
    assert_eq!((data.bos_id, data.eos_id, data.pad_id), (Some(4), Some(5), Some(4)));
    // tokenizer_config.json's template wins over chat_template.jinja, like llama.cpp.
    assert_eq!(data.chat_template.as_deref(), Some("{{ messages }}"));

    let tc = json!({"eos_token": "<|im_end|>"});
    let data = extract(&tokenizer_json(json!([])), Some(&tc), Some("from file")).unwrap();
    assert_eq!(data.chat_template.as_deref(), Some("from file"));

    let tc = json!({"chat_template": [{"name": "tool_use", "template": "T"},
                                      {"name": "default", "template": "D"}]});
    let data = extract(&tokenizer_json(json!([])), Some(&tc), None).unwrap();
    assert_eq!(data.chat_template.as_deref(), Some("D"));
}

#[test]
fn bad_tokenizers_are_named_errors() {
    let mut tj = tokenizer_json(json!([]));
    tj["model"]["type"] = json!("Unigram");
    assert!(extract(&tj, None, None).unwrap_err().contains("not BPE"));

    let mut tj = tokenizer_json(json!([]));
    tj["model"]["vocab"]["zz"] = json!(10); // == vocab_size: out of range
    let err = extract(&tj, None, None).unwrap_err();
    assert!(err.contains("'zz'") && err.contains("vocab_size"), "{err}");

    let mut tj = tokenizer_json(json!([]));
    tj["added_tokens"][0] = json!({"content": "<x>"});
    assert!(extract(&tj, None, None).unwrap_err().contains("added_tokens[0]"));
}

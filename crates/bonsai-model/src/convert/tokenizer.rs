//! tokenizer.json + tokenizer_config.json -> the `tokenizer.ggml.*` metadata, following what
//! llama.cpp's converter writes for Qwen models (a GPT-2 style byte-level BPE).
//!
//! - tokens: one per id in `0..vocab_size` (config.json's size, which may exceed the tokenizer's),
//!   the BPE vocabulary plus added tokens; ids nobody uses become `"[PAD{id}]"`.
//! - token types: 1 normal, 3 control (added token marked special, or looking like `<|...|>`),
//!   4 user-defined (other added tokens), 5 unused (the `[PAD]` fillers, as llama.cpp marks them).
//! - merges: `"left right"` strings; the newer `[left, right]` pair form is joined with one space,
//!   a space inside a part written as U+0120 + 256 like llama.cpp does (byte-level BPE never has
//!   one).
//! - bos / eos / padding ids: tokenizer_config's `*_token` content looked up among the added
//!   tokens, else config.json's `*_token_id`.

use std::collections::HashMap;

use serde_json::Value;

use bonsai_gguf::TokenizerMeta;

use super::error::ConvertError;
use super::metadata::{TOKENIZER_MODEL_GPT2, TOKENIZER_PRE_QWEN2};

pub const TOKEN_TYPE_NORMAL: i32 = 1;
pub const TOKEN_TYPE_CONTROL: i32 = 3;
pub const TOKEN_TYPE_USER_DEFINED: i32 = 4;
pub const TOKEN_TYPE_UNUSED: i32 = 5;

/// What the tokenizer files say, plus the fallbacks from config.json.
pub struct TokenizerSources<'a> {
    pub tokenizer_json: &'a Value,
    pub tokenizer_config: Option<&'a Value>,
    /// Contents of `chat_template.jinja` (or `chat_template.json`'s template) when present;
    /// used only if tokenizer_config.json has no `chat_template`.
    pub chat_template_file: Option<String>,
    pub vocab_size: u64,
    pub config_bos_id: Option<u64>,
    pub config_eos_id: Option<u64>,
    pub config_pad_id: Option<u64>,
}

struct AddedToken {
    id: u64,
    content: String,
    special: bool,
}

fn tok_err(what: impl Into<String>) -> ConvertError {
    ConvertError::Tokenizer(what.into())
}

/// The `tokenizer.ggml.*` values of one checkpoint: byte-level BPE with Qwen2's pre-tokenizer.
pub fn extract_tokenizer(src: &TokenizerSources<'_>) -> Result<TokenizerMeta, ConvertError> {
    let model = src.tokenizer_json.get("model").ok_or_else(|| tok_err("no 'model' object"))?;
    match model.get("type").and_then(Value::as_str) {
        Some("BPE") => {}
        other => {
            return Err(tok_err(format!(
                "model type {other:?} is not BPE (Qwen3 uses byte-level BPE)"
            )))
        }
    }
    let vocab = model
        .get("vocab")
        .and_then(Value::as_object)
        .ok_or_else(|| tok_err("no 'model.vocab' object"))?;
    let added = parse_added_tokens(src.tokenizer_json)?;

    let vocab_size = usize::try_from(src.vocab_size)
        .map_err(|_| tok_err(format!("vocab_size {} too large", src.vocab_size)))?;
    let mut tokens: Vec<Option<String>> = vec![None; vocab_size];
    let mut types = vec![TOKEN_TYPE_UNUSED; vocab_size];
    let mut place = |id: u64, text: &str, ty: i32| -> Result<(), ConvertError> {
        let slot = usize::try_from(id).ok().filter(|&i| i < vocab_size).ok_or_else(|| {
            tok_err(format!(
                "token '{text}' has id {id}, not below config.json vocab_size {vocab_size}"
            ))
        })?;
        tokens[slot] = Some(text.to_string());
        types[slot] = ty;
        Ok(())
    };
    for (text, id) in vocab {
        let id = id.as_u64().ok_or_else(|| tok_err(format!("vocab['{text}'] is not an id")))?;
        place(id, text, TOKEN_TYPE_NORMAL)?;
    }
    for token in &added {
        let ty = if token.special || looks_special(&token.content) {
            TOKEN_TYPE_CONTROL
        } else {
            TOKEN_TYPE_USER_DEFINED
        };
        let text = if ty == TOKEN_TYPE_USER_DEFINED {
            // llama.cpp pre-normalizes SentencePiece spaces in user-defined tokens.
            token.content.replace('\u{2581}', " ")
        } else {
            token.content.clone()
        };
        place(token.id, &text, ty)?;
    }
    let tokens: Vec<String> = tokens
        .into_iter()
        .enumerate()
        .map(|(id, t)| t.unwrap_or_else(|| format!("[PAD{id}]")))
        .collect();

    let config = src.tokenizer_config;
    let special_id = |kind: &str, fallback: Option<u64>| -> Option<u32> {
        let from_config = config
            .and_then(|c| c.get(format!("{kind}_token")))
            .and_then(special_content)
            .and_then(|content| added.iter().find(|t| t.content == content))
            .map(|t| t.id);
        from_config.or(fallback).and_then(|id| u32::try_from(id).ok())
    };
    Ok(TokenizerMeta {
        model: TOKENIZER_MODEL_GPT2.into(),
        pre: Some(TOKENIZER_PRE_QWEN2.into()),
        merges: parse_merges(model)?,
        bos_id: special_id("bos", src.config_bos_id),
        eos_id: special_id("eos", src.config_eos_id),
        pad_id: special_id("pad", src.config_pad_id),
        chat_template: chat_template(config, src.chat_template_file.as_deref())?,
        tokens,
        token_types: types,
    })
}

/// llama.cpp's `does_token_look_special` rule for added tokens not flagged special.
fn looks_special(text: &str) -> bool {
    matches!(text, "<pad>" | "<mask>" | "<2mass>" | "[@BOS@]")
        || (text.starts_with("<|") && text.ends_with("|>"))
        || (text.starts_with("<\u{ff5c}") && text.ends_with("\u{ff5c}>"))
        || (text.starts_with("<unused") && text.ends_with('>'))
}

/// A special-token entry is either the content string or `{ "content": ... }`.
fn special_content(entry: &Value) -> Option<&str> {
    match entry {
        Value::String(s) => Some(s),
        Value::Object(o) => o.get("content").and_then(Value::as_str),
        _ => None,
    }
}

fn parse_added_tokens(tokenizer_json: &Value) -> Result<Vec<AddedToken>, ConvertError> {
    let Some(list) = tokenizer_json.get("added_tokens") else {
        return Ok(Vec::new());
    };
    let list = list.as_array().ok_or_else(|| tok_err("'added_tokens' is not a list"))?;
    list.iter()
        .enumerate()
        .map(|(i, t)| {
            let id = t.get("id").and_then(Value::as_u64);
            let content = t.get("content").and_then(Value::as_str);
            match (id, content) {
                (Some(id), Some(content)) => Ok(AddedToken {
                    id,
                    content: content.to_string(),
                    special: t.get("special").and_then(Value::as_bool).unwrap_or(false),
                }),
                _ => Err(tok_err(format!("added_tokens[{i}] lacks an integer id or content"))),
            }
        })
        .collect()
}

fn parse_merges(model: &Value) -> Result<Vec<String>, ConvertError> {
    let Some(merges) = model.get("merges") else {
        return Ok(Vec::new());
    };
    let merges = merges.as_array().ok_or_else(|| tok_err("'model.merges' is not a list"))?;
    merges
        .iter()
        .enumerate()
        .map(|(i, m)| match m {
            Value::String(s) => Ok(s.clone()),
            Value::Array(pair) if pair.len() == 2 => {
                let part = |v: &Value| {
                    v.as_str().map(|s| {
                        s.chars().map(|c| if c == ' ' { '\u{0120}' } else { c }).collect::<String>()
                    })
                };
                match (part(&pair[0]), part(&pair[1])) {
                    (Some(a), Some(b)) => Ok(format!("{a} {b}")),
                    _ => Err(tok_err(format!("merges[{i}] is not a pair of strings"))),
                }
            }
            _ => Err(tok_err(format!("merges[{i}] is neither \"a b\" nor [a, b]"))),
        })
        .collect()
}

/// tokenizer_config.json's `chat_template` (a string, or a list of `{name, template}` of which the
/// one named "default" is taken), else the separate template file.
fn chat_template(
    config: Option<&Value>,
    template_file: Option<&str>,
) -> Result<Option<String>, ConvertError> {
    let Some(entry) = config.and_then(|c| c.get("chat_template")) else {
        return Ok(template_file.map(str::to_string));
    };
    match entry {
        Value::String(s) => Ok(Some(s.clone())),
        Value::Null => Ok(template_file.map(str::to_string)),
        Value::Array(list) => {
            let named: HashMap<&str, &str> = list
                .iter()
                .filter_map(|t| Some((t.get("name")?.as_str()?, t.get("template")?.as_str()?)))
                .collect();
            named.get("default").map(|s| Some(s.to_string())).ok_or_else(|| {
                tok_err("tokenizer_config.json chat_template list has no 'default' entry")
            })
        }
        _ => Err(tok_err("tokenizer_config.json chat_template is neither a string nor a list")),
    }
}

//! Tokenizer data stored in the GGUF (`tokenizer.ggml.*`, `tokenizer.chat_template`).

use crate::error::GgufError;
use crate::keys;
use crate::reader::GgufFile;
use crate::value::{self, MetaValue, ValueType};

#[derive(Debug, Clone, PartialEq)]
pub struct TokenizerMeta {
    /// e.g. "gpt2" for byte-level BPE.
    pub model: String,
    pub pre: Option<String>,
    pub tokens: Vec<String>,
    /// One per token when present (llama.cpp token types: 1 normal, 3 control, ...); else empty.
    pub token_types: Vec<i32>,
    /// "left right" pairs in rank order; empty when absent.
    pub merges: Vec<String>,
    pub bos_id: Option<u32>,
    pub eos_id: Option<u32>,
    pub pad_id: Option<u32>,
    pub chat_template: Option<String>,
}

fn optional_id(file: &GgufFile, key: &str, n_tokens: usize) -> Result<Option<u32>, GgufError> {
    if file.get(key).is_none() {
        return Ok(None);
    }
    let id = file.get_u32(key)?;
    if id as usize >= n_tokens {
        return Err(GgufError::OutOfRange {
            key: key.to_string(),
            value: id.to_string(),
            reason: format!("not below the vocabulary size {n_tokens}"),
        });
    }
    Ok(Some(id))
}

fn string_list(file: &GgufFile, key: &str) -> Result<Vec<String>, GgufError> {
    Ok(file.get_str_array(key)?.into_iter().map(str::to_string).collect())
}

impl TokenizerMeta {
    pub fn from_gguf(file: &GgufFile) -> Result<TokenizerMeta, GgufError> {
        let model = file.get_str(keys::TOKENIZER_MODEL)?.to_string();
        let pre = match file.get(keys::TOKENIZER_PRE) {
            Some(_) => Some(file.get_str(keys::TOKENIZER_PRE)?.to_string()),
            None => None,
        };
        let tokens = string_list(file, keys::TOKENIZER_TOKENS)?;
        let token_types = match file.get(keys::TOKENIZER_TOKEN_TYPE) {
            None => Vec::new(),
            Some(_) => {
                let key = keys::TOKENIZER_TOKEN_TYPE;
                let (elem, items) = file.get_array(key)?;
                if elem == ValueType::Array || elem == ValueType::String {
                    return Err(GgufError::WrongType {
                        key: key.into(),
                        expected: "array of integers",
                        found: format!("array of {}", elem.name()),
                    });
                }
                let types = items
                    .iter()
                    .map(|v: &MetaValue| value::integer_as::<i32>(key, v, "i32"))
                    .collect::<Result<Vec<i32>, _>>()?;
                if types.len() != tokens.len() {
                    return Err(GgufError::OutOfRange {
                        key: key.into(),
                        value: format!("{} entries", types.len()),
                        reason: format!("expected one per token ({})", tokens.len()),
                    });
                }
                types
            }
        };
        let merges = match file.get(keys::TOKENIZER_MERGES) {
            None => Vec::new(),
            Some(_) => string_list(file, keys::TOKENIZER_MERGES)?,
        };
        let chat_template = match file.get(keys::TOKENIZER_CHAT_TEMPLATE) {
            None => None,
            Some(_) => Some(file.get_str(keys::TOKENIZER_CHAT_TEMPLATE)?.to_string()),
        };
        Ok(TokenizerMeta {
            bos_id: optional_id(file, keys::TOKENIZER_BOS_ID, tokens.len())?,
            eos_id: optional_id(file, keys::TOKENIZER_EOS_ID, tokens.len())?,
            pad_id: optional_id(file, keys::TOKENIZER_PAD_ID, tokens.len())?,
            model,
            pre,
            tokens,
            token_types,
            merges,
            chat_template,
        })
    }
}

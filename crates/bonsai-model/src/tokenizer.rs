//! The GGUF's own tokenizer as a `tokenizers::Tokenizer`: GPT-2 byte-level BPE over the file's
//! vocab and merges, Qwen2's pre-tokenizer split, NFC normalisation, and the control (type 3) and
//! user-defined (type 4) tokens registered as added tokens so `<|im_start|>` in a rendered chat
//! prompt becomes one token.
//!
//! Decoding does not go through the HF decoder: every id maps to its exact bytes (byte-level
//! tokens through the GPT-2 byte<->unicode table, added tokens as their UTF-8 text), so streaming
//! can join bytes across tokens and emit only complete UTF-8 (see [`StreamDecoder`]).

use std::collections::HashMap;

use bonsai_gguf::TokenizerMeta;

use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::normalizers::NFC;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::{AddedToken, SplitDelimiterBehavior};

/// GGUF `tokenizer.ggml.token_type` values (llama.cpp's enum).
pub mod token_type {
    pub const NORMAL: i32 = 1;
    pub const CONTROL: i32 = 3;
    pub const USER_DEFINED: i32 = 4;
    pub const UNUSED: i32 = 5;
    pub const BYTE: i32 = 6;
}

/// Qwen2's pre-tokenizer split (HF tokenizer.json of Qwen2/Qwen3; llama.cpp pre "qwen2").
pub const QWEN2_SPLIT_REGEX: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Token texts that end a turn or the document in Qwen-style vocabularies.
pub const STOP_TOKEN_TEXTS: [&str; 2] = ["<|im_end|>", "<|endoftext|>"];

#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    #[error("tokenizer: model '{0}' is not supported (only 'gpt2' byte-level BPE)")]
    UnsupportedModel(String),
    #[error("tokenizer: pre-tokenizer '{0}' is not supported (known: qwen2, gpt2, default)")]
    UnsupportedPre(String),
    #[error("tokenizer: {tokens} tokens but {types} token types")]
    TypeCount { tokens: usize, types: usize },
    #[error("tokenizer: merge {index} ('{merge}') is not two space-separated tokens")]
    BadMerge { index: usize, merge: String },
    #[error("tokenizer: token {id} ('{text}') has a character outside the byte-level alphabet")]
    NotByteLevel { id: usize, text: String },
    #[error("tokenizer: {0}")]
    Hf(String),
    #[error("tokenizer: token id {id} is outside the vocabulary ({vocab} tokens)")]
    BadId { id: u32, vocab: usize },
}

pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    token_bytes: Vec<Vec<u8>>,
    ids_by_text: HashMap<String, u32>,
    stop_ids: Vec<u32>,
}

/// GPT-2's reversible byte -> printable char table: printable Latin-1 bytes map to themselves,
/// the other 68 bytes to U+0100.. in byte order.
pub fn byte_to_char_table() -> [char; 256] {
    let printable = |b: u32| (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
    let mut table = ['\0'; 256];
    let mut next_extra = 256u32;
    for b in 0..256u32 {
        let code = if printable(b) {
            b
        } else {
            next_extra += 1;
            next_extra - 1
        };
        // Every code here is below 0x200, a valid scalar value.
        table[b as usize] = char::from_u32(code).unwrap_or('\u{FFFD}');
    }
    table
}

fn char_to_byte_map() -> HashMap<char, u8> {
    byte_to_char_table().iter().enumerate().map(|(b, &c)| (c, b as u8)).collect()
}

fn parse_byte_token(text: &str) -> Option<u8> {
    let hex = text.strip_prefix("<0x")?.strip_suffix('>')?;
    u8::from_str_radix(hex, 16).ok()
}

impl Tokenizer {
    pub fn from_parts(parts: &TokenizerMeta) -> Result<Self, TokenizerError> {
        if parts.model != "gpt2" {
            return Err(TokenizerError::UnsupportedModel(parts.model.clone()));
        }
        match parts.pre.as_deref() {
            None | Some("qwen2") | Some("gpt2") | Some("default") => {}
            Some(other) => return Err(TokenizerError::UnsupportedPre(other.to_string())),
        }
        if parts.token_types.len() != parts.tokens.len() {
            return Err(TokenizerError::TypeCount { tokens: parts.tokens.len(), types: parts.token_types.len() });
        }
        let hf = |e: tokenizers::Error| TokenizerError::Hf(e.to_string());

        let vocab: Vocab = parts.tokens.iter().enumerate().map(|(i, t)| (t.clone(), i as u32)).collect();
        let mut merges = Vec::with_capacity(parts.merges.len());
        for (index, m) in parts.merges.iter().enumerate() {
            let (a, b) = m.split_once(' ').ok_or_else(|| TokenizerError::BadMerge { index, merge: m.clone() })?;
            merges.push((a.to_string(), b.to_string()));
        }
        let bpe = BPE::builder().vocab_and_merges(vocab, merges).build().map_err(hf)?;

        let split = Split::new(SplitPattern::Regex(QWEN2_SPLIT_REGEX.to_string()), SplitDelimiterBehavior::Isolated, false)
            .map_err(hf)?;
        let byte_level = ByteLevel::new(false, false, false);
        let mut inner = tokenizers::Tokenizer::new(bpe);
        inner.with_normalizer(Some(NFC));
        inner.with_pre_tokenizer(Some(Sequence::new(vec![split.into(), byte_level.into()])));
        inner.with_decoder(Some(byte_level));

        let to_byte = char_to_byte_map();
        let mut token_bytes = Vec::with_capacity(parts.tokens.len());
        let mut added = Vec::new();
        for (id, (text, &ty)) in parts.tokens.iter().zip(&parts.token_types).enumerate() {
            let bytes = match ty {
                token_type::CONTROL | token_type::USER_DEFINED => {
                    added.push(AddedToken::from(text.clone(), ty == token_type::CONTROL));
                    text.as_bytes().to_vec()
                }
                // Placeholders ("[PAD123]") never appear in text; keep their literal bytes.
                token_type::UNUSED => text.as_bytes().to_vec(),
                _ => match (ty, parse_byte_token(text)) {
                    (token_type::BYTE, Some(byte)) => vec![byte],
                    _ => text
                        .chars()
                        .map(|c| to_byte.get(&c).copied())
                        .collect::<Option<Vec<u8>>>()
                        .ok_or_else(|| TokenizerError::NotByteLevel { id, text: text.clone() })?,
                },
            };
            token_bytes.push(bytes);
        }
        // Added tokens already in the vocab keep their ids (the added vocabulary looks them up).
        inner.add_special_tokens(&added);

        let ids_by_text: HashMap<String, u32> =
            parts.tokens.iter().enumerate().map(|(i, t)| (t.clone(), i as u32)).collect();
        let mut stop_ids: Vec<u32> = STOP_TOKEN_TEXTS.iter().filter_map(|t| ids_by_text.get(*t).copied()).collect();
        if let Some(eos) = parts.eos_id {
            if !stop_ids.contains(&eos) {
                stop_ids.push(eos);
            }
        }
        Ok(Self { inner, token_bytes, ids_by_text, stop_ids })
    }

    pub fn vocab_size(&self) -> usize {
        self.token_bytes.len()
    }

    /// Encodes text; added tokens written literally (`<|im_start|>`) become their single id.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, TokenizerError> {
        let encoding = self.inner.encode(text, false).map_err(|e| TokenizerError::Hf(e.to_string()))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// The exact bytes a token stands for.
    pub fn token_bytes(&self, id: u32) -> Result<&[u8], TokenizerError> {
        self.token_bytes
            .get(id as usize)
            .map(Vec::as_slice)
            .ok_or(TokenizerError::BadId { id, vocab: self.token_bytes.len() })
    }

    /// Decodes ids to text (invalid UTF-8 replaced by U+FFFD).
    pub fn decode(&self, ids: &[u32]) -> Result<String, TokenizerError> {
        let mut bytes = Vec::new();
        for &id in ids {
            bytes.extend_from_slice(self.token_bytes(id)?);
        }
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.ids_by_text.get(text).copied()
    }

    /// Ids that end generation: `<|im_end|>`, `<|endoftext|>` and the file's EOS.
    pub fn stop_ids(&self) -> &[u32] {
        &self.stop_ids
    }
}

/// Turns a stream of token ids into text, emitting only complete UTF-8: a character split over
/// two tokens is held back until its last byte arrives; an invalid sequence becomes U+FFFD.
#[derive(Default)]
pub struct StreamDecoder {
    pending: Vec<u8>,
}

impl StreamDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one token's bytes; returns the text that is now complete (possibly empty).
    pub fn push_bytes(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    return out;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    // The prefix up to valid_up_to is valid UTF-8 by definition, so this never falls back.
                    out.push_str(std::str::from_utf8(&self.pending[..valid]).unwrap_or_default());
                    match e.error_len() {
                        // Incomplete tail: keep it for the next token.
                        None => {
                            self.pending.drain(..valid);
                            return out;
                        }
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            self.pending.drain(..valid + bad);
                        }
                    }
                }
            }
        }
    }

    pub fn push(&mut self, tokenizer: &Tokenizer, id: u32) -> Result<String, TokenizerError> {
        let bytes = tokenizer.token_bytes(id)?;
        Ok(self.push_bytes(bytes))
    }

    /// Ends the stream: an incomplete trailing character becomes U+FFFD.
    pub fn finish(&mut self) -> String {
        let out = if self.pending.is_empty() { String::new() } else { char::REPLACEMENT_CHARACTER.to_string() };
        self.pending.clear();
        out
    }
}

#[cfg(test)]
#[path = "tokenizer_tests.rs"]
mod tests;

//! The built-in demo model's vocabulary: 256 byte tokens plus the three ChatML control tokens.
//! (The model itself, random Q1_0 weights from a fixed seed, is built by [`crate::synthetic`].)

use crate::tokenizer::{byte_to_char_table, token_type, TokenizerParts};

pub const DEMO_SPECIAL_TOKENS: [&str; 3] = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"];
/// Id of `<|im_end|>` in the demo vocab (256 bytes, then the specials in order).
pub const DEMO_EOS_ID: u32 = 258;

/// The byte-level vocab: token b (< 256) is byte b in GPT-2's printable form; no merges.
pub fn demo_tokenizer_parts() -> TokenizerParts {
    let mut tokens: Vec<String> = byte_to_char_table().iter().map(|c| c.to_string()).collect();
    let mut token_types = vec![token_type::NORMAL; tokens.len()];
    for special in DEMO_SPECIAL_TOKENS {
        tokens.push(special.to_string());
        token_types.push(token_type::CONTROL);
    }
    TokenizerParts {
        model: "gpt2".into(),
        pre: Some("qwen2".into()),
        tokens,
        token_types,
        merges: Vec::new(),
        eos_id: Some(DEMO_EOS_ID),
    }
}

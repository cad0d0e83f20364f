use super::*;
use crate::demo::{demo_tokenizer_parts, DEMO_EOS_ID};
use crate::sampler::Rng;

fn fresh_seed() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1)
}

/// Characters already in NFC form (so normalisation leaves them alone) of 1 to 4 UTF-8 bytes.
const ALPHABET: &[&str] = &["a", "Z", " ", "\n", "7", "'s", "é", "ß", "日", "本", "€", "🌲", "🙂", "\t", "!", "<|im_start|>"];

#[test]
fn demo_vocab_round_trips_random_text() {
    let tok = Tokenizer::from_parts(&demo_tokenizer_parts()).unwrap();
    assert_eq!(tok.vocab_size(), 259);
    let seed = fresh_seed();
    let mut rng = Rng::new(seed);
    for _ in 0..50 {
        let len = (rng.next_u64() % 40) as usize;
        let text: String = (0..len).map(|_| ALPHABET[(rng.next_u64() % ALPHABET.len() as u64) as usize]).collect();
        let ids = tok.encode(&text).unwrap();
        assert_eq!(tok.decode(&ids).unwrap(), text, "seed {seed}");
        // Byte tokens: one id per byte, except each special token text is one id.
        let specials = text.matches("<|im_start|>").count();
        assert_eq!(ids.len(), text.len() - specials * ("<|im_start|>".len() - 1), "seed {seed}: {text:?}");
    }
}

#[test]
fn special_tokens_are_single_ids_and_stop_ids_are_found() {
    let tok = Tokenizer::from_parts(&demo_tokenizer_parts()).unwrap();
    let ids = tok.encode("<|im_start|>user\nhi<|im_end|>").unwrap();
    assert_eq!(ids[0], 257);
    assert_eq!(*ids.last().unwrap(), DEMO_EOS_ID);
    assert_eq!(&ids[1..5], &[b'u' as u32, b's' as u32, b'e' as u32, b'r' as u32]);
    let mut stops = tok.stop_ids().to_vec();
    stops.sort();
    assert_eq!(stops, vec![256, 258]);
}

#[test]
fn merges_are_applied() {
    let mut parts = demo_tokenizer_parts();
    for (text, merge) in [("he", "h e"), ("ll", "l l"), ("hell", "he ll"), ("Ġw", "Ġ w")] {
        parts.tokens.push(text.into());
        parts.token_types.push(token_type::NORMAL);
        parts.merges.push(merge.into());
    }
    let tok = Tokenizer::from_parts(&parts).unwrap();
    let id = |t: &str| tok.token_id(t).unwrap();
    assert_eq!(tok.encode("hello world").unwrap(), vec![id("hell"), b'o' as u32, id("Ġw"), b'o' as u32, b'r' as u32, b'l' as u32, b'd' as u32]);
    assert_eq!(tok.decode(&tok.encode("hello world").unwrap()).unwrap(), "hello world");
}

#[test]
fn bad_parts_are_typed_errors() {
    let mut parts = demo_tokenizer_parts();
    parts.model = "llama".into();
    assert!(matches!(Tokenizer::from_parts(&parts), Err(TokenizerError::UnsupportedModel(_))));
    let mut parts = demo_tokenizer_parts();
    parts.merges.push("nospace".into());
    assert!(matches!(Tokenizer::from_parts(&parts), Err(TokenizerError::BadMerge { index: 0, .. })));
    let tok = Tokenizer::from_parts(&demo_tokenizer_parts()).unwrap();
    assert!(matches!(tok.decode(&[999]), Err(TokenizerError::BadId { id: 999, .. })));
    // A normal token outside the byte-level alphabet means this is not a GPT-2 style vocab.
    let mut parts = demo_tokenizer_parts();
    parts.tokens.push("日".into());
    parts.token_types.push(token_type::NORMAL);
    assert!(matches!(Tokenizer::from_parts(&parts), Err(TokenizerError::NotByteLevel { id: 259, .. })));
    // Unused placeholders and SentencePiece-style byte tokens are accepted.
    let mut parts = demo_tokenizer_parts();
    parts.tokens.extend(["[PAD259]".to_string(), "<0x0A>".to_string()]);
    parts.token_types.extend([token_type::UNUSED, token_type::BYTE]);
    let tok = Tokenizer::from_parts(&parts).unwrap();
    assert_eq!(tok.token_bytes(260).unwrap(), b"\n");
}

#[test]
fn stream_decoder_holds_split_characters_until_complete() {
    let seed = fresh_seed();
    let mut rng = Rng::new(seed);
    let text = "a€日🌲é b🙂";
    let bytes = text.as_bytes();
    // Random cut points: every split of multi-byte characters must still reassemble exactly,
    // and no emitted piece may contain a replacement character.
    for _ in 0..100 {
        let mut dec = StreamDecoder::new();
        let mut out = String::new();
        let mut i = 0;
        while i < bytes.len() {
            let step = 1 + (rng.next_u64() % 3) as usize;
            let end = (i + step).min(bytes.len());
            let piece = dec.push_bytes(&bytes[i..end]);
            assert!(!piece.contains('\u{FFFD}'), "seed {seed}");
            out.push_str(&piece);
            i = end;
        }
        out.push_str(&dec.finish());
        assert_eq!(out, text, "seed {seed}");
    }
    let mut dec = StreamDecoder::new();
    assert_eq!(dec.push_bytes(&[0xE6, 0x97]), "");
    assert_eq!(dec.push_bytes(&[0xA5, b'x']), "日x");
    // A broken sequence is replaced, and a dangling start byte at the end is reported.
    assert_eq!(dec.push_bytes(&[0xFF, b'y', 0xE6]), "\u{FFFD}y");
    assert_eq!(dec.finish(), "\u{FFFD}");
}

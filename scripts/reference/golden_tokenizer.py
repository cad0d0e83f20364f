"""Byte-level BPE tokenizer for the golden models: 256 byte tokens + 3 ChatML specials, no merges.

Torch-free on purpose (only the `tokenizers` package), so it can be checked on machines without
torch. Token id b (0..255) is the GPT-2 byte-to-unicode character of byte b; ids 256..258 are
<|endoftext|>, <|im_start|>, <|im_end|>. The pre-tokenizer is Qwen2's split regex followed by
byte-level mapping, as in Qwen3's own tokenizer.json.
"""

import json

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers, processors

N_BYTE_TOKENS = 256
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
VOCAB_SIZE = N_BYTE_TOKENS + len(SPECIAL_TOKENS)
ENDOFTEXT_ID, IM_START_ID, IM_END_ID = 256, 257, 258

# Qwen2/Qwen3 pre-tokenizer split pattern.
QWEN2_SPLIT_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# The ChatML template Qwen3 uses, without the thinking/tool branches (enough for the tests).
CHATML_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def bytes_to_unicode():
    """GPT-2's reversible byte -> printable character map (the byte-level BPE alphabet)."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("\u00a1"), ord("\u00ac") + 1))
        + list(range(ord("\u00ae"), ord("\u00ff") + 1))
    )
    chars = printable[:]
    shift = 0
    for b in range(N_BYTE_TOKENS):
        if b not in printable:
            printable.append(b)
            chars.append(N_BYTE_TOKENS + shift)
            shift += 1
    return {b: chr(c) for b, c in zip(printable, chars)}


def build_tokenizer():
    byte_chars = bytes_to_unicode()
    assert sorted(byte_chars) == list(range(N_BYTE_TOKENS))
    assert set(byte_chars.values()) == set(pre_tokenizers.ByteLevel.alphabet())
    vocab = {byte_chars[b]: b for b in range(N_BYTE_TOKENS)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], ignore_merges=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.add_special_tokens(
        [AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS]
    )
    for i, t in enumerate(SPECIAL_TOKENS):
        assert tok.token_to_id(t) == N_BYTE_TOKENS + i, (t, tok.token_to_id(t))
    assert tok.get_vocab_size(with_added_tokens=True) == VOCAB_SIZE
    return tok


def tokenizer_config(first_special_id=N_BYTE_TOKENS, chat_template=CHATML_TEMPLATE):
    """tokenizer_config.json as Qwen3 ships it, reduced to what converters and loaders read; the
    special tokens from id `first_special_id` on (the default model's tokenizer reuses it)."""
    added = {
        str(first_special_id + i): {
            "content": t, "lstrip": False, "normalized": False, "rstrip": False,
            "single_word": False, "special": True,
        }
        for i, t in enumerate(SPECIAL_TOKENS)
    }
    return {
        "added_tokens_decoder": added,
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "chat_template": chat_template,
        "clean_up_tokenization_spaces": False,
        "model_max_length": 512,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }


def save_tokenizer(tok, folder):
    tok.save(str(folder / "tokenizer.json"))
    with open(folder / "tokenizer_config.json", "w", encoding="utf-8") as f:
        json.dump(tokenizer_config(), f, indent=2, ensure_ascii=False)
        f.write("\n")


def check_tokenizer(tok):
    """Byte-level round trip on mixed text; specials stay single tokens. Returns a sample."""
    text = "<|im_start|>user\nHallo, Bonsai! 1+1=2 \u00e9\u00e8 \u4f60\u597d<|im_end|>\n"
    ids = tok.encode(text).ids
    assert ids[0] == IM_START_ID and IM_END_ID in ids, ids
    assert all(0 <= i < VOCAB_SIZE for i in ids)
    assert tok.decode(ids, skip_special_tokens=False) == text, tok.decode(ids)
    # Without merges every non-special token is one byte of the UTF-8 text.
    plain = text.replace("<|im_start|>", "").replace("<|im_end|>", "")
    assert len(ids) == len(plain.encode("utf-8")) + 2, (len(ids), len(plain.encode("utf-8")))
    return {"text": text, "ids": ids}


if __name__ == "__main__":
    sample = check_tokenizer(build_tokenizer())
    print(f"tokenizer ok: vocab {VOCAB_SIZE}, sample of {len(sample['ids'])} tokens")

"""Trains the default model's byte-level BPE tokenizer on a sample of the story corpus and writes
tokenizer.json and tokenizer_config.json (with the ChatML template) next to this script.

The pipeline is the one bonsai rebuilds from a GGUF (crates/bonsai-model/src/tokenizer.rs): NFC,
Qwen2's split regex, byte-level mapping without a prefix space, so the Python and Rust tokenizers
give the same ids. The three ChatML tokens come first (ids 0, 1, 2).

    python3 train_tokenizer.py [--vocab 4096] [--samples 200000]
"""

import argparse
import io
import json
import os
import sys

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers, trainers

import stories

# The special tokens, the Qwen2/Qwen3 pre-tokenizer split (as crates/bonsai-model/src/tokenizer.rs
# has it) and tokenizer_config.json's shape are the reference tokenizer's.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
from golden_tokenizer import QWEN2_SPLIT_REGEX, SPECIAL_TOKENS  # noqa: E402
from golden_tokenizer import tokenizer_config as qwen3_tokenizer_config  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
# Seed of the sample the merges are learned from (the training corpus uses others).
TOKENIZER_SEED = 1000
# ChatML, as crates/bonsai-model/src/demo.rs CHATML_TEMPLATE.
CHATML_TEMPLATE = (
    "{%- for m in messages %}{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}"
    "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def empty_tokenizer():
    tok = Tokenizer(models.BPE(ignore_merges=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    return tok


def tokenizer_config():
    # The special tokens are ids 0..2 of this vocabulary (trained first).
    return qwen3_tokenizer_config(first_special_id=0, chat_template=CHATML_TEMPLATE)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--samples", type=int, default=200_000)
    ap.add_argument("--out-dir", default=HERE)
    args = ap.parse_args()

    text = io.StringIO()
    stories.write_corpus(TOKENIZER_SEED, args.samples, text)
    docs = text.getvalue().split(stories.ENDOFTEXT)
    tok = empty_tokenizer()
    trainer = trainers.BpeTrainer(
        vocab_size=args.vocab,
        min_frequency=2,
        special_tokens=[AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(docs, trainer=trainer)
    for i, t in enumerate(SPECIAL_TOKENS):
        assert tok.token_to_id(t) == i, (t, tok.token_to_id(t))
    sample = docs[1] + stories.ENDOFTEXT
    assert tok.decode(tok.encode(sample).ids, skip_special_tokens=False) == sample
    tok.save(os.path.join(args.out_dir, "tokenizer.json"))
    with open(os.path.join(args.out_dir, "tokenizer_config.json"), "w") as f:
        json.dump(tokenizer_config(), f, indent=2)
        f.write("\n")
    n = tok.get_vocab_size(with_added_tokens=True)
    ids = tok.encode(text.getvalue()[:1_000_000]).ids
    print(f"vocab {n}; {1_000_000 / len(ids):.2f} characters per token on the sample")


if __name__ == "__main__":
    main()

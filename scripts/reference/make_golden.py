#!/usr/bin/env python3
"""Golden reference files for bonsai's whole-model CPU test (testing tier T3, see README.md).

Builds a small random Qwen3 with transformers, quantizes every linear weight (embedding and LM head
included) with the Q1_0 rule and, in a second copy, with the ternary PQ2_0 rule, puts the dequantized
weights back, saves each checkpoint (config.json, float32 model.safetensors, tokenizer.json,
tokenizer_config.json) under OUT/{q1,tq2}/ and writes the float32 logits of a fixed prompt plus a
greedy continuation.

Self-checking: the saved checkpoint is reloaded and used for every number written; its logits are
compared with an independent float64 forward (golden_model.reference_logits); the greedy
continuation from `generate` must equal a plain argmax loop; every greedy step must win by a
margin (seeds are tried in order until one does). Run: python3 make_golden.py --out tests/golden
"""

import argparse
import hashlib
import inspect
import json
import shutil
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoModelForCausalLM, Qwen3Config  # noqa: E402

import golden_model as gm  # noqa: E402
import golden_tokenizer as gt  # noqa: E402

BASE_SEED = 20261129
MAX_SEED_TRIES = 1000
GEOMETRY = {
    "hidden_size": 128,
    # 256 rather than 384 keeps each float32 folder under MAX_FOLDER_BYTES.
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,  # q dim 256 != hidden 128 on purpose
    "max_position_embeddings": 512,
}
ROPE_THETA = 1e6
RMS_EPS = 1e-6
# Init scales: embeddings O(1); inner linears small enough that residual updates do not swamp
# the embedding; a larger LM head spreads the logits (std ~3) so greedy steps are decisive.
EMBED_STD = 1.0
LINEAR_STD = 0.05
LM_HEAD_STD = 0.3
NORM_WEIGHT_RANGE = (0.5, 1.5)  # random, so a converter that drops norm weights fails
PROMPT_TEXT = "<|im_start|>user\nA tree?<|im_end|>\n<|im_start|>assistant\n"
N_GREEDY = 32
# transformers (float32) vs the float64 reference: dot products of length <= 256 carry a relative
# rounding error of at most 256 * 2^-24 = 1.5e-5 of the magnitude sum; through two layers and a
# logit scale of ~10 the difference stays far below 1e-3 (100x headroom).
REFERENCE_TOL = 1e-3
# Each greedy step's top-1 logit beats the runner-up by at least this much, so an engine whose
# logits are within half of it reproduces the tokens (an f16 KV cache moves logits of ~10 by
# ~5e-4 relative, i.e. ~5e-3; a CPU engine with f32 everywhere is ~1e-5 off).
MIN_GREEDY_MARGIN = 0.02
# A continuation that falls into a short cycle checks little of the decode path; ask for variety.
MIN_DISTINCT_GREEDY = 16
MAX_FOLDER_BYTES = 2 * 1024 * 1024
FORMATS = {"q1": "q1_0", "tq2": "pq2_0"}


def make_config():
    kwargs = dict(
        GEOMETRY,
        vocab_size=gt.VOCAB_SIZE,
        rms_norm_eps=RMS_EPS,
        tie_word_embeddings=False,
        attention_bias=False,
        use_sliding_window=False,
        bos_token_id=gt.ENDOFTEXT_ID,
        eos_token_id=gt.IM_END_ID,
        pad_token_id=gt.ENDOFTEXT_ID,
    )
    if "rope_parameters" in inspect.signature(Qwen3Config.__init__).parameters:
        kwargs["rope_parameters"] = {"rope_type": "default", "rope_theta": ROPE_THETA}
    else:
        kwargs["rope_theta"] = ROPE_THETA
    cfg = Qwen3Config(**kwargs)
    assert rope_theta_of(cfg) == ROPE_THETA, rope_theta_of(cfg)
    assert cfg.head_dim == GEOMETRY["head_dim"] and not cfg.tie_word_embeddings
    return cfg


def rope_theta_of(cfg):
    params = getattr(cfg, "rope_parameters", None)
    if isinstance(params, dict) and "rope_theta" in params:
        return params["rope_theta"]
    return cfg.rope_theta


def build_model(cfg, seed, fmt):
    """Random float weights from `seed` (same for every format), then quantized in place."""
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").to(torch.float32)
    gen = torch.Generator().manual_seed(seed)
    quantize = gm.QUANTIZERS[fmt]
    with torch.no_grad():
        for name, p in model.named_parameters():
            assert name.endswith(".weight"), f"unexpected parameter {name} (Qwen3 has no biases)"
            if name.endswith("norm.weight"):
                assert p.dim() == 1, name
                lo, hi = NORM_WEIGHT_RANGE
                p.copy_(lo + (hi - lo) * torch.rand(p.shape, generator=gen))
                continue
            assert p.dim() == 2, name
            std = {"model.embed_tokens.weight": EMBED_STD, "lm_head.weight": LM_HEAD_STD}
            p.copy_(torch.randn(p.shape, generator=gen) * std.get(name, LINEAR_STD))
            p.copy_(quantize(p))
            gm.check_quantized(name, p, fmt)
    return model.eval()


@torch.no_grad()
def logits_of(model, ids):
    return model(input_ids=torch.tensor([ids]), use_cache=False).logits[0].to(torch.float32)


def greedy_loop(model, ids, n):
    """Plain argmax over full forwards (no cache): the definition of the greedy continuation."""
    seq, margins = list(ids), []
    for _ in range(n):
        top = torch.topk(logits_of(model, seq)[-1], 2)
        margins.append(float(top.values[0] - top.values[1]))
        seq.append(int(top.indices[0]))
    return seq[len(ids):], margins


@torch.no_grad()
def greedy_generate(model, ids, n):
    # Mutate the model's own generation config: a config passed to generate() gets its unset
    # fields (eos included) refilled from the model's.
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = gt.ENDOFTEXT_ID
    out = model.generate(
        input_ids=torch.tensor([ids]),
        attention_mask=torch.ones(1, len(ids), dtype=torch.long),
        max_new_tokens=n,
        do_sample=False,
        num_beams=1,
    )
    new = out[0, len(ids):].tolist()
    assert len(new) == n, f"generate stopped after {len(new)} of {n} tokens"
    return new


def choose_seed(cfg, prompt):
    """First seed whose greedy continuations (both formats) are decisive and varied."""
    for seed in range(BASE_SEED, BASE_SEED + MAX_SEED_TRIES):
        worst_margin, fewest_distinct = float("inf"), N_GREEDY
        for fmt in FORMATS.values():
            tokens, margins = greedy_loop(build_model(cfg, seed, fmt), prompt, N_GREEDY)
            worst_margin = min(worst_margin, min(margins))
            fewest_distinct = min(fewest_distinct, len(set(tokens)))
        print(f"seed {seed}: smallest greedy margin {worst_margin:.4f}, "
              f"fewest distinct tokens {fewest_distinct}")
        if worst_margin >= MIN_GREEDY_MARGIN and fewest_distinct >= MIN_DISTINCT_GREEDY:
            return seed
    raise SystemExit(
        f"no seed in {MAX_SEED_TRIES} tries gives greedy margins >= {MIN_GREEDY_MARGIN} "
        f"and >= {MIN_DISTINCT_GREEDY} distinct tokens"
    )


def load_checkpoint(folder):
    try:
        model = AutoModelForCausalLM.from_pretrained(
            folder, dtype=torch.float32, attn_implementation="eager"
        )
    except TypeError:  # transformers < 4.56 spells it torch_dtype
        model = AutoModelForCausalLM.from_pretrained(
            folder, torch_dtype=torch.float32, attn_implementation="eager"
        )
    return model.eval()


def expected_tensor_names(cfg):
    names = {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"}
    per_layer = [
        "input_layernorm", "post_attention_layernorm", "self_attn.q_proj", "self_attn.k_proj",
        "self_attn.v_proj", "self_attn.o_proj", "self_attn.q_norm", "self_attn.k_norm",
        "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj",
    ]
    for layer in range(cfg.num_hidden_layers):
        names.update(f"model.layers.{layer}.{p}.weight" for p in per_layer)
    return names


def check_saved_tensors(folder, cfg, model):
    from safetensors import safe_open

    with safe_open(str(folder / "model.safetensors"), framework="pt") as f:
        names = set(f.keys())
        assert names == expected_tensor_names(cfg), sorted(names ^ expected_tensor_names(cfg))
        params = dict(model.named_parameters())
        for name in names:
            t = f.get_tensor(name)
            assert t.dtype == torch.float32, (name, t.dtype)
            assert torch.equal(t, params[name].detach()), f"{name} changed on save"


def check_transformers_tokenizer(folder, sample):
    """transformers must read the tokenizer files the same way (best effort: a loader change in a
    future transformers release is reported, not fatal; the `tokenizers` check is)."""
    try:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(folder)
        ids = tok(sample["text"], add_special_tokens=False)["input_ids"]
        assert ids == sample["ids"], (ids, sample["ids"])
        chat = tok.apply_chat_template(
            [{"role": "user", "content": "A tree?"}], tokenize=False, add_generation_prompt=True
        )
        assert chat == PROMPT_TEXT, repr(chat)
        print("  transformers tokenizer agrees; chat template renders the prompt")
    except Exception as err:  # noqa: BLE001 - reported, see docstring
        print(f"  WARNING: transformers tokenizer check failed: {err!r}")


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_golden(folder, fmt, cfg, seed, tok, prompt, sample):
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    build_model(cfg, seed, fmt).save_pretrained(folder)
    gt.save_tokenizer(tok, folder)

    model = load_checkpoint(folder)
    check_saved_tensors(folder, cfg, model)
    check_transformers_tokenizer(folder, sample)

    logits = logits_of(model, prompt)
    assert logits.shape == (len(prompt), gt.VOCAB_SIZE), logits.shape
    assert torch.isfinite(logits).all()
    weights = {n: p.detach() for n, p in model.named_parameters()}
    geometry = {
        "head_dim": cfg.head_dim, "n_q_heads": cfg.num_attention_heads,
        "n_kv_heads": cfg.num_key_value_heads, "rms_eps": RMS_EPS, "rope_theta": ROPE_THETA,
        "n_layers": cfg.num_hidden_layers,
    }
    reference = gm.reference_logits(weights, geometry, prompt)
    ref_err = float((reference - logits.to(torch.float64)).abs().max())
    assert ref_err <= REFERENCE_TOL, f"transformers vs float64 reference: {ref_err}"

    greedy, margins = greedy_loop(model, prompt, N_GREEDY)
    assert min(margins) >= MIN_GREEDY_MARGIN, min(margins)
    assert len(set(greedy)) >= MIN_DISTINCT_GREEDY, greedy
    generated = greedy_generate(model, prompt, N_GREEDY)
    assert generated == greedy, (generated, greedy)

    flat = logits.reshape(-1).tolist()
    (folder / "logits.bin").write_bytes(struct.pack(f"<{len(flat)}f", *flat))
    meta = {
        "format": fmt,
        "seed": seed,
        "prompt_text": PROMPT_TEXT,
        "tokens": prompt,
        "n_tokens": len(prompt),
        "vocab": gt.VOCAB_SIZE,
        "logits_file": "logits.bin",
        "logits_shape": [len(prompt), gt.VOCAB_SIZE],
        "logits_dtype": "f32 little-endian, row-major [n_tokens, vocab]",
        "greedy_new_tokens": greedy,
        "greedy_min_margin": min(margins),
        "greedy_margins": margins,
        "reference_max_abs_diff": ref_err,
        "tokenizer_check": sample,
        "sha256": {
            "logits.bin": sha256(folder / "logits.bin"),
            "model.safetensors": sha256(folder / "model.safetensors"),
        },
        "versions": {
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "tokenizers": __import__("tokenizers").__version__,
        },
    }
    (folder / "meta.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")

    size = sum(p.stat().st_size for p in folder.iterdir())
    assert size < MAX_FOLDER_BYTES, f"{folder} is {size} bytes"
    print(
        f"  {folder}: {len(prompt)} tokens x {gt.VOCAB_SIZE} logits, |logit| max "
        f"{float(logits.abs().max()):.3f}, ref diff {ref_err:.2e}, greedy min margin "
        f"{min(margins):.4f}, {size / 1024:.0f} KiB"
    )
    print(f"  greedy: {greedy}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="e.g. tests/golden")
    args = parser.parse_args()
    torch.use_deterministic_algorithms(True)
    torch.set_default_dtype(torch.float32)
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, CPU float32")

    tok = gt.build_tokenizer()
    sample = gt.check_tokenizer(tok)
    prompt = tok.encode(PROMPT_TEXT).ids
    assert 16 <= len(prompt) <= 32 and prompt[0] == gt.IM_START_ID, prompt
    cfg = make_config()
    seed = choose_seed(cfg, prompt)
    for short, fmt in FORMATS.items():
        print(f"{fmt}:")
        write_golden(args.out / short, fmt, cfg, seed, tok, prompt, sample)
    print("golden files written and self-checked")


if __name__ == "__main__":
    main()

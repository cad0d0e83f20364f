#!/usr/bin/env python3
"""Golden reference files for bonsai's qwen35 (Bonsai 2) CPU test: a tiny random hybrid model.

Run by hand, never in CI (see README.md, "qwen35 goldens"):

    PYTHONPATH=<dir with transformers==5.23.0> python3 scripts/reference/make_golden_qwen35.py --out tests/golden

Writes OUT/qwen35-plain/ and OUT/qwen35-hadamard/. Each variant:

1. draws the weights **as a GGUF file stores them** (names, tiled V-head order, norms already
   +1, ssm_a = -exp(A_log)): every quantized matrix ternary with one f16-exact scale per
   128-group (so PQ2_0, Q2_0 g64 and PTQ1_0 all hold it exactly), ssm_alpha / ssm_beta
   BF16-exact, the rest f32;
2. derives the transformers weights from them (the inverse of bonsai2.md §5's map; for the
   hadamard variant also the inverse of the fold, §4.4: w = s ⊙ BlockH(w_stored) per row,
   embedding rows e = s ⊙ BlockH(z), ssm_out's columns grouped);
3. runs `Qwen3_5ForCausalLM` in float64 with the §5 patch (the module's float32 casts made
   float64) on a 24-token prompt: logits at every position, and a 64-token greedy continuation
   (plain argmax over full forwards) with each step's top-1 − top-2 margin;
4. checks it against an independent numpy float64 forward written from bonsai2.md §3-§4 on the
   stored tensors (GGUF conventions, Hadamard applied to activations), to 1e-12 relative.

Files per variant: `weights.safetensors` (stored tensors, see STORAGE below), `meta.json` (GGUF
metadata to write, hadamard metadata, tokens, greedy tokens and margins, versions, seed, hashes),
`logits.bin` (transformers, float64 little-endian, row-major [n_tokens, vocab]) and
`logits_f16_cache.bin` (the numpy reference with cached K/V rounded to float16, as bonsai caches
them: the difference to logits.bin is the f16 cache's exact effect).
"""

import argparse
import hashlib
import json
import math
import struct
import sys
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors.numpy import save_file  # noqa: E402
from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig  # noqa: E402
from transformers.models.qwen3_5 import modeling_qwen3_5  # noqa: E402

import golden_tokenizer as gt  # noqa: E402

STORAGE = """\
weights.safetensors holds every tensor under its GGUF name. GGUF lists dimensions as ne
(ne[0] fastest); a safetensors shape is the reverse of ne (row-major), e.g. attn_qkv.weight
ne [256, 640] is stored as [640, 256] (one row per output).
* A quantized matrix NAME (every *.weight listed in meta.json quantized_names) is two tensors:
  NAME.trits U8 [out, in/4]: element j of row r is ((byte[r][j/4] >> 2*(j%4)) & 3) - 1 (ternary,
  code 3 unused), and NAME.scales F16 [out, in/128]: the scale of each 128-group. The value is
  trit * scale. Each group holds a nonzero trit, so its scale is also its max |value|.
* ssm_alpha.weight / ssm_beta.weight: F32 holding BF16-exact values (write them as BF16).
* Everything else: F32 (norms, ssm_conv1d.weight ne [4, C] stored [C, 4], ssm_dt.bias, ssm_a)."""

BASE_SEED = 20261203
MAX_SEED_TRIES = 200
HIDDEN, FFN, N_LAYERS = 256, 512, 4
N_Q, N_KV, HEAD_DIM = 4, 2, 64
ROT_DIMS = 16  # partial_rotary_factor 0.25 of head_dim 64
MROPE_SECTION = [3, 3, 2]  # sums to ROT_DIMS / 2; text positions make it plain NeoX RoPE
K_HEADS, V_HEADS, SSM_D = 2, 6, 64
CONV_K = 4
ROPE_THETA = 1e7
RMS_EPS = 1e-6
FULL_ATTENTION_INTERVAL = 4  # layers 0, 1, 2 linear; 3 full
GROUP = 128  # quantization group along the input dimension
HADAMARD_BLOCK = 128
PROMPT_TEXT = "<|im_start|>user\nA hybrid?<|im_end|>\n<|im_start|>assistant\n"
N_GREEDY = 64
# Init scales: embeddings O(1); inner linears small so residual updates do not swamp the
# embedding; a larger LM head spreads the logits (std ~3) so greedy steps are decisive.
EMBED_STD = 1.0
LINEAR_STD = 0.04
LM_HEAD_STD = 0.2
ALPHA_BETA_STD = 0.3
CONV_STD = 0.5
NORM_RANGE = (0.5, 1.5)  # stored (GGUF, +1 applied) norm weights
# The independent numpy forward and transformers (patched to float64) evaluate one function in
# different orders; sums of <= 512 terms over ~60 ops leave ~1e-14 relative.
REFERENCE_REL_TOL = 1e-12
# Each greedy step's top-1 beats the runner-up by at least this much: an engine within half of it
# reproduces the tokens. bonsai's f32 path with an f16 KV cache is ~1e-3 off at this size.
MIN_GREEDY_MARGIN = 0.02
MIN_DISTINCT_GREEDY = 16
MAX_FOLDER_BYTES = 2 * 1024 * 1024
VARIANTS = ("plain", "hadamard")
R = V_HEADS // K_HEADS
KEY_DIM, VALUE_DIM = K_HEADS * SSM_D, V_HEADS * SSM_D
CONV_DIM = 2 * KEY_DIM + VALUE_DIM


def layer_is_full(layer):
    return (layer + 1) % FULL_ATTENTION_INTERVAL == 0


# ---------------------------------------------------------------------------------------------
# The float64 patch of bonsai2.md §5: the modelling code casts to float32 in the GDN kernels, the
# norms, RoPE and the eager softmax. Give the module a torch whose float32/float are float64.


def patch_float64():
    proxy = types.ModuleType("torch_f64")
    proxy.__dict__.update({k: getattr(torch, k) for k in dir(torch) if not k.startswith("__")})
    proxy.float32 = torch.float64
    proxy.float = torch.float64
    modeling_qwen3_5.torch = proxy
    torch.Tensor.float = lambda self, *a, **k: self.to(torch.float64)


# ---------------------------------------------------------------------------------------------
# Blockwise signed Hadamard (bonsai2.md §4.2).


def hadamard_matrix(n):
    idx = np.arange(n)
    parity = np.vectorize(lambda v: bin(v).count("1") & 1)(idx[:, None] & idx[None, :])
    return np.where(parity == 1, -1.0, 1.0) / math.sqrt(n)


H_BLOCK = hadamard_matrix(HADAMARD_BLOCK)


def block_h(x):
    """BlockH over the last axis (blocks of HADAMARD_BLOCK)."""
    shape = x.shape
    blocks = x.reshape(*shape[:-1], shape[-1] // HADAMARD_BLOCK, HADAMARD_BLOCK)
    return (blocks @ H_BLOCK.T).reshape(shape)


def tiled_to_grouped_perm(head_dim):
    """perm[g] = tiled position of grouped head g; value vectors index [head][head_dim]."""
    heads = [0] * V_HEADS
    for k_idx in range(K_HEADS):
        for v_idx in range(R):
            heads[k_idx * R + v_idx] = v_idx * K_HEADS + k_idx
    return np.concatenate([np.arange(h * head_dim, (h + 1) * head_dim) for h in heads])


V_PERM = tiled_to_grouped_perm(SSM_D)  # grouped vector = tiled vector[V_PERM]
HEAD_PERM = tiled_to_grouped_perm(1)  # grouped head g <- tiled head HEAD_PERM[g]


# ---------------------------------------------------------------------------------------------
# Stored (GGUF) weights.


def quantized_names():
    names = ["token_embd.weight", "output.weight"]
    for layer in range(N_LAYERS):
        p = f"blk.{layer}."
        if layer_is_full(layer):
            names += [p + s for s in ("attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight")]
        else:
            names += [p + s for s in ("attn_qkv.weight", "attn_gate.weight", "ssm_out.weight")]
        names += [p + s for s in ("ffn_gate.weight", "ffn_up.weight", "ffn_down.weight")]
    return names


def quant_shape(name):
    """(out, in) of a quantized matrix."""
    stem = name.split(".")[-2]
    return {
        "token_embd": (gt.VOCAB_SIZE, HIDDEN),
        "output": (gt.VOCAB_SIZE, HIDDEN),
        "attn_q": (N_Q * HEAD_DIM * 2, HIDDEN),
        "attn_k": (N_KV * HEAD_DIM, HIDDEN),
        "attn_v": (N_KV * HEAD_DIM, HIDDEN),
        "attn_output": (HIDDEN, N_Q * HEAD_DIM),
        "attn_qkv": (CONV_DIM, HIDDEN),
        "attn_gate": (VALUE_DIM, HIDDEN),
        "ssm_out": (HIDDEN, VALUE_DIM),
        "ffn_gate": (FFN, HIDDEN),
        "ffn_up": (FFN, HIDDEN),
        "ffn_down": (HIDDEN, FFN),
    }[stem]


def quant_std(name, k):
    if name == "token_embd.weight":
        return EMBED_STD
    if name == "output.weight":
        return LM_HEAD_STD
    return LINEAR_STD * math.sqrt(256 / k)


def draw_quantized(rng, out, k, std):
    """Ternary trits (P(0) = 1/3) and one f16 scale per 128-group; every group has a nonzero."""
    trits = rng.integers(-1, 2, size=(out, k)).astype(np.int8)
    groups = trits.reshape(out, k // GROUP, GROUP)
    empty = ~np.any(groups != 0, axis=2)
    groups[empty, 0] = 1
    # A ternary value with P(0) = 1/3 has variance 2/3 * d^2.
    scales = (std * math.sqrt(1.5) * rng.uniform(0.75, 1.25, size=(out, k // GROUP))).astype(np.float16)
    return trits, scales


def dequant(trits, scales):
    out, k = trits.shape
    return (trits.reshape(out, k // GROUP, GROUP) * scales.astype(np.float64)[:, :, None]).reshape(out, k)


def bf16_exact(x):
    return torch.from_numpy(x).to(torch.bfloat16).to(torch.float64).numpy()


def draw_stored(seed):
    rng = np.random.default_rng(seed)
    quant = {n: draw_quantized(rng, *quant_shape(n), quant_std(n, quant_shape(n)[1])) for n in quantized_names()}
    floats = {"output_norm.weight": rng.uniform(*NORM_RANGE, HIDDEN)}
    for layer in range(N_LAYERS):
        p = f"blk.{layer}."
        floats[p + "attn_norm.weight"] = rng.uniform(*NORM_RANGE, HIDDEN)
        floats[p + "post_attention_norm.weight"] = rng.uniform(*NORM_RANGE, HIDDEN)
        if layer_is_full(layer):
            floats[p + "attn_q_norm.weight"] = rng.uniform(*NORM_RANGE, HEAD_DIM)
            floats[p + "attn_k_norm.weight"] = rng.uniform(*NORM_RANGE, HEAD_DIM)
        else:
            floats[p + "ssm_alpha.weight"] = bf16_exact(rng.normal(0, ALPHA_BETA_STD / 16, (V_HEADS, HIDDEN)))
            floats[p + "ssm_beta.weight"] = bf16_exact(rng.normal(0, ALPHA_BETA_STD / 16, (V_HEADS, HIDDEN)))
            floats[p + "ssm_conv1d.weight"] = rng.normal(0, CONV_STD, (CONV_DIM, CONV_K))
            floats[p + "ssm_dt.bias"] = rng.uniform(-1.0, 1.0, V_HEADS)
            floats[p + "ssm_a"] = -rng.uniform(0.5, 4.0, V_HEADS)
            floats[p + "ssm_norm.weight"] = rng.uniform(*NORM_RANGE, SSM_D)
    # Stored values are what an f32 file holds.
    floats = {n: v.astype(np.float32).astype(np.float64) for n, v in floats.items()}
    return quant, floats


def draw_signs(seed):
    rng = np.random.default_rng(seed + 7919)
    return {w: np.where(rng.integers(0, 2, w) == 1, 1.0, -1.0) for w in (HIDDEN, VALUE_DIM, FFN)}


def hadamard_metadata(signs):
    widths = sorted(signs)
    return {
        "prism.hadamard.version": 1,
        "prism.hadamard.block_size": HADAMARD_BLOCK,
        "prism.hadamard.transform": "normalized-sylvester-walsh-hadamard",
        "prism.hadamard.axis": "input-last-dimension",
        "prism.hadamard.sign_mode": "explicit",
        "prism.hadamard.sign_widths": widths,
        "prism.hadamard.sign_values": [int(v) for w in widths for v in signs[w]],
        "prism.hadamard.weight_names": [n for n in quantized_names() if n != "token_embd.weight"],
        "prism.hadamard.inverse_weight_names": ["token_embd.weight"],
        "prism.hadamard.gdn_v_grouped": True,
    }


def gguf_metadata():
    return {
        "general.architecture": "qwen35",
        "qwen35.context_length": 512,
        "qwen35.embedding_length": HIDDEN,
        "qwen35.block_count": N_LAYERS,
        "qwen35.feed_forward_length": FFN,
        "qwen35.attention.head_count": N_Q,
        "qwen35.attention.head_count_kv": N_KV,
        "qwen35.attention.key_length": HEAD_DIM,
        "qwen35.attention.value_length": HEAD_DIM,
        "qwen35.attention.layer_norm_rms_epsilon": RMS_EPS,
        "qwen35.rope.freq_base": ROPE_THETA,
        "qwen35.rope.dimension_count": ROT_DIMS,
        "qwen35.rope.dimension_sections": MROPE_SECTION + [0],
        "qwen35.ssm.conv_kernel": CONV_K,
        "qwen35.ssm.state_size": SSM_D,
        "qwen35.ssm.group_count": K_HEADS,
        "qwen35.ssm.time_step_rank": V_HEADS,
        "qwen35.ssm.inner_size": VALUE_DIM,
        "qwen35.full_attention_interval": FULL_ATTENTION_INTERVAL,
    }


# ---------------------------------------------------------------------------------------------
# Stored -> transformers (inverse of bonsai2.md §5 and of the §4.4 fold).


def to_hf(quant, floats, signs):
    """HF state dict (float64 torch tensors) from the stored tensors; signs None = plain."""
    folded = signs is not None

    def mat(name):
        w = dequant(*quant[name])
        if folded and name != "token_embd.weight":
            w = signs[w.shape[1]] * block_h(w)  # w = s ⊙ BlockH(w_stored), per row
        return w

    def grouped_rows(w, head_dim):
        return w[tiled_to_grouped_perm(head_dim)]

    emb = dequant(*quant["token_embd.weight"])
    if folded:
        emb = signs[HIDDEN] * block_h(emb)  # e = s ⊙ BlockH(z)
    sd = {
        "model.embed_tokens.weight": emb,
        "model.norm.weight": floats["output_norm.weight"] - 1.0,
        "lm_head.weight": mat("output.weight"),
    }
    for layer in range(N_LAYERS):
        p, q = f"blk.{layer}.", f"model.layers.{layer}."
        sd[q + "input_layernorm.weight"] = floats[p + "attn_norm.weight"] - 1.0
        sd[q + "post_attention_layernorm.weight"] = floats[p + "post_attention_norm.weight"] - 1.0
        sd[q + "mlp.gate_proj.weight"] = mat(p + "ffn_gate.weight")
        sd[q + "mlp.up_proj.weight"] = mat(p + "ffn_up.weight")
        sd[q + "mlp.down_proj.weight"] = mat(p + "ffn_down.weight")
        if layer_is_full(layer):
            a = q + "self_attn."
            sd[a + "q_proj.weight"] = mat(p + "attn_q.weight")
            sd[a + "k_proj.weight"] = mat(p + "attn_k.weight")
            sd[a + "v_proj.weight"] = mat(p + "attn_v.weight")
            sd[a + "o_proj.weight"] = mat(p + "attn_output.weight")
            sd[a + "q_norm.weight"] = floats[p + "attn_q_norm.weight"] - 1.0
            sd[a + "k_norm.weight"] = floats[p + "attn_k_norm.weight"] - 1.0
        else:
            a = q + "linear_attn."
            qkv = mat(p + "attn_qkv.weight")
            sd[a + "in_proj_qkv.weight"] = np.concatenate([qkv[: 2 * KEY_DIM], grouped_rows(qkv[2 * KEY_DIM :], SSM_D)])
            sd[a + "in_proj_z.weight"] = grouped_rows(mat(p + "attn_gate.weight"), SSM_D)
            sd[a + "in_proj_b.weight"] = floats[p + "ssm_beta.weight"][HEAD_PERM]
            sd[a + "in_proj_a.weight"] = floats[p + "ssm_alpha.weight"][HEAD_PERM]
            conv = floats[p + "ssm_conv1d.weight"]
            conv = np.concatenate([conv[: 2 * KEY_DIM], grouped_rows(conv[2 * KEY_DIM :], SSM_D)])
            sd[a + "conv1d.weight"] = conv[:, None, :]
            sd[a + "dt_bias"] = floats[p + "ssm_dt.bias"][HEAD_PERM]
            sd[a + "A_log"] = np.log(-floats[p + "ssm_a"][HEAD_PERM])
            sd[a + "norm.weight"] = floats[p + "ssm_norm.weight"]
            out = mat(p + "ssm_out.weight")
            # Folded: the columns are already grouped (gdn_v_grouped). Plain: tiled -> grouped.
            sd[a + "out_proj.weight"] = out if folded else out[:, V_PERM]
    return {k: torch.from_numpy(np.ascontiguousarray(v, dtype=np.float64)) for k, v in sd.items()}


def make_hf_config():
    return Qwen3_5TextConfig(
        vocab_size=gt.VOCAB_SIZE,
        hidden_size=HIDDEN,
        intermediate_size=FFN,
        num_hidden_layers=N_LAYERS,
        num_attention_heads=N_Q,
        num_key_value_heads=N_KV,
        head_dim=HEAD_DIM,
        linear_conv_kernel_dim=CONV_K,
        linear_key_head_dim=SSM_D,
        linear_value_head_dim=SSM_D,
        linear_num_key_heads=K_HEADS,
        linear_num_value_heads=V_HEADS,
        hidden_act="silu",
        rms_norm_eps=RMS_EPS,
        tie_word_embeddings=False,
        attention_bias=False,
        max_position_embeddings=512,
        full_attention_interval=FULL_ATTENTION_INTERVAL,
        rope_parameters={
            "rope_type": "default",
            "rope_theta": ROPE_THETA,
            "partial_rotary_factor": ROT_DIMS / HEAD_DIM,
            "mrope_section": MROPE_SECTION,
            "mrope_interleaved": True,
        },
        bos_token_id=gt.ENDOFTEXT_ID,
        eos_token_id=gt.IM_END_ID,
        pad_token_id=gt.ENDOFTEXT_ID,
        attn_implementation="eager",
    )


def build_hf(sd):
    config = make_hf_config()
    expected = ["linear_attention"] * 3 + ["full_attention"]
    assert config.layer_types == expected, config.layer_types
    model = Qwen3_5ForCausalLM(config).to(torch.float64).eval()
    missing, unexpected = model.load_state_dict(sd, strict=False)
    assert not unexpected, unexpected
    assert not missing, missing
    return model


@torch.no_grad()
def hf_logits(model, tokens):
    out = model(torch.tensor([tokens]), use_cache=False)
    return out.logits[0].numpy()


# ---------------------------------------------------------------------------------------------
# Independent numpy float64 forward on the stored tensors (bonsai2.md §3 and §4.3).


def rms_norm(x, w):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + RMS_EPS) * w


def silu(x):
    return x / (1.0 + np.exp(-x))


def softplus(x):
    return np.log1p(np.exp(x))


def reference_logits(quant, floats, signs, tokens, f16_cache=False):
    """Logits [len(tokens), vocab]; `f16_cache` rounds cached K (after QK-norm and RoPE) and V to
    float16 where bonsai caches them (transformers keeps them in the model's dtype)."""
    folded = signs is not None
    cache = (lambda m: m.astype(np.float16).astype(np.float64)) if f16_cache else (lambda m: m)
    w = {n: dequant(*t) for n, t in quant.items()}

    def fold(x):  # the activation transform before a folded matmul: BlockH(s ⊙ x)
        return block_h(signs[x.shape[-1]] * x) if folded else x

    t_len = len(tokens)
    x = w["token_embd.weight"][tokens]
    if folded:
        x = signs[HIDDEN] * block_h(x)
    for layer in range(N_LAYERS):
        p = f"blk.{layer}."
        h = rms_norm(x, floats[p + "attn_norm.weight"])
        if layer_is_full(layer):
            hr = fold(h)
            qf = (hr @ w[p + "attn_q.weight"].T).reshape(t_len, N_Q, 2 * HEAD_DIM)
            q, gate = qf[:, :, :HEAD_DIM], qf[:, :, HEAD_DIM:].reshape(t_len, N_Q * HEAD_DIM)
            k = (hr @ w[p + "attn_k.weight"].T).reshape(t_len, N_KV, HEAD_DIM)
            v = (hr @ w[p + "attn_v.weight"].T).reshape(t_len, N_KV, HEAD_DIM)
            q = rms_norm(q, floats[p + "attn_q_norm.weight"])
            k = rms_norm(k, floats[p + "attn_k_norm.weight"])
            half = ROT_DIMS // 2
            theta = np.arange(t_len)[:, None] * ROPE_THETA ** (-2.0 * np.arange(half) / ROT_DIMS)
            cos, sin = np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]
            for m in (q, k):
                a, b = m[..., :half].copy(), m[..., half:ROT_DIMS].copy()
                m[..., :half] = a * cos - b * sin
                m[..., half:ROT_DIMS] = a * sin + b * cos
            k, v = cache(k), cache(v)
            o = np.zeros((t_len, N_Q, HEAD_DIM))
            for head in range(N_Q):
                kv = head // (N_Q // N_KV)
                scores = q[:, head] @ k[:, kv].T / math.sqrt(HEAD_DIM)
                scores = np.where(np.tril(np.ones((t_len, t_len))) == 1, scores, -np.inf)
                e = np.exp(scores - scores.max(axis=1, keepdims=True))
                o[:, head] = (e / e.sum(axis=1, keepdims=True)) @ v[:, kv]
            o = o.reshape(t_len, -1) * (1.0 / (1.0 + np.exp(-gate)))
            x = x + fold(o) @ w[p + "attn_output.weight"].T
        else:
            hr = fold(h)
            mixed = hr @ w[p + "attn_qkv.weight"].T
            z = hr @ w[p + "attn_gate.weight"].T
            beta_in = h @ floats[p + "ssm_beta.weight"].T  # alpha / beta never folded
            alpha_in = h @ floats[p + "ssm_alpha.weight"].T
            cw = floats[p + "ssm_conv1d.weight"]
            padded = np.concatenate([np.zeros((CONV_K - 1, CONV_DIM)), mixed])
            c = silu(sum(cw[:, kk] * padded[kk : kk + t_len] for kk in range(CONV_K)))
            qh = c[:, :KEY_DIM].reshape(t_len, K_HEADS, SSM_D)
            kh = c[:, KEY_DIM : 2 * KEY_DIM].reshape(t_len, K_HEADS, SSM_D)
            vh = c[:, 2 * KEY_DIM :].reshape(t_len, V_HEADS, SSM_D)
            l2 = lambda m: m / np.sqrt(np.sum(m * m, axis=-1, keepdims=True) + 1e-6)  # noqa: E731
            qh, kh = l2(qh) / math.sqrt(SSM_D), l2(kh)
            g = floats[p + "ssm_a"] * softplus(alpha_in + floats[p + "ssm_dt.bias"])
            beta = 1.0 / (1.0 + np.exp(-beta_in))
            y = np.zeros((t_len, V_HEADS, SSM_D))
            for head in range(V_HEADS):
                kk = head % K_HEADS  # tiled order: V head h reads K head h % K_HEADS
                s = np.zeros((SSM_D, SSM_D))
                for t in range(t_len):
                    s = math.exp(g[t, head]) * s
                    delta = beta[t, head] * (vh[t, head] - s.T @ kh[t, kk])
                    s = s + np.outer(kh[t, kk], delta)
                    y[t, head] = s.T @ qh[t, kk]
            y = rms_norm(y, floats[p + "ssm_norm.weight"]) * silu(z.reshape(t_len, V_HEADS, SSM_D))
            y = y.reshape(t_len, VALUE_DIM)
            if folded:
                y = fold(y[:, V_PERM])  # permute tiled -> grouped, then sign, then H
            x = x + y @ w[p + "ssm_out.weight"].T
        h2 = fold(rms_norm(x, floats[p + "post_attention_norm.weight"]))
        act = silu(h2 @ w[p + "ffn_gate.weight"].T) * (h2 @ w[p + "ffn_up.weight"].T)
        x = x + fold(act) @ w[p + "ffn_down.weight"].T
    return fold(rms_norm(x, floats["output_norm.weight"])) @ w["output.weight"].T


# ---------------------------------------------------------------------------------------------


def greedy(model, prompt, n):
    tokens, margins = list(prompt), []
    for _ in range(n):
        logits = hf_logits(model, tokens)[-1]
        top2 = np.sort(logits)[-2:]
        margins.append(float(top2[1] - top2[0]))
        tokens.append(int(np.argmax(logits)))
    return tokens[len(prompt) :], margins


def rel_diff(a, b):
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def pack_trits(trits):
    codes = (trits + 1).astype(np.uint8).reshape(trits.shape[0], -1, 4)
    return (codes[:, :, 0] | codes[:, :, 1] << 2 | codes[:, :, 2] << 4 | codes[:, :, 3] << 6).astype(np.uint8)


def unpack_trits(packed):
    codes = np.stack([(packed >> (2 * i)) & 3 for i in range(4)], axis=-1)
    return codes.reshape(packed.shape[0], -1).astype(np.int8) - 1


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def try_variant(variant, seed, prompt):
    quant, floats = draw_stored(seed)
    signs = draw_signs(seed) if variant == "hadamard" else None
    model = build_hf(to_hf(quant, floats, signs))
    logits = hf_logits(model, prompt)
    new, margins = greedy(model, prompt, N_GREEDY)
    ok = min(margins) >= MIN_GREEDY_MARGIN and len(set(new)) >= MIN_DISTINCT_GREEDY
    return ok, (quant, floats, signs, model, logits, new, margins)


def write_variant(out_dir, variant, seed, prompt, drawn):
    quant, floats, signs, model, logits, new, margins = drawn
    ref = reference_logits(quant, floats, signs, prompt)
    ref_diff = rel_diff(logits, ref)
    print(f"{variant}: seed {seed}, transformers vs numpy reference {ref_diff:.2e} relative")
    assert ref_diff <= REFERENCE_REL_TOL, f"{variant}: transformers vs reference {ref_diff:e}"
    # The greedy continuation from the cached generate() path must equal the argmax loop.
    with torch.no_grad():
        gen = model.generate(
            torch.tensor([prompt]), max_new_tokens=N_GREEDY, do_sample=False, eos_token_id=None, pad_token_id=gt.ENDOFTEXT_ID
        )
    assert gen[0, len(prompt) :].tolist() == new, f"{variant}: generate() differs from the argmax loop"

    folder = out_dir / f"qwen35-{variant}"
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {}
    for name, (trits, scales) in quant.items():
        tensors[name + ".trits"] = pack_trits(trits)
        tensors[name + ".scales"] = scales
        assert np.array_equal(unpack_trits(tensors[name + ".trits"]), trits)
    for name, v in floats.items():
        tensors[name] = np.ascontiguousarray(v.astype(np.float32))
    save_file(tensors, str(folder / "weights.safetensors"))
    (folder / "logits.bin").write_bytes(np.ascontiguousarray(logits, dtype="<f8").tobytes())
    ref16 = reference_logits(quant, floats, signs, prompt, f16_cache=True)
    (folder / "logits_f16_cache.bin").write_bytes(np.ascontiguousarray(ref16, dtype="<f8").tobytes())
    meta = {
        "variant": variant,
        "storage": STORAGE,
        "gguf_metadata": gguf_metadata(),
        "hadamard_metadata": hadamard_metadata(signs) if signs is not None else None,
        "quantized_names": quantized_names(),
        "layer_types": ["full_attention" if layer_is_full(i) else "linear_attention" for i in range(N_LAYERS)],
        "hf_config": make_hf_config().to_dict(),
        "prompt_text": PROMPT_TEXT,
        "tokens": prompt,
        "logits_shape": list(logits.shape),
        "logits_dtype": "float64 little-endian, row-major [n_tokens, vocab]",
        "logits_f16_cache": "logits_f16_cache.bin: the numpy reference with cached K/V rounded to float16",
        "f16_cache_effect_max": float(np.max(np.abs(ref16 - ref))),
        "greedy_new_tokens": new,
        "greedy_margins": margins,
        "greedy_min_margin": min(margins),
        "reference_rel_diff": ref_diff,
        "seed": seed,
        "versions": {
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "numpy": np.__version__,
        },
        "sha256": {f: sha256(folder / f) for f in ("weights.safetensors", "logits.bin", "logits_f16_cache.bin")},
    }
    (folder / "meta.json").write_text(json.dumps(meta, indent=1, default=lambda o: o.tolist()) + "\n")
    size = sum(f.stat().st_size for f in folder.iterdir())
    assert size < MAX_FOLDER_BYTES, f"{folder}: {size} bytes"
    print(f"{variant}: {size} bytes, greedy min margin {min(margins):.4f}, {len(set(new))} distinct ids")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    torch.manual_seed(0)
    patch_float64()
    assert transformers.__version__ == "5.23.0", transformers.__version__
    prompt = gt.build_tokenizer().encode(PROMPT_TEXT).ids
    assert 20 <= len(prompt) <= 28, len(prompt)
    for v_index, variant in enumerate(VARIANTS):
        for attempt in range(MAX_SEED_TRIES):
            seed = BASE_SEED + 1000 * v_index + attempt
            ok, drawn = try_variant(variant, seed, prompt)
            if ok:
                write_variant(args.out, variant, seed, prompt, drawn)
                break
            print(f"{variant}: seed {seed} rejected (min margin {min(drawn[6]):.4f}, {len(set(drawn[5]))} distinct)")
        else:
            sys.exit(f"{variant}: no seed in {MAX_SEED_TRIES} tries gave decisive greedy steps")


if __name__ == "__main__":
    main()

"""Quantization rules and an independent float64 Qwen3 forward for the golden files (torch).

The quantizers define what the GGUF formats mean (SPEC.md section 1); the model is then run on the
dequantized weights, so the Rust engine and transformers see identical numbers.
"""

import math

import torch

GROUP_LEN = 128  # weights per quantization group, along the input (contiguous) dimension


def _groups(w):
    out_dim, in_dim = w.shape
    assert in_dim % GROUP_LEN == 0, f"input dim {in_dim} not a multiple of {GROUP_LEN}"
    return w.reshape(out_dim, in_dim // GROUP_LEN, GROUP_LEN)


def _to_f16_exact(x):
    """Round to the nearest f16 and back: the scale as the file stores it."""
    return x.to(torch.float16).to(torch.float32)


def quantize_q1_0(w):
    """Q1_0: d = mean|w| of the group (minimises the L2 error of +-d), stored as f16;
    w -> +d when w >= 0 (bit 1), else -d."""
    g = _groups(w.to(torch.float32))
    d = _to_f16_exact(g.abs().mean(dim=-1, keepdim=True))
    return torch.where(g >= 0, d, -d).reshape(w.shape)


def quantize_pq2_0(w):
    """PQ2_0 (ternary, 128 per group): d = absmax of the group, stored as f16;
    |w| >= 0.5 absmax -> sign(w) d, else 0."""
    g = _groups(w.to(torch.float32))
    absmax = g.abs().amax(dim=-1, keepdim=True)
    d = _to_f16_exact(absmax)
    keep = g.abs() >= 0.5 * absmax
    return torch.where(keep, torch.sign(g) * d, torch.zeros_like(g)).reshape(w.shape)


QUANTIZERS = {"q1_0": quantize_q1_0, "pq2_0": quantize_pq2_0}


def check_quantized(name, w, fmt):
    """Asserts that every group of `w` is exactly representable in `fmt` (so the Rust converter's
    re-quantization reproduces it bit for bit)."""
    g = _groups(w)
    d = g.abs().amax(dim=-1, keepdim=True)
    assert torch.equal(d, _to_f16_exact(d)), f"{name}: scale not f16-exact"
    if fmt == "q1_0":
        ok = (g.abs() == d).all()
    else:
        ok = ((g == d) | (g == -d) | (g == 0)).all()
    assert ok, f"{name}: values outside the {fmt} code set"


def reference_logits(weights, cfg, ids):
    """Qwen3 forward in float64 from SPEC.md section 2 (pre-norm, QK-norm, NeoX RoPE, GQA,
    SwiGLU), written independently of transformers. `weights` maps HF names to tensors."""
    w = {k: v.to(torch.float64) for k, v in weights.items()}
    n = len(ids)
    hd, nq, nkv = cfg["head_dim"], cfg["n_q_heads"], cfg["n_kv_heads"]
    eps, theta = cfg["rms_eps"], cfg["rope_theta"]
    half = hd // 2

    def rms(t, weight):
        return t / torch.sqrt((t * t).mean(dim=-1, keepdim=True) + eps) * weight

    inv_freq = theta ** (-torch.arange(0, half, dtype=torch.float64) * 2 / hd)
    angles = torch.arange(n, dtype=torch.float64)[:, None] * inv_freq[None, :]
    cos, sin = torch.cos(angles)[:, None, :], torch.sin(angles)[:, None, :]

    def rope(t):  # [n, heads, hd]; dims i and i + hd/2 rotate together
        a, b = t[..., :half], t[..., half:]
        return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)

    causal = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
    x = w["model.embed_tokens.weight"][torch.tensor(ids)]
    for layer in range(cfg["n_layers"]):
        p = f"model.layers.{layer}."
        h = rms(x, w[p + "input_layernorm.weight"])
        q = (h @ w[p + "self_attn.q_proj.weight"].T).reshape(n, nq, hd)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).reshape(n, nkv, hd)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(n, nkv, hd)
        q = rope(rms(q, w[p + "self_attn.q_norm.weight"]))
        k = rope(rms(k, w[p + "self_attn.k_norm.weight"]))
        group = nq // nkv
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        scores = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(hd)
        scores = scores.masked_fill(causal, float("-inf"))
        o = torch.einsum("hqk,khd->qhd", torch.softmax(scores, dim=-1), v).reshape(n, nq * hd)
        x = x + o @ w[p + "self_attn.o_proj.weight"].T
        h = rms(x, w[p + "post_attention_layernorm.weight"])
        gate = h @ w[p + "mlp.gate_proj.weight"].T
        up = h @ w[p + "mlp.up_proj.weight"].T
        x = x + (torch.nn.functional.silu(gate) * up) @ w[p + "mlp.down_proj.weight"].T
    return rms(x, w["model.norm.weight"]) @ w["lm_head.weight"].T

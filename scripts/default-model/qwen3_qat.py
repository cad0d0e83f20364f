"""Qwen3 (the transformers Qwen3ForCausalLM computation) with every matrix trained 1-bit.

Every matrix that `bonsai convert --type q1_0` stores as Q1_0 (the embedding, the attention and
MLP projections, the LM head) goes through `q1_0` in the forward pass: per group of 128 weights
along the input dimension, the scale d is the mean |w| rounded to f16, and each weight becomes +d
(w >= 0) or -d, as crates/bonsai-gguf/src/blocks/q1.rs quantizes. The gradient passes straight
through to latent f32 weights (straight-through estimator). Norm weights stay f32.

The exported checkpoint holds the quantized values themselves (`quantized_state_dict`): bonsai's
quantizer maps ±d groups back to exactly the same bits and scale, so the GGUF computes what this
model computes.
"""

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

GROUP = 128


@dataclass
class Geometry:
    hidden: int
    n_layers: int
    n_q_heads: int
    n_kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    context: int = 512
    rope_theta: float = 10000.0
    rms_eps: float = 1e-6

    def hf_config(self, eos_id, pad_id):
        """config.json of a transformers Qwen3ForCausalLM with this geometry."""
        return {
            "architectures": ["Qwen3ForCausalLM"],
            "model_type": "qwen3",
            "hidden_size": self.hidden,
            "intermediate_size": self.ffn,
            "num_hidden_layers": self.n_layers,
            "num_attention_heads": self.n_q_heads,
            "num_key_value_heads": self.n_kv_heads,
            "head_dim": self.head_dim,
            "vocab_size": self.vocab,
            "max_position_embeddings": self.context,
            "rope_theta": self.rope_theta,
            "rope_scaling": None,
            "rms_norm_eps": self.rms_eps,
            "tie_word_embeddings": False,
            "hidden_act": "silu",
            "attention_bias": False,
            "attention_dropout": 0.0,
            "use_sliding_window": False,
            "sliding_window": None,
            "max_window_layers": self.n_layers,
            "initializer_range": 0.02,
            "use_cache": True,
            "bos_token_id": None,
            "eos_token_id": eos_id,
            "pad_token_id": pad_id,
            "torch_dtype": "float32",
        }

    def as_dict(self):
        return asdict(self)


def q1_0(w):
    """Q1_0 g128 of a [out, in] matrix, dequantized: ±(mean |w| of the group, rounded to f16)."""
    groups = w.float().reshape(w.shape[0], w.shape[1] // GROUP, GROUP)
    d = groups.abs().mean(-1, keepdim=True).half().float()
    return torch.where(groups >= 0, d, -d).reshape(w.shape)


def q1_0_ste(w):
    """q1_0 forward, identity backward."""
    return w + (q1_0(w) - w).detach()


class QLinear(nn.Module):
    def __init__(self, n_in, n_out, std):
        super().__init__()
        assert n_in % GROUP == 0, f"input dim {n_in} is not a multiple of {GROUP}"
        self.weight = nn.Parameter(torch.randn(n_out, n_in) * std)

    def forward(self, x):
        return F.linear(x, q1_0_ste(self.weight))


class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (self.weight * xf).to(x.dtype)


def rope_tables(g, device):
    """cos and sin [context, head_dim] for the NeoX half-split rotation Qwen3 uses."""
    inv = 1.0 / (g.rope_theta ** (torch.arange(0, g.head_dim, 2, dtype=torch.float64) / g.head_dim))
    angles = torch.outer(torch.arange(g.context, dtype=torch.float64), inv)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().float().to(device), angles.sin().float().to(device)


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat([-b, a], dim=-1)


class Attention(nn.Module):
    def __init__(self, g, std, out_std):
        super().__init__()
        self.g = g
        self.q_proj = QLinear(g.hidden, g.n_q_heads * g.head_dim, std)
        self.k_proj = QLinear(g.hidden, g.n_kv_heads * g.head_dim, std)
        self.v_proj = QLinear(g.hidden, g.n_kv_heads * g.head_dim, std)
        self.o_proj = QLinear(g.n_q_heads * g.head_dim, g.hidden, out_std)
        self.q_norm = RMSNorm(g.head_dim, g.rms_eps)
        self.k_norm = RMSNorm(g.head_dim, g.rms_eps)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        g = self.g
        q = self.q_norm(self.q_proj(x).view(b, t, g.n_q_heads, g.head_dim)).transpose(1, 2)
        k = self.k_norm(self.k_proj(x).view(b, t, g.n_kv_heads, g.head_dim)).transpose(1, 2)
        v = self.v_proj(x).view(b, t, g.n_kv_heads, g.head_dim).transpose(1, 2)
        q = (q.float() * cos + rotate_half(q.float()) * sin).to(v.dtype)
        k = (k.float() * cos + rotate_half(k.float()) * sin).to(v.dtype)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return self.o_proj(y.transpose(1, 2).reshape(b, t, g.n_q_heads * g.head_dim))


class Mlp(nn.Module):
    def __init__(self, g, std, out_std):
        super().__init__()
        self.gate_proj = QLinear(g.hidden, g.ffn, std)
        self.up_proj = QLinear(g.hidden, g.ffn, std)
        self.down_proj = QLinear(g.ffn, g.hidden, out_std)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, g, std, out_std):
        super().__init__()
        self.input_layernorm = RMSNorm(g.hidden, g.rms_eps)
        self.self_attn = Attention(g, std, out_std)
        self.post_attention_layernorm = RMSNorm(g.hidden, g.rms_eps)
        self.mlp = Mlp(g, std, out_std)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class Body(nn.Module):
    """`model.*` of the checkpoint: embedding, layers, final norm."""

    def __init__(self, g, std, out_std):
        super().__init__()
        self.embed_tokens = nn.Embedding(g.vocab, g.hidden)
        nn.init.normal_(self.embed_tokens.weight, std=std)
        self.layers = nn.ModuleList(Layer(g, std, out_std) for _ in range(g.n_layers))
        self.norm = RMSNorm(g.hidden, g.rms_eps)


class Qwen3Qat(nn.Module):
    def __init__(self, g, std=0.02):
        super().__init__()
        self.g = g
        out_std = std / math.sqrt(2 * g.n_layers)
        self.model = Body(g, std, out_std)
        self.lm_head = QLinear(g.hidden, g.vocab, std)
        cos, sin = rope_tables(g, "cpu")
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, ids):
        """Logits [batch, time, vocab] in f32."""
        t = ids.shape[1]
        cos, sin = self.cos[:t], self.sin[:t]
        # The residual stream stays f32; under autocast the matmuls run in bf16.
        x = F.embedding(ids, q1_0_ste(self.model.embed_tokens.weight))
        for layer in self.model.layers:
            x = layer(x, cos, sin)
        return self.lm_head(self.model.norm(x)).float()

    def loss(self, ids, targets):
        logits = self.forward(ids)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    def matrices(self):
        """The parameters stored as Q1_0 (the others are norm weights)."""
        return [p for n, p in self.named_parameters() if p.dim() == 2]

    def quantized_state_dict(self):
        """Checkpoint tensors, f32: every matrix replaced by its Q1_0 values (see the module doc)."""
        out = {}
        for name, p in self.named_parameters():
            p = p.detach().float()
            out[name] = (q1_0(p) if p.dim() == 2 else p).contiguous().cpu()
        return out

    @torch.no_grad()
    def load_quantized(self):
        """Replaces every matrix by its quantized values (quantizing again is then the identity)."""
        for p in self.matrices():
            p.copy_(q1_0(p))

"""A numpy stand-in for TorchBackend (float64 truth, float32 and bf16-rounded results, wall-clock
times), so image_torch.py's math, manifest handling and verdicts are tested without torch or a
GPU (test_image_torch.py). Small shapes only: it is written for clarity, not speed."""
import time

import numpy as np


def group_norm(x, gamma, beta, groups, eps):
    c = x.shape[0]
    g = x.reshape(groups, -1)
    mean = g.mean(axis=1, keepdims=True)
    var = ((g - mean) ** 2).mean(axis=1, keepdims=True)
    y = ((g - mean) / np.sqrt(var + eps)).reshape(x.shape)
    return y * gamma.reshape(c, 1, 1) + beta.reshape(c, 1, 1)


def silu(x):
    return x / (1 + np.exp(-x))


def upsample_nearest2x(x):
    return x.repeat(2, axis=1).repeat(2, axis=2)


def im2col(x):
    c, h, w = x.shape
    padded = np.pad(x, ((0, 0), (1, 1), (1, 1)))
    cols = np.empty((c, 9, h, w), dtype=x.dtype)
    for ky in range(3):
        for kx in range(3):
            cols[:, ky * 3 + kx] = padded[:, ky:ky + h, kx:kx + w]
    return cols.reshape(c * 9, h * w)


def conv3x3(x, weight, bias):
    c_out = weight.shape[0]
    h, w = x.shape[1:]
    return (weight.reshape(c_out, -1) @ im2col(x) + bias[:, None]).reshape(c_out, h, w)


def joint_attention(q, k, v):
    h, seq, hd = q.shape
    s = q @ k.transpose(0, 2, 1) / np.sqrt(hd)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    out = (p / p.sum(axis=-1, keepdims=True)) @ v
    return out.transpose(1, 0, 2).reshape(seq, h * hd)


def compute(op, params, t):
    if op == "group_norm":
        return group_norm(*t, params["groups"], params["eps"])
    if op == "group_norm_silu":
        return silu(group_norm(*t, params["groups"], params["eps"]))
    if op == "silu":
        return silu(t[0])
    if op == "upsample_nearest2x":
        return upsample_nearest2x(t[0])
    if op == "im2col":
        return im2col(t[0])
    if op == "conv3x3":
        return conv3x3(*t)
    if op in ("gemm_f32", "gemm_ternary"):
        return t[0] @ t[1].T
    if op == "joint_attention":
        return joint_attention(*t)
    raise ValueError(f"unknown op {op!r}")


def round_to_bf16(a):
    """float32 -> nearest bfloat16 (ties to even), returned as float32."""
    bits = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32)


class NumpyBackend:
    def describe(self):
        return f"numpy {np.__version__} stand-in (CPU)"

    def truth(self, case, inputs):
        return compute(case["op"], case["params"], [a.astype(np.float64) for a in inputs])

    def _timed(self, case, inputs):
        start = time.perf_counter()
        result = compute(case["op"], case["params"], inputs)
        return result.astype(np.float32), time.perf_counter() - start

    def f32(self, case, inputs):
        return self._timed(case, [a.astype(np.float32) for a in inputs])

    def bf16(self, case, inputs):
        result, secs = self._timed(case, [round_to_bf16(a) for a in inputs])
        return round_to_bf16(result), secs

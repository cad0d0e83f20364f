"""Torch side of image_torch.py: truth in float64, torch's float32 (TF32 off) and bf16 results,
and torch's median time per call. Runs where torch and a CUDA GPU exist (the H200 machine)."""
import statistics

import torch
import torch.nn.functional as F

from image_torch import SPIN_CYCLES, TIMED_BATCHES, WARMUP


def core(op, params, t):
    """The op itself, as torch runs it (what is timed). `t` are the inputs in manifest order."""
    if op == "group_norm":
        x, gamma, beta = t
        return F.group_norm(x[None], params["groups"], gamma, beta, params["eps"])
    if op == "group_norm_silu":
        x, gamma, beta = t
        return F.silu(F.group_norm(x[None], params["groups"], gamma, beta, params["eps"]))
    if op == "silu":
        return F.silu(t[0])
    if op == "upsample_nearest2x":
        return F.interpolate(t[0][None], scale_factor=2, mode="nearest")
    if op == "im2col":
        return F.unfold(t[0][None], 3, padding=1)
    if op == "conv3x3":
        x, w, b = t
        return F.conv2d(x[None], w, b, padding=1)
    if op in ("gemm_f32", "gemm_ternary"):
        a, w = t
        return a @ w.T
    if op == "joint_attention":
        q, k, v = t
        return F.scaled_dot_product_attention(q[None], k[None], v[None])
    raise ValueError(f"unknown op {op!r}")


def layout(op, r):
    """torch's result in our output layout (not timed: a view or a copy torch would not need)."""
    if op in ("group_norm", "group_norm_silu", "upsample_nearest2x", "im2col", "conv3x3"):
        return r[0]
    if op == "joint_attention":
        _, h, seq, hd = r.shape
        return r[0].transpose(0, 1).reshape(seq, h * hd)
    return r


class TorchBackend:
    def __init__(self, truth_on_cpu=False):
        # TF32 off: cuDNN's default is on and would make the f32 references TF32 ones.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
        self.gpu = torch.device("cuda")
        self.truth_device = torch.device("cpu") if truth_on_cpu else self.gpu
        self.notes = []

    def describe(self):
        return (f"torch {torch.__version__} on {torch.cuda.get_device_name()}, TF32 matmul "
                f"{torch.backends.cuda.matmul.allow_tf32}, cudnn {torch.backends.cudnn.allow_tf32}")

    def _run(self, case, inputs, dtype, device):
        t = [torch.from_numpy(a).to(device=device, dtype=dtype) for a in inputs]
        return layout(case["op"], core(case["op"], case["params"], t))

    def truth(self, case, inputs):
        try:
            r = self._run(case, inputs, torch.float64, self.truth_device)
        except (RuntimeError, NotImplementedError) as e:  # an op without a float64 CUDA kernel
            self.notes.append(f"{case['name']}: float64 truth on the CPU ({e})")
            r = self._run(case, inputs, torch.float64, torch.device("cpu"))
        return r.cpu().numpy()

    def _timed(self, case, inputs, dtype):
        tensors = [torch.from_numpy(a).to(device=self.gpu, dtype=dtype) for a in inputs]
        result = layout(case["op"], core(case["op"], case["params"], tensors)).float().cpu().numpy()
        # As many rotated input copies as our side used, so neither side is timed from L2 alone.
        copies = [tensors] + [[x.clone() for x in tensors] for _ in range(max(case["copies"], 1) - 1)]
        op, params = case["op"], case["params"]
        for i in range(WARMUP):
            core(op, params, copies[i % len(copies)])
        samples = []
        for _ in range(TIMED_BATCHES):
            if hasattr(torch.cuda, "_sleep"):
                torch.cuda._sleep(SPIN_CYCLES)
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            for c in copies:
                core(op, params, c)
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) * 1e-3 / len(copies))
        del copies, tensors
        torch.cuda.empty_cache()
        return result, statistics.median(samples)

    def f32(self, case, inputs):
        return self._timed(case, inputs, torch.float32)

    def bf16(self, case, inputs):
        return self._timed(case, inputs, torch.bfloat16)

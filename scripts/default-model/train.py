"""Trains bonsai's default model: a small Qwen3 with 1-bit (Q1_0 g128) weights, quantization-aware,
on the story corpus (stories.py), for a fixed wall-clock budget; writes a Hugging Face checkpoint
that `bonsai convert DIR -o OUT.gguf --type q1_0` turns into the model bonsai ships.

    python3 train.py --corpus corpus.txt --out ckpt --seconds 360 [--preset default]

Prints the loss as it trains, then the final training loss, the validation loss and the
perplexity on the held-out text (models/bonsai-tiny-stories.heldout.txt) computed the way `bonsai
perplexity` computes it (windows of the model's context from the start of the file, f32, the
quantized weights), and writes it to OUT/eval.json so install.sh can compare bonsai's figure.
"""

import argparse
import json
import os
import shutil
import time

import numpy as np
import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer

from heldout import heldout_perplexity, heldout_sha256, heldout_windows
from qwen3_qat import Geometry, Qwen3Qat

HERE = os.path.dirname(os.path.abspath(__file__))
ENDOFTEXT, IM_END = "<|endoftext|>", "<|im_end|>"
# Geometries: `default` is the shipped model; the smaller ones are for CPU runs of this script.
PRESETS = {
    "default": dict(hidden=384, n_layers=8, n_q_heads=6, n_kv_heads=3, head_dim=64, ffn=1152),
    "small": dict(hidden=256, n_layers=4, n_q_heads=4, n_kv_heads=2, head_dim=64, ffn=768),
    "tiny": dict(hidden=128, n_layers=2, n_q_heads=2, n_kv_heads=1, head_dim=64, ffn=384),
}
# Training losses averaged into the reported final one.
FINAL_STEPS = 50
TOKENIZE_CHUNK = 20_000


def log(msg):
    print(msg, flush=True)


def load_tokens(corpus, tok):
    """The corpus as one uint16 token stream (cached beside it) and the offsets where samples start."""
    cache = corpus + ".tokens.npy"
    if os.path.exists(cache) and os.path.getmtime(cache) >= os.path.getmtime(corpus):
        tokens = np.load(cache)
    else:
        t0 = time.time()
        with open(corpus, encoding="utf-8") as f:
            docs = f.read().split(ENDOFTEXT)
        if not docs[-1]:
            docs.pop()
        eot = tok.token_to_id(ENDOFTEXT)
        parts = []
        for i in range(0, len(docs), TOKENIZE_CHUNK):
            for enc in tok.encode_batch(docs[i:i + TOKENIZE_CHUNK]):
                parts.append(np.asarray(enc.ids + [eot], dtype=np.uint16))
        tokens = np.concatenate(parts)
        np.save(cache, tokens)
        log(f"tokenized {len(docs)} samples into {len(tokens)} tokens in {time.time() - t0:.1f} s")
    starts = np.flatnonzero(tokens == tok.token_to_id(ENDOFTEXT)) + 1
    return tokens, np.concatenate([[0], starts[:-1]])


def batch_of(tokens_dev, starts, rng, batch, context, device):
    """`batch` windows of context + 1 tokens, each beginning at a sample's first token."""
    at = torch.from_numpy(starts[rng.integers(0, len(starts), batch)]).to(device)
    idx = at[:, None] + torch.arange(context + 1, device=device)[None, :]
    chunk = tokens_dev[idx].long()
    return chunk[:, :-1], chunk[:, 1:]


def lr_at(step, progress, args):
    """Warmup, then constant, then a linear decay over the last `decay` share of the time."""
    warm = min(1.0, (step + 1) / args.warmup)
    start = 1.0 - args.decay
    tail = 1.0 if progress < start else max(0.02, 1.0 - (progress - start) / args.decay)
    return args.lr * warm * tail


def make_optimizer(model, args, device):
    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    rest = [p for n, p in model.named_parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": args.wd}, {"params": rest, "weight_decay": 0.0}]
    fused = {"fused": True} if device.type == "cuda" else {}
    return torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95), eps=1e-8, **fused)


def write_checkpoint(model, tok_dir, out, summary):
    os.makedirs(out, exist_ok=True)
    tok = Tokenizer.from_file(os.path.join(tok_dir, "tokenizer.json"))
    eos, pad = tok.token_to_id(IM_END), tok.token_to_id(ENDOFTEXT)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(model.g.hf_config(eos, pad), f, indent=2)
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump({"eos_token_id": [eos, pad], "pad_token_id": pad}, f, indent=2)
    # Matrices as f16: their values are ±d with d an f16, so nothing is rounded, and the file is
    # half the size (and compresses to a few MB).
    tensors = {k: (v.half() if v.dim() == 2 else v) for k, v in model.quantized_state_dict().items()}
    save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tok_dir, name), os.path.join(out, name))
    with open(os.path.join(out, "eval.json"), "w") as f:
        json.dump(summary, f, indent=2)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True, help="text from stories.py")
    ap.add_argument("--out", required=True, help="checkpoint directory to write")
    ap.add_argument("--seconds", type=float, required=True, help="wall-clock budget of the training loop")
    ap.add_argument("--preset", choices=sorted(PRESETS), default="default")
    ap.add_argument("--batch", type=int, default=64, help="sequences of --context tokens per step")
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=200, help="steps")
    ap.add_argument("--decay", type=float, default=0.4, help="share of the time spent decaying the lr")
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--compile", choices=["auto", "on", "off"], default="auto",
                    help="torch.compile (auto: on CUDA, falling back to eager if it fails)")
    ap.add_argument("--log-seconds", type=float, default=15.0)
    ap.add_argument("--valid-windows", type=int, default=32, help="validation windows (multiple of 8)")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: torch's default)")
    args = ap.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    tok = Tokenizer.from_file(os.path.join(HERE, "tokenizer.json"))
    geometry = Geometry(vocab=tok.get_vocab_size(with_added_tokens=True), context=args.context,
                        **PRESETS[args.preset])
    assert geometry.vocab <= 1 << 16, "the token stream is stored as uint16"
    model = Qwen3Qat(geometry).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"device {device} ({torch.cuda.get_device_name() if device.type == 'cuda' else 'cpu'}), "
        f"torch {torch.__version__}; model {geometry.as_dict()}; {n_params / 1e6:.2f} M parameters")

    tokens, starts = load_tokens(args.corpus, tok)
    n_valid = max(args.valid_windows, len(starts) // 100)
    valid_starts, train_starts = starts[-n_valid:], starts[:-n_valid]
    # Every window lies whole inside its part of the stream.
    train_starts = train_starts[train_starts + args.context + 1 <= valid_starts[0]]
    valid_starts = valid_starts[valid_starts + args.context + 1 <= len(tokens)]
    tokens_dev = torch.from_numpy(tokens.astype(np.int32)).to(device)
    valid = batch_of(tokens_dev, valid_starts, np.random.default_rng(1), args.valid_windows, args.context, device)
    log(f"{len(tokens)} tokens, {len(train_starts)} training samples")

    use_amp = device.type == "cuda"
    loss_fn = model.loss
    if args.compile == "on" or (args.compile == "auto" and device.type == "cuda"):
        loss_fn = torch.compile(model.loss)
    opt = make_optimizer(model, args, device)

    def train_step(x, y, fn):
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_amp):
            loss = fn(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    def valid_loss():
        model.eval()
        with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_amp):
            out = sum(model.loss(valid[0][i:i + 8], valid[1][i:i + 8]).item()
                      for i in range(0, args.valid_windows, 8)) / (args.valid_windows // 8)
        model.train()
        return out

    start = time.time()
    step, seen, last_log, recent, last_losses = 0, 0, start, [], []
    while True:
        elapsed = time.time() - start
        if elapsed >= args.seconds:
            break
        for group in opt.param_groups:
            group["lr"] = lr_at(step, elapsed / args.seconds, args)
        x, y = batch_of(tokens_dev, train_starts, rng, args.batch, args.context, device)
        try:
            loss = train_step(x, y, loss_fn)
        except Exception as e:  # noqa: BLE001 - a compiler failure must not cost the run
            if loss_fn is model.loss or args.compile == "on" or step > 0:
                raise
            log(f"torch.compile failed ({type(e).__name__}: {e}); training eagerly")
            loss_fn = model.loss
            opt.zero_grad(set_to_none=True)
            loss = train_step(x, y, loss_fn)
        recent.append(loss.detach())
        last_losses = (last_losses + [recent[-1]])[-FINAL_STEPS:]
        step += 1
        seen += x.numel()
        now = time.time()
        if now - last_log >= args.log_seconds or step == 1:
            train_loss = torch.stack(recent).mean().item()
            recent = []
            log(f"step {step:6d} | {now - start:6.1f} s | lr {opt.param_groups[0]['lr']:.2e} | "
                f"loss {train_loss:.4f} | valid {valid_loss():.4f} | {seen / (now - start):,.0f} tok/s")
            last_log = now
    train_secs = time.time() - start
    final_train = torch.stack(last_losses).mean().item()
    final_valid = valid_loss()

    # The held-out figure is compared with bonsai's f32 CPU one: no TF32 rounding here.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    model.load_quantized()
    model.eval()
    ppl, n_pred = heldout_perplexity(model, heldout_windows(tok, args.context), device)
    summary = {
        "preset": args.preset, "geometry": geometry.as_dict(), "parameters": n_params,
        "steps": step, "tokens": seen, "train_seconds": round(train_secs, 1),
        "tokens_per_second": round(seen / train_secs), "final_train_loss": round(final_train, 4),
        "final_valid_loss": round(final_valid, 4), "heldout_perplexity": round(ppl, 4),
        "heldout_predicted_tokens": n_pred, "heldout_sha256": heldout_sha256(),
        "device": str(device), "torch": torch.__version__,
        "args": vars(args),
    }
    log(f"done: {step} steps, {seen:,} tokens in {train_secs:.0f} s ({seen / train_secs:,.0f} tok/s); "
        f"final train loss {final_train:.4f}, valid loss {final_valid:.4f}; held-out perplexity "
        f"{ppl:.4f} over {n_pred} predicted tokens (f32, quantized weights)")
    write_checkpoint(model, HERE, args.out, summary)
    log(f"checkpoint written to {args.out}")


if __name__ == "__main__":
    main()

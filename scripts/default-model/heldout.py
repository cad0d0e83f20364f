"""The held-out text (models/bonsai-tiny-stories.heldout.txt, stories.py --seed 99 --count 7) and
its perplexity computed the way `bonsai perplexity` computes it: the whole file tokenized at once,
cut into consecutive windows of the model's context, each window scored on its own (its first
token is not predicted), exp of the mean negative log-likelihood."""

import hashlib
import math
import os

import torch

HELDOUT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                        "models", "bonsai-tiny-stories.heldout.txt"))


def heldout_sha256():
    with open(HELDOUT, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def heldout_windows(tok, context):
    with open(HELDOUT, encoding="utf-8") as f:
        ids = tok.encode(f.read()).ids
    return [ids[i:i + context] for i in range(0, len(ids), context)]


@torch.no_grad()
def heldout_perplexity(model, windows, device):
    """(perplexity, predicted tokens) of an f32 model on the windows."""
    nll, n = 0.0, 0
    for w in windows:
        if len(w) < 2:
            continue
        ids = torch.tensor([w], device=device)
        logits = model(ids)[0, :-1].double()
        nll += torch.nn.functional.cross_entropy(logits, ids[0, 1:], reduction="sum").item()
        n += len(w) - 1
    return math.exp(nll / n), n

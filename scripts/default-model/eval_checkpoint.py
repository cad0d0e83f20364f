"""Prints the held-out perplexity of a checkpoint written by train.py, computed in PyTorch (f32,
the checkpoint's quantized weights), for comparison with `bonsai perplexity` on the converted
GGUF. install.sh uses it when the checkpoint's eval.json was computed on another held-out text.

    python3 eval_checkpoint.py CHECKPOINT_DIR
"""

import json
import os
import sys

import torch
from safetensors.torch import load_file
from tokenizers import Tokenizer

from heldout import heldout_perplexity, heldout_windows
from qwen3_qat import Geometry, Qwen3Qat


def main():
    ckpt = sys.argv[1]
    with open(os.path.join(ckpt, "eval.json")) as f:
        geometry = Geometry(**json.load(f)["geometry"])
    model = Qwen3Qat(geometry)
    weights = {k: v.float() for k, v in load_file(os.path.join(ckpt, "model.safetensors")).items()}
    model.load_state_dict(weights)
    model.eval()
    tok = Tokenizer.from_file(os.path.join(ckpt, "tokenizer.json"))
    ppl, n = heldout_perplexity(model, heldout_windows(tok, geometry.context), torch.device("cpu"))
    print(f"{ppl:.6f} {n}")


if __name__ == "__main__":
    main()

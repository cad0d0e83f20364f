#!/usr/bin/env python3
"""Compares one model file's check on both engines (written by scripts/llama-peer/check-one.sh):
perplexity, greedy text (first differing token) and the first step's top logits.

Args: LLAMA_OUT BONSAI_PPL_OUT BONSAI_GEN_OUT PROMPT BONSAI_LOGITS_F32 VOCAB
"""
import re, sys
# Byte tokens that are not whole UTF-8 characters: both sides read with U+FFFD for them.
read = lambda p: open(p, encoding="utf-8", errors="replace").read()
llama = read(sys.argv[1])
ppl_l = float(re.search(r"perplexity: ([0-9.]+)", llama).group(1))
ppl_b = float(re.search(r"perplexity: ([0-9.]+)", read(sys.argv[2])).group(1))
text_l = llama.split("greedy text: ", 1)[1].rstrip("\n")
text_b = read(sys.argv[3]).rstrip("\n")
if text_b.startswith(sys.argv[4]):
    text_b = text_b[len(sys.argv[4]):]
# Tokens are bytes or "[unused_N]": split both texts the same way.
split = lambda t: re.findall(r"\[unused_\d+\]|.", t, re.S)
tl, tb = split(text_l), split(text_b)
first = next((i for i, (a, b) in enumerate(zip(tl, tb)) if a != b), None)
if first is None and len(tl) != len(tb):
    first = min(len(tl), len(tb))
rel = abs(ppl_l - ppl_b) / ppl_l
print(f"perplexity: llama.cpp {ppl_l:.4f}, bonsai {ppl_b:.4f} (relative difference {rel:.2e})")
# bonsai stops at an end-of-generation token; llama-peer-check generates past it.
stopped = first == len(tb) and "".join(tl[first:]).startswith("<|")
verdict = "identical" if first is None else (
    f"identical up to the end-of-generation token bonsai stops at (token {first})" if stopped
    else f"first difference at token {first} of {len(tl)}")
print("greedy tokens: " + verdict)
print(f"  llama.cpp: {''.join(tl[:12])}...")
print(f"  bonsai:    {''.join(tb[:12])}...")
# The first step's best logits on both sides: a difference inside the top few, between logits a
# few 1e-3 apart, is a near-tie that the 8-bit activations of llama.cpp decide the other way.
import array, os
top_l = re.search(r"first step top 5: (.*)", llama)
logits = array.array("f")
with open(sys.argv[5], "rb") as fh:
    logits.frombytes(fh.read())
vocab = int(sys.argv[6])
first = logits[:vocab]
best = sorted(range(vocab), key=lambda i: -first[i])[:5]
if top_l:
    print(f"  first step, llama.cpp top 5 (id:logit): {top_l.group(1)}")
print("  first step, bonsai top 5 (id:logit):    " + " ".join(f"{i}:{first[i]:.5f}" for i in best))

#!/usr/bin/env python3
"""Sums an Nsight Compute log of `--metrics gpu__time_duration.sum` runs (scripts/gpu-check.sh
`profile` step) per kernel and launch shape, largest total first.

    python3 scripts/ncu-summary.py LOG [LOG...]
"""
import collections
import re
import sys

KERNEL = re.compile(r"\n  (\S+) \(([\d, ]+)\)x\(([\d, ]+)\).*?gpu__time_duration\.sum\s+(\S+)\s+([\d.,]+)", re.S)
TO_US = {"ns": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3, "nsecond": 1e-3}


def summarize(path):
    text = open(path, encoding="utf-8", errors="replace").read()
    per_kernel = collections.OrderedDict()
    for name, grid, block, unit, value in KERNEL.findall(text):
        us = float(value.replace(",", "")) * TO_US.get(unit, 1.0)
        per_kernel.setdefault(f"{name} ({grid})x({block})", []).append(us)
    total = sum(sum(v) for v in per_kernel.values())
    launches = sum(len(v) for v in per_kernel.values())
    print(f"{path}: {launches} launches, {total:.1f} us")
    for key, times in sorted(per_kernel.items(), key=lambda kv: -sum(kv[1])):
        share = 100.0 * sum(times) / total if total else 0.0
        print(f"  {key:72s} n={len(times):4d} mean={sum(times) / len(times):9.2f} us total={sum(times):10.1f} us {share:5.1f}%")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for log in sys.argv[1:]:
        summarize(log)

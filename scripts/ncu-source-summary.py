#!/usr/bin/env python3
"""Per-kernel warp-stall summary of an Nsight Compute source page: reads the CSV of `ncu --import
REP --page source --print-source sass --csv` (one "Kernel Name" block per kernel, one row per SASS
instruction with its warp samples by stall reason) and prints, per kernel, its share of all
samples and its top stall reasons, then its N hottest instructions with their top reasons.

    python3 scripts/ncu-source-summary.py graph-source-sass.csv [N]
"""
import collections
import csv
import sys

ALL_SAMPLES = "Warp Stall Sampling (All Samples)"


def kernels(path):
    """{kernel name: [instruction row dict]} in file order."""
    out, name, header = collections.OrderedDict(), None, None
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        for row in csv.reader(f):
            if not row:
                continue
            if row[0] == "Kernel Name":
                name = row[1]
                out[name] = []
            elif row[0] == "Address":
                header = row
            elif name is not None and header is not None:
                out[name].append(dict(zip(header, row)))
    return out


def top(counter, total, n):
    return ", ".join(f"{k} {100 * v / max(total, 1):.0f}%" for k, v in counter.most_common(n) if v)


def main(path, n_instructions):
    data = kernels(path)
    if not data:
        sys.exit(f"{path}: no \"Kernel Name\" blocks (expected ncu --page source --csv output)")
    reasons = None
    grand = sum(int(r.get(ALL_SAMPLES, 0) or 0) for rows in data.values() for r in rows)
    print(f"{grand} warp samples in {len(data)} kernels")
    for name, rows in data.items():
        if reasons is None and rows:
            reasons = [k for k in rows[0] if k.startswith("stall_") and "(" not in k]
        total = sum(int(r[ALL_SAMPLES]) for r in rows)
        if total == 0:
            continue
        by = collections.Counter()
        for r in rows:
            for k in reasons:
                by[k[len("stall_"):]] += int(r[k])
        print(f"{name:40s} {total:8d} {100 * total / max(grand, 1):5.1f}%  {top(by, total, 5)}")
        for r in sorted(rows, key=lambda r: -int(r[ALL_SAMPLES]))[:n_instructions]:
            s = int(r[ALL_SAMPLES])
            if s == 0:
                break
            mine = collections.Counter({k[len("stall_"):]: int(r[k]) for k in reasons})
            print(f"    {s:7d} {100 * s / total:5.1f}%  {r['Address'][-5:]}  {r['Source'].strip()[:56]:56s} {top(mine, s, 2)}")


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) == 3 else 4)

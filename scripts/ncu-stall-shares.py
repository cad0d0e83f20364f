#!/usr/bin/env python3
"""Warp-stall shares of one Nsight Compute result: reads `ncu --page raw --csv` output (a file
with the CSV somewhere in it; the first workload row is used) and prints each
`smsp__average_warps_issue_stalled_<reason>_per_issue_active` as cycles per issued instruction
and as a share of their sum, largest first, plus the workload's duration and instruction count.

    python3 scripts/ncu-stall-shares.py graph-stalls-raw.log
"""
import csv
import sys


def main(path):
    lines = open(path, encoding="utf-8", errors="replace").read().split("\n")
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None or start + 2 >= len(lines):
        sys.exit(f"{path}: no ncu raw CSV (a header row starting with \"ID\", units, values)")
    header, _units, values = list(csv.reader(lines[start:start + 3]))
    row = dict(zip(header, values))
    stalls = {}
    for name, value in row.items():
        if name.startswith("smsp__average_warps_issue_stalled_") and name.endswith("_per_issue_active.ratio"):
            reason = name[len("smsp__average_warps_issue_stalled_"):-len("_per_issue_active.ratio")]
            stalls[reason] = float(value.replace(",", ""))
    if not stalls:
        sys.exit(f"{path}: no warp-stall metrics in the result (was WarpStateStats collected?)")
    for key in ("gpu__time_duration.sum", "smsp__inst_executed.sum", "smsp__warps_active.avg.per_cycle_active"):
        if key in row:
            print(f"{key}: {row[key]}")
    total = sum(stalls.values())
    print(f"warp cycles per issued instruction, by stall reason (sum {total:.2f}):")
    for reason, cycles in sorted(stalls.items(), key=lambda kv: -kv[1]):
        print(f"  {reason:22s} {cycles:7.3f}  {100 * cycles / total:5.1f}%")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])

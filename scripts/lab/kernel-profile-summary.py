#!/usr/bin/env python3
"""Sums an ncu raw CSV (gpu__time_duration.sum) by kernel name: us per step, launches per step."""
import csv, sys, collections

path, div = sys.argv[1], float(sys.argv[2])
rows = [r for r in csv.reader(open(path, errors="replace")) if r]
start = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
head = rows[start]
name_col, time_col = head.index("Kernel Name"), head.index("gpu__time_duration.sum")
unit = rows[start + 1][time_col]
scale = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}[unit]
total, count = collections.Counter(), collections.Counter()
for r in rows[start + 2:]:
    if len(r) <= time_col:
        continue
    try:
        t = float(r[time_col].replace(",", "")) * scale
    except ValueError:
        continue
    name = r[name_col].split("(")[0][:60]
    total[name] += t
    count[name] += 1
all_us = sum(total.values())
print(f"{'kernel':60} {'us/step':>10} {'n/step':>8} {'mean us':>9} {'share':>6}")
for name, t in total.most_common():
    print(f"{name:60} {t/div:10.1f} {count[name]/div:8.1f} {t/count[name]:9.2f} {100*t/all_us:5.1f}%")
print(f"{'total':60} {all_us/div:10.1f} {sum(count.values())/div:8.1f}")

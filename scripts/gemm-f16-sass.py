#!/usr/bin/env python3
"""Per f16 GEMM entry point: registers and spills (ptxas -v), whole-function SASS instruction
count, the main loop's count (the backward branch around the 256 HMMA) with its top opcodes, and
a hash of the instruction text (equal hash = identical SASS).

Usage: scripts/gemm-f16-sass.py ALL.sass PTXAS.txt, from
  nvcc -cubin -arch=sm_90 -O3 -std=c++17 -Xptxas -v -o k.cubin combined.cu 2> PTXAS.txt
  cuobjdump -sass k.cubin > ALL.sass
(combined.cu as scripts/compile-kernels.sh builds it)."""
import collections
import hashlib
import re
import sys


def functions(path):
    funcs, cur = {}, None
    for line in open(path):
        m = re.match(r'\s*Function : (\S+)', line)
        if m:
            cur = m.group(1)
            funcs[cur] = []
            continue
        m = re.match(r'\s*/\*([0-9a-f]{4,})\*/\s+(.*?);', line)
        if m and cur:
            funcs[cur].append((int(m.group(1), 16), m.group(2).strip()))
    return funcs


def resources(path):
    res, name = {}, None
    for line in open(path):
        m = re.search(r"Compiling entry function '(\S+)'", line)
        if m:
            name = m.group(1)
        m = re.search(r'(\d+) bytes spill stores, (\d+) bytes spill loads', line)
        if m and name:
            res.setdefault(name, {})['spill'] = f"{m.group(1)}/{m.group(2)}"
        m = re.search(r'Used (\d+) registers', line)
        if m and name:
            res.setdefault(name, {})['regs'] = m.group(1)
    return res


def main_loop(ins):
    hmma = [a for a, i in ins if 'HMMA' in i]
    lo, hi = min(hmma), max(hmma)
    for a, i in ins:
        m = re.search(r'BRA\s.*?0x([0-9a-f]+)', i)
        if a > hi and m and int(m.group(1), 16) < lo:
            return [j for b, j in ins if int(m.group(1), 16) <= b <= a]
    return []


def main():
    funcs, res = functions(sys.argv[1]), resources(sys.argv[2])
    for f in sorted(funcs):
        if 'gemm_f16' not in f:
            continue
        ins = funcs[f]
        loop = main_loop(ins)
        ops = collections.Counter(re.sub(r'^@!?U?P\w+\s+', '', i).split()[0].split('.')[0] for i in loop)
        top = ', '.join(f"{k} {v}" for k, v in ops.most_common(5))
        digest = hashlib.sha1('\n'.join(i for _, i in ins).encode()).hexdigest()[:12]
        r = res.get(f, {})
        print(f"{f:42s} regs {r.get('regs')} spill {r.get('spill')} instr {len(ins)} loop {len(loop)} "
              f"(LDL {ops.get('LDL', 0)} STL {ops.get('STL', 0)}; {top}) sha {digest}")


if __name__ == '__main__':
    main()

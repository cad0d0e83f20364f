#!/usr/bin/env python3
"""Lab (not a test): static instruction counts of each entry point's wgmma main loop, the issue
budget of kernel notes "Issue budget of the chain". The loop is the block from the label that the
branch after the entry's last HGMMA jumps back to, through that branch; every path inside it is
counted (a full tile runs only one of its copy paths), NOPs and the `@!PT LDS` fillers not.

Usage: scripts/lab/wgmma-loop-count.py LISTING ENTRY...   LISTING from `nvdisasm -c k.cubin` of
the sm_90a library (scripts/sass-scoreboards.sh compiles and disassembles it; `-hex` is fine too),
e.g. matmul_q1_add_gemm_wgmma_n64_split matmul_q1_gemm_wgmma matmul_q2_gemm_wgmma."""
import collections
import re
import sys


def functions(text):
    for chunk in re.split(r'\n\s*\.text\.', text):
        yield chunk.split(':')[0].split('\n')[0].strip(), chunk


def main_loop(chunk):
    instructions, labels = [], {}
    for line in chunk.split('\n'):
        label = re.match(r'\s*(\.L_x_\d+):', line)
        if label:
            labels[label.group(1)] = len(instructions)
            continue
        ins = re.search(r'/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;', line)
        if ins:
            instructions.append(ins.group(1))
    hgmma = [i for i, x in enumerate(instructions) if 'HGMMA' in x]
    if not hgmma:
        return None
    for j in range(hgmma[-1], len(instructions)):
        target = re.search(r'BRA `\((\.L_x_\d+)\)', instructions[j])
        if target and labels.get(target.group(1), len(instructions)) <= hgmma[0]:
            body = instructions[labels[target.group(1)]:j + 1]
            return [x for x in body if not x.startswith('NOP') and not x.startswith('@!PT LDS')]
    return None


if __name__ == '__main__':
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    wanted = set(sys.argv[2:])
    for name, chunk in functions(open(sys.argv[1]).read()):
        if name not in wanted:
            continue
        body = main_loop(chunk)
        if body is None:
            print(f'{name}: no wgmma loop found')
            continue
        opcodes = [x.split()[1] if x.startswith('@') else x.split()[0] for x in body]
        kinds = collections.Counter(opcodes)
        uniform = sum(1 for op in opcodes if op.startswith('U'))
        print(f'{name}: {len(body)} instructions ({uniform} uniform-datapath), top: {kinds.most_common(6)}')

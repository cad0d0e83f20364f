#!/usr/bin/env python3
"""One kernel's SASS with each instruction's control bits decoded: stall cycles, yield (Y),
write scoreboard (Wn), read scoreboard (Rn) and wait mask (the scoreboards it waits on).

Usage: scripts/sass-scoreboards.py LISTING ENTRY, LISTING from `nvdisasm -hex -c k.cubin` (as
scripts/sass-scoreboards.sh makes it). On sm_70 and later every instruction is 128 bits; nvdisasm
-hex prints the low 64 on the instruction's line and the high 64 on the next, whose bits 41-62
are the control fields (stall 4, yield 1, write barrier 3, read barrier 3, wait mask 6; barrier 7
means none). Kernel-notes round 30 used it to find every ring load of the binary GEMV on one
scoreboard."""
import re
import sys


def annotate(lines, entry):
    start = next((i for i, l in enumerate(lines) if l.startswith('//-') and f'.text.{entry} ' in l + ' '), None)
    if start is None:
        sys.exit(f'no function {entry} in the listing')
    out, i = [], start + 1
    while i < len(lines) and not lines[i].startswith('//-'):
        m = re.match(r'\s+/\*([0-9a-f]+)\*/\s+(.*?)\s*/\* 0x[0-9a-f]{16} \*/', lines[i])
        if m and i + 1 < len(lines):
            hi = int(re.search(r'0x([0-9a-f]{16})', lines[i + 1]).group(1), 16)
            c = hi >> 41
            stall, yld, wb, rb, wait = c & 0xF, (c >> 4) & 1, (c >> 5) & 7, (c >> 8) & 7, (c >> 11) & 0x3F
            mask = ''.join(str(b) for b in range(6) if wait >> b & 1)
            out.append(f"{m.group(1)} S{stall:02d}{'Y' if yld == 0 else ' '} {f'W{wb}' if wb != 7 else '  '} "
                       f"{f'R{rb}' if rb != 7 else '  '} {mask:6} {m.group(2)}")
            i += 2
            continue
        if lines[i].startswith('.L'):
            out.append(lines[i].strip())
        i += 1
    return out


if __name__ == '__main__':
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    print('\n'.join(annotate(open(sys.argv[1]).read().split('\n'), sys.argv[2])))

#!/usr/bin/env python3
"""Makes griddep_wait(); griddep_launch_dependents(); the first statements of every
extern "C" __global__ kernel in the given .cu files (idempotent). See crates/bonsai-kernels/src/launch_ex.rs."""
import re, sys

for path in sys.argv[1:]:
    src = open(path).read()
    out, pos = [], 0
    for m in re.finditer(r'extern "C" __global__', src):
        brace = src.index('{', m.end())
        out.append(src[pos:brace + 1])
        rest = src[brace + 1:]
        first = rest.lstrip().lstrip('\\').lstrip()
        in_macro = src[brace + 1:].split('\n', 1)[0].rstrip().endswith('\\')
        if first.startswith('griddep_wait();'):
            pass
        elif in_macro:
            print(f'{path}: a macro-made kernel lacks griddep_wait(); add it by hand', file=sys.stderr)
        else:
            out.append('\n    griddep_wait();\n    griddep_launch_dependents();')
        pos = brace + 1
    out.append(src[pos:])
    new = ''.join(out)
    if new != src:
        open(path, 'w').write(new)
        print('updated', path)

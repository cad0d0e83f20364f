#!/usr/bin/env bash
# Compile-checks the kernel library exactly as `combined_source()` builds it (scripts/kernel-source.sh:
# every registry.rs source in order), with nvcc for
# sm_80, sm_86, sm_90a (Hopper is compiled arch-specific, for wgmma), sm_100 and sm_120, warnings as errors, printing
# ptxas' per-kernel resource report; a "Potential Performance Loss" (a wgmma pipeline ptxas serialized) fails it too.
# Usage: scripts/compile-kernels.sh   (NVCC=/path/to/nvcc to override)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
nvcc="${NVCC:-/opt/cuda-wheels/nvidia/cu13/bin/nvcc}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
combined="$work/bonsai_kernels.cu"
bash "$root/scripts/kernel-source.sh" > "$combined"
for arch in sm_80 sm_86 sm_90a sm_100 sm_120; do
    echo "== $arch"
    "$nvcc" -cubin -arch="$arch" -O3 -std=c++17 -Werror all-warnings -Xptxas -v \
        -o "$work/$arch.cubin" "$combined" > "$work/$arch.log" 2>&1 || true
    grep -E "error|warning|Compiling entry|registers|spill|Performance Loss" "$work/$arch.log" || true
    test -s "$work/$arch.cubin" || { echo "compile failed for $arch"; exit 1; }
    # ptxas reports serialized wgmma pipelines (C7510-C7515) as info, not as warnings: fail on them
    # too, they cost a wgmma kernel most of its speed.
    if grep -q "Performance Loss" "$work/$arch.log"; then echo "ptxas serialized wgmma for $arch (above)"; exit 1; fi
done
echo "kernel library compiles for sm_80, sm_86, sm_90a, sm_100 and sm_120"

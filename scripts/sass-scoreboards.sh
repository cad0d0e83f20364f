#!/usr/bin/env bash
# The SASS of kernel library entry points for sm_90a with decoded scoreboards, no GPU needed:
# compiles the library (scripts/kernel-source.sh; extra nvcc flags after the names, e.g.
# -DVARIANT), disassembles it with nvdisasm (the pinned nvidia-cuda-nvdisasm wheel, installed into
# .whl/ on first use) and prints each ENTRY through scripts/sass-scoreboards.py.
# Usage: scripts/sass-scoreboards.sh ENTRY[,ENTRY...] [NVCC FLAGS...]   (NVCC=/path/to/nvcc)
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,6p' "$0" >&2; exit 2; }
root="$(cd "$(dirname "$0")/.." && pwd)"
entries="$1"; shift
nvcc="${NVCC:-/opt/cuda-wheels/nvidia/cu13/bin/nvcc}"
nvdisasm="$root/.whl/nvdisasm/nvidia/cu13/bin/nvdisasm"
if [ ! -x "$nvdisasm" ]; then
    python3 -m pip install --quiet --no-deps --target "$root/.whl/nvdisasm" nvidia-cuda-nvdisasm==13.5.37 >&2
    chmod +x "$nvdisasm"
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
bash "$root/scripts/kernel-source.sh" > "$work/k.cu"
"$nvcc" -cubin -arch=sm_90a -O3 -std=c++17 "$@" -o "$work/k.cubin" "$work/k.cu"
"$nvdisasm" -hex -c "$work/k.cubin" > "$work/k.sass"
for e in ${entries//,/ }; do
    echo "== $e"
    python3 "$root/scripts/sass-scoreboards.py" "$work/k.sass" "$e"
done

#!/usr/bin/env bash
# Builds and runs the decode GEMV lab (gemv_lab.cu) on a machine with a GPU and nvcc.
# Usage: bash scripts/lab/run.sh   (NVCC=/path/to/nvcc to override)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
nvcc="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
out="${OUT:-$(mktemp -d)}"
"$nvcc" -O3 -arch=sm_90 -std=c++17 -Xptxas -v -o "$out/gemv_lab" "$here/gemv_lab.cu" 2>&1 \
    | grep -E "error|warning|registers|spill" || true
"$out/gemv_lab"

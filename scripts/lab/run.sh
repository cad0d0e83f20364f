#!/usr/bin/env bash
# Builds and runs the decode GEMV lab (gemv_lab.cu) on a machine with a GPU and nvcc.
# Usage: bash scripts/lab/run.sh [KERNEL_REGEX | --timeline]
#   --timeline: only `gemv_lab timeline` (read floor, gemv_tc per-phase marks, pre-staged x).
#   With a regex, also profiles the matching kernels once each with Nsight Compute (ncu), the
#   full report going to $OUT/ncu.txt (OUT defaults to a temporary folder).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
nvcc="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
out="${OUT:-$(mktemp -d)}"
"$nvcc" -O3 -arch=sm_90 -std=c++17 -Xptxas -v -I "$here" -I "$here/../../crates/bonsai-kernels/src/cuda" -I "$here/../../crates/bonsai-kernels/src/ops/matmul_q1" \
    -o "$out/gemv_lab" "$here/gemv_lab.cu" 2>&1 \
    | grep -E "error|warning|registers|spill" | grep -v "0 bytes spill" || true
if [ "${1:-}" = "--timeline" ]; then
    "$out/gemv_lab" timeline | tee "$out/timeline.txt"
    exit 0
fi
"$out/gemv_lab" | tee "$out/lab.txt" | grep -v "^|"
# Per matrix: the baseline and the 6 fastest variants (full table in $out/lab.txt).
for key in $(grep "^|" "$out/lab.txt" | awk -F'|' '{gsub(/ /,"",$2); gsub(/ /,"",$3); print $2"_"$3}' | sort -u); do
    grep "^|" "$out/lab.txt" | awk -F'|' -v key="$key" '{a=$2; b=$3; gsub(/ /,"",a); gsub(/ /,"",b); if (a"_"b==key) print}' \
        > "$out/shape.txt"
    grep "baseline" "$out/shape.txt"
    grep -v "baseline" "$out/shape.txt" | sort -t'|' -k6 -n | head -6
done
if [ $# -gt 0 ]; then
    ncu="$(command -v ncu || echo /usr/local/cuda/bin/ncu)"
    "$ncu" --clock-control none -k "regex:$1" --section SpeedOfLight --section WarpStateStats \
        --section MemoryWorkloadAnalysis --section Occupancy --section InstructionStats --launch-count 4 \
        "$out/gemv_lab" profile > "$out/ncu.txt" 2>&1 || true
    grep -E "^  [a-z_0-9]+\(|Duration|Memory Throughput|DRAM Throughput|Compute \(SM\)|Achieved Occupancy|Executed Ipc A|Stall|L1/TEX Hit|Warp Cycles Per Issued" "$out/ncu.txt" | head -80
fi

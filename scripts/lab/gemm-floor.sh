#!/usr/bin/env bash
# Lab (not a test): where the time of a batched decode step's small-m GEMMs goes. Runs on the GPU
# machine with .gpu/bonsai carried; writes logs under OUT.
#   1. bench --batch 64 (aggregate tok/s, the step's wall time)
#   2. ncu over one replayed 64-sequence decode graph: every kernel node's duration, so the
#      GEMM kernels' own time is separated from what surrounds them in the graph
#   3. ncu sections on one split wgmma GEMM (qkv shape) to see what bounds it
set -uo pipefail
OUT=${1:?usage: gemm-floor.sh OUT}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.."
BIN=$PWD/.gpu/bonsai
export PATH=/usr/local/cuda/bin:$PATH
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: $NCU"
timeout 120 "$BIN" bench --synthetic bonsai-8b -p 0 -n 32 -r 2 --batch 1,64 >"$OUT/batch.log" 2>&1
tail -n 12 "$OUT/batch.log"
# Skip the first decode steps (capture, warm-up), then every kernel node of a few steps.
timeout 300 "$NCU" --clock-control none --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size \
    --launch-skip 2000 --launch-count 400 --csv --page raw \
    "$BIN" bench --synthetic bonsai-8b -p 0 -n 12 -r 1 --batch 64 >"$OUT/ncu-step.csv" 2>"$OUT/ncu-step.err"
echo "ncu-step rc=$? lines=$(wc -l <"$OUT/ncu-step.csv")"
tail -n 3 "$OUT/ncu-step.err"
timeout 240 "$NCU" --clock-control none --kernel-name regex:'q1_gemm_wgmma_n64_split' --launch-skip 40 --launch-count 1 \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
    --section SchedulerStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
    "$BIN" bench --synthetic bonsai-8b -p 0 -n 8 -r 1 --batch 64 >"$OUT/ncu-gemm.log" 2>&1
echo "ncu-gemm rc=$?"
grep -E "Duration|Throughput|Stall|Warp Cycles|Issued|Active|Occupancy|Grid Size|Registers|Shared Memory" "$OUT/ncu-gemm.log" | head -60

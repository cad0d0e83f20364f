#!/usr/bin/env bash
# ncu of the s8 GEMM against the 256-token f16 tile at one shape (Q2 gate|up 24576 x 4096, m = 512).
set -uo pipefail
OUT=$1
cd "$(dirname "$0")/../.."
mkdir -p .gpu/n && tar xzf .gpu/n/new.tgz -C .gpu/n
N=$PWD/.gpu/n/bonsai
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: $NCU" > $OUT/ncu.log
timeout 400 "$NCU" --clock-control none --kernel-name regex:'gate_up_swiglu_q2_gemm_wgmma_(s8|n256)$' --launch-count 2 \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
    --section SchedulerStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section InstructionStats \
    "$N" kernels verify --bench-only --only bench_gemm >>$OUT/ncu.log 2>&1
echo "rc=$?" >> $OUT/ncu.log

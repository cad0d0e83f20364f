#!/usr/bin/env bash
# Call 1: m = 2 as two one-token GEMVs (branch m2-gemv-per-token rebased on fceff6b, .gpu/t) against
# main fceff6b (.gpu/b): batched steps 1, 2, 4 (1-bit, ternary). Then on main: a traced Bonsai 2 27B
# decode step (where its 3.9 ms go now), a traced x8 step and ncu of its small-m GEMMs (the fixed
# cost per GEMM).
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../../../.."
for x in b:base t:two; do d=${x%%:*}; tar xzf .gpu/$d/${x#*:}.tgz -C .gpu/$d; done
B=$PWD/.gpu/b/bonsai; T=$PWD/.gpu/t/bonsai
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $L/env.log 2>&1; cp $L/env.log $OUT/
r() { local name=$1; shift; echo "== $name: $*" >> $L/summary.log; local t0=$(date +%s); timeout ${LIMIT:-240} "$@" > $L/$name.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $L/summary.log; tail -${TAILN:-3} $L/$name.log >> $L/summary.log; cp $L/summary.log $OUT/; tar czf $OUT/logs.tgz -C $L .; }
for i in 1 2; do
  for b in b:$B t:$T; do TAILN=6 r batch-${b%%:*}-$i ${b#*:} bench --synthetic bonsai-8b -p 0 -n 64 -r 2 --batch 1,2,4; done
done
for b in b:$B t:$T; do TAILN=5 r batcht-${b%%:*} ${b#*:} bench --synthetic ternary-8b -p 0 -n 64 -r 2 --batch 1,2; done
TAILN=1 r trace27 $B --kernel-config trace=kernels bench -v --synthetic bonsai2-27b -p 0 -n 16 -r 1
TAILN=1 r trace8 $B --kernel-config trace=kernels bench -v --synthetic bonsai-8b -p 0 -n 16 -r 1 --batch 8
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
LIMIT=200 TAILN=1 r ncu-small8 timeout 190 "$NCU" --clock-control none --kernel-name regex:'gemm_small|x_to_f16' --launch-skip 400 --launch-count 8 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy \
    $B bench --synthetic bonsai-8b -p 0 -n 8 -r 1 --batch 8

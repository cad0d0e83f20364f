#!/usr/bin/env bash
# Call 2: the fused prefill rotation as a persistent row loop with the
# next row's copy in flight (.gpu/p, branch rotate-f16-persistent 3b4fe46) against the landed one-row-a-CTA form (.gpu/f,
# main) and main before it (.gpu/t, cbed21d): verify of the qwen35 group, the kernel alone, 27B
# pp512 alternating. On an H200, the headline figures (with .gpu/f); ncu's sections on the
# landed kernel's first four launches of a 27B pp512.
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../../../.."
for x in t:base f:fused p:persist; do d=${x%%:*}; tar xzf .gpu/$d/${x#*:}.tgz -C .gpu/$d; done
B=$PWD/.gpu/t/bonsai; F=$PWD/.gpu/f/bonsai; P=$PWD/.gpu/p/bonsai
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $L/env.log 2>&1; cp $L/env.log $OUT/
r() { local name=$1; shift; echo "== $name: $*" >> $L/summary.log; local t0=$(date +%s); timeout ${LIMIT:-240} "$@" > $L/$name.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $L/summary.log; tail -${TAILN:-3} $L/$name.log >> $L/summary.log; cp $L/summary.log $OUT/; tar czf $OUT/logs.tgz -C $L .; }
LIMIT=100 TAILN=2 r verify-p $P kernels verify --shapes all --only qwen35
for b in f:$F p:$P; do LIMIT=60 TAILN=2 r bq-${b%%:*} ${b#*:} kernels verify --bench-only --only bench_qwen35; done
for b in t:$B f:$F p:$P f:$F p:$P; do LIMIT=60 TAILN=3 r pp27-${b%%:*} ${b#*:} bench --synthetic bonsai2-27b -p 512 -n 0 -r 2; done
if grep -q H200 $L/env.log; then
  LIMIT=60 TAILN=2 r verify-f $F kernels verify --shapes all --only qwen35
  LIMIT=100 TAILN=6 r h-27b $F bench --synthetic bonsai2-27b -p 512 -n 128 -r 2 --ctx-depth 0,32768
  LIMIT=50 TAILN=5 r h-8b $F bench --synthetic bonsai-8b -p 512 -n 128 -r 3
  LIMIT=50 TAILN=5 r h-t8b $F bench --synthetic ternary-8b -p 512 -n 128 -r 3
  LIMIT=50 TAILN=6 r h-batch $F bench --synthetic bonsai-8b -p 0 -n 64 -r 2 --batch 1,64
fi
export PATH=/usr/local/cuda/bin:$PATH
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
LIMIT=90 TAILN=3 r ncu-rot "$NCU" --clock-control none --kernel-name regex:'hadamard_rotate_f16_rows_q2' --launch-count 4 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis \
    $F bench --synthetic bonsai2-27b -p 512 -n 0 -r 1

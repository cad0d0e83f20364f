#!/usr/bin/env bash
# Call 2: where the fused prefill rotation's time goes (.gpu/f, 64d027f): a 27B pp512 by kernel
# (ncu, caches as the model leaves them), and ncu's stall and occupancy sections on the fused
# kernel's first four launches of a 27B pp512 (layer 0: the mixer's input, ssm_out's gated
# input, the FFN's input, ffn_down's input).
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../../../.."
tar xzf .gpu/f/fused.tgz -C .gpu/f; F=$PWD/.gpu/f/bonsai; cp $F .gpu/bonsai
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $L/env.log 2>&1; cp $L/env.log $OUT/
r() { local name=$1; shift; echo "== $name: $*" >> $L/summary.log; local t0=$(date +%s); timeout ${LIMIT:-240} "$@" > $L/$name.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $L/summary.log; tail -${TAILN:-3} $L/$name.log >> $L/summary.log; cp $L/summary.log $OUT/; tar czf $OUT/logs.tgz -C $L .; }
NCU_EXTRA="--cache-control none" NCU_TIMEOUT=200 LIMIT=220 TAILN=30 r prof-27b bash scripts/lab/kernel-profile.sh $L prof-27b 2 -- bench --synthetic bonsai2-27b -p 512 -n 0 -r 1
export PATH=/usr/local/cuda/bin:$PATH
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
LIMIT=200 TAILN=3 r ncu-rot "$NCU" --clock-control none --kernel-name regex:'hadamard_rotate_f16_rows_q2' --launch-count 4 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis \
    $F bench --synthetic bonsai2-27b -p 512 -n 0 -r 1

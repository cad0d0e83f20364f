#!/usr/bin/env bash
# Call 2: why the 27B prefill's chunked Gated DeltaNet (16 % of a pp512), its Hadamard transform and
# its conv run below their limits: ncu (full set) of one layer's launches of each, main (.gpu/m).
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../../../.."
tar xzf .gpu/m/main.tgz -C .gpu/m; M=$PWD/.gpu/m/bonsai
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $L/env.log 2>&1; cp $L/env.log $OUT/
r() { local name=$1; shift; echo "== $name: $*" >> $L/summary.log; local t0=$(date +%s); timeout ${LIMIT:-240} "$@" > $L/$name.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $L/summary.log; tail -${TAILN:-3} $L/$name.log >> $L/summary.log; cp $L/summary.log $OUT/; tar czf $OUT/logs.tgz -C $L .; }
export PATH=/usr/local/cuda/bin:$PATH
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
LIMIT=200 TAILN=2 r ncu-delta "$NCU" --clock-control none --cache-control none --set full --kernel-name regex:'gated_delta_chunk|hadamard_blocks_in_warps|ssm_conv_channel' \
    --launch-skip 12 --launch-count 5 --page details $M bench --synthetic bonsai2-27b -p 512 -n 0 -r 1

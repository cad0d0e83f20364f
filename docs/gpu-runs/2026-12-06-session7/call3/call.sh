#!/usr/bin/env bash
# Call 3: the chunked Gated DeltaNet's prepare kernel at two CTAs an SM (column-oriented solve, the
# Gram's lower triangle) (branch delta-prep, not carried: the kernels' times isolate it), and with it the prefill Hadamard transform
# striding resident CTAs with an L2 prefetch of the next unit (.gpu/h, branch hadamard-stream),
# against main (.gpu/m): verify, the kernels alone, 27B pp512 alternating; ncu (full set) of one
# layer's chunked kernels and transform. .gpu/s (branch delta-state) adds the state pass at 16 warps and the
# conv with its rows requested at once.
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../../../.."
for x in m:main h:had s:state; do d=${x%%:*}; tar xzf .gpu/$d/${x#*:}.tgz -C .gpu/$d; done
M=$PWD/.gpu/m/bonsai; H=$PWD/.gpu/h/bonsai; S=$PWD/.gpu/s/bonsai
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $L/env.log 2>&1; cp $L/env.log $OUT/
r() { local name=$1; shift; echo "== $name: $*" >> $L/summary.log; local t0=$(date +%s); timeout ${LIMIT:-240} "$@" > $L/$name.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $L/summary.log; tail -${TAILN:-3} $L/$name.log >> $L/summary.log; cp $L/summary.log $OUT/; tar czf $OUT/logs.tgz -C $L .; }
LIMIT=100 TAILN=2 r verify-s $S kernels verify --shapes all --only qwen35
for b in m:$M h:$H s:$S; do LIMIT=60 TAILN=12 r bq-${b%%:*} ${b#*:} kernels verify --bench-only --only bench_qwen35; done
for i in 1 2; do for b in m:$M h:$H s:$S; do TAILN=3 r pp27-${b%%:*}-$i ${b#*:} bench --synthetic bonsai2-27b -p 512 -n 0 -r 2; done; done
TAILN=4 r check-s $S check --synthetic qwen35-tiny -n 8
export PATH=/usr/local/cuda/bin:$PATH
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
LIMIT=150 TAILN=2 r ncu-s "$NCU" --clock-control none --cache-control none --set full --kernel-name regex:'gated_delta_chunk|hadamard_blocks_in_warps|ssm_conv_channel' \
    --launch-skip 12 --launch-count 4 --page details $S bench --synthetic bonsai2-27b -p 512 -n 0 -r 1

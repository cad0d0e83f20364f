#!/usr/bin/env bash
# Call 1: the fused prefill rotation (.gpu/f: norm + Hadamard transform + f16 pre-pass in one
# launch per row, the mixer's two GEMMs on one set of f16 rows) against main cbed21d (.gpu/t):
# verify of the qwen35 group on every shape and of the matmul group (the f16 launchers now take
# prepared rows), check on qwen35-tiny, the fused kernel alone against the launches it replaces,
# 27B pp512 alternating, Bonsai-8B pp512 (untouched path: launcher refactor only). On an H200,
# the headline figures.
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../../../.."
for x in t:base f:fused; do d=${x%%:*}; tar xzf .gpu/$d/${x#*:}.tgz -C .gpu/$d; done
B=$PWD/.gpu/t/bonsai; F=$PWD/.gpu/f/bonsai
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $L/env.log 2>&1; cp $L/env.log $OUT/
r() { local name=$1; shift; echo "== $name: $*" >> $L/summary.log; local t0=$(date +%s); timeout ${LIMIT:-240} "$@" > $L/$name.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $L/summary.log; tail -${TAILN:-3} $L/$name.log >> $L/summary.log; cp $L/summary.log $OUT/; tar czf $OUT/logs.tgz -C $L .; }
LIMIT=100 TAILN=2 r verify-f $F kernels verify --shapes all --only qwen35
LIMIT=60 TAILN=2 r verify-fm $F kernels verify --shapes small --only matmul,norm_matmul
TAILN=4 r check-f $F check --synthetic qwen35-tiny -n 8
LIMIT=60 TAILN=14 r bq-f $F kernels verify --bench-only --only bench_qwen35
for i in 1 2; do for b in t:$B f:$F; do LIMIT=60 TAILN=3 r pp27-${b%%:*}-$i ${b#*:} bench --synthetic bonsai2-27b -p 512 -n 0 -r 2; done; done
for b in t:$B f:$F; do LIMIT=60 TAILN=3 r pp8-${b%%:*} ${b#*:} bench --synthetic bonsai-8b -p 512 -n 0 -r 3; done
LIMIT=60 TAILN=3 r pp27-f-2048 $F bench --synthetic bonsai2-27b -p 2048 -n 0 -r 1
if grep -q H200 $L/env.log; then
  LIMIT=60 TAILN=4 r h-8b $F bench --synthetic bonsai-8b -p 512 -n 128 -r 3
  LIMIT=60 TAILN=4 r h-t8b $F bench --synthetic ternary-8b -p 512 -n 128 -r 3
  LIMIT=90 TAILN=5 r h-27b $F bench --synthetic bonsai2-27b -p 512 -n 128 -r 2 --ctx-depth 0,32768
  LIMIT=60 TAILN=8 r h-batch $F bench --synthetic bonsai-8b -p 0 -n 64 -r 2 --batch 1,64
fi

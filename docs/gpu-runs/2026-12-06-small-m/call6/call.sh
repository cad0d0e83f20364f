#!/usr/bin/env bash
# The small-m GEMM capped at 32 tokens (.gpu/s, small-m-64 branch head): verify on the device and
# the batched steps 1..64 (1-bit, ternary). CUDAARCHS=90 build.
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../../../.."
tar xzf .gpu/s/s32.tgz -C .gpu/s; S=$PWD/.gpu/s/bonsai
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $L/env.log 2>&1; cp $L/env.log $OUT/
r() { local name=$1; shift; echo "== $name: $*" >> $L/summary.log; local t0=$(date +%s); timeout ${LIMIT:-240} "$@" > $L/$name.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $L/summary.log; tail -${TAILN:-3} $L/$name.log >> $L/summary.log; cp $L/summary.log $OUT/; tar czf $OUT/logs.tgz -C $L .; }
LIMIT=90 TAILN=2 r verify $S kernels verify --shapes small --only matmul,norm_matmul
TAILN=10 r batch $S bench --synthetic bonsai-8b -p 0 -n 64 -r 2 --batch 1,2,8,16,24,32,48,64
TAILN=4 r batcht $S bench --synthetic ternary-8b -p 0 -n 64 -r 2 --batch 24,32

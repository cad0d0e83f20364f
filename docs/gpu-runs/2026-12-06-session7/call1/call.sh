#!/usr/bin/env bash
# Call 1: main (.gpu/m, 7cf1b2b) verify of the batched planes groups (the 8-token `_out` entry
# points at 7 tokens, the batched transforms), the checks, the batch steps; the 27B prefill per
# kernel (ncu, caches as the model leaves them); on an H200, the headline.
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../../../.."
tar xzf .gpu/m/main.tgz -C .gpu/m; M=$PWD/.gpu/m/bonsai
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $L/env.log 2>&1; cp $L/env.log $OUT/
r() { local name=$1; shift; echo "== $name: $*" >> $L/summary.log; local t0=$(date +%s); timeout ${LIMIT:-240} "$@" > $L/$name.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $L/summary.log; tail -${TAILN:-3} $L/$name.log >> $L/summary.log; cp $L/summary.log $OUT/; tar czf $OUT/logs.tgz -C $L .; }
LIMIT=100 TAILN=2 r verify $M kernels verify --shapes small --only planes_out,decode_seqs,qwen35
for g in tiny qwen35-tiny; do TAILN=4 r check-$g $M check --synthetic $g -n 8; done
LIMIT=150 TAILN=30 r bench-qwen35 $M kernels verify --bench-only --only bench_qwen35
TAILN=4 r pp-27b $M bench --synthetic bonsai2-27b -p 512 -n 0 -r 2
cp $M .gpu/bonsai
NCU_EXTRA="--cache-control none" NCU_TIMEOUT=200 LIMIT=220 TAILN=30 r prof-27b bash scripts/lab/kernel-profile.sh $L prof-27b 2 -- bench --synthetic bonsai2-27b -p 512 -n 0 -r 1
TAILN=8 r batch $M bench --synthetic bonsai-8b -p 0 -n 64 -r 2 --batch 1,2,4,7,8
if grep -q H200 $L/env.log; then
  TAILN=4 r pp-8b $M bench --synthetic bonsai-8b -p 512 -n 128 -r 3
  TAILN=4 r pp-t8b $M bench --synthetic ternary-8b -p 512 -n 128 -r 3
  TAILN=4 r tg-27b $M bench --synthetic bonsai2-27b -p 0 -n 128 -r 2
fi

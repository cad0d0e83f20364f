#!/usr/bin/env bash
# Call 1: main (.gpu/f, cf671f1's kernels) against the split-K merge inside the epilogue's
# batches (.gpu/n, 23d3f53) and the split launches as stream-K on top of it (.gpu/s, branch
# stream-k): verify of s (matmul small: the split, tail and stream-K rows; qwen35-tiny check),
# 27B pp512 alternating, Bonsai-8B pp512 (its attn_out and down split at 512 tokens), ncu of s's
# 27B pp512; on an H200 also s's 27B figures.
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../../../.."
for d in f n s; do tar xzf .gpu/$d/$d.tgz -C .gpu/$d; done
F=$PWD/.gpu/f/bonsai; N=$PWD/.gpu/n/bonsai; S=$PWD/.gpu/s/bonsai
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv > $L/env.log 2>&1; cp $L/env.log $OUT/
r() { local name=$1; shift; echo "== $name: $*" >> $L/summary.log; local t0=$(date +%s); timeout ${LIMIT:-240} "$@" > $L/$name.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $L/summary.log; tail -${TAILN:-3} $L/$name.log >> $L/summary.log; cp $L/summary.log $OUT/; tar czf $OUT/logs.tgz -C $L .; }
LIMIT=70 TAILN=2 r verify-s $S kernels verify --shapes small --only matmul
grep -hE "FAIL|wgmma (split|tail|stream)" $L/verify-s.log | head -30 >> $L/summary.log
LIMIT=40 TAILN=3 r check-s $S check --synthetic qwen35-tiny -n 8
for i in 1 2; do for b in f:$F n:$N s:$S; do LIMIT=50 TAILN=2 r pp27-${b%%:*}-$i ${b#*:} bench --synthetic bonsai2-27b -p 512 -n 0 -r 2; done; done
for b in f:$F s:$S; do LIMIT=30 TAILN=3 r pp8-${b%%:*} ${b#*:} bench --synthetic bonsai-8b -p 512 -n 0 -r 3; done
cp $S .gpu/bonsai
NCU_EXTRA="--cache-control none" NCU_TIMEOUT=100 LIMIT=110 TAILN=24 r prof-27b bash scripts/lab/kernel-profile.sh $L prof-27b 2 -- bench --synthetic bonsai2-27b -p 512 -n 0 -r 1
if grep -q H200 $L/env.log; then
  LIMIT=90 TAILN=5 r h27 $S bench --synthetic bonsai2-27b -p 512 -n 128 -r 1 --ctx-depth 0,32768
fi

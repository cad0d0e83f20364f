#!/usr/bin/env bash
# Call 2: main with the pair and the tail launch (.gpu/f, cf671f1): verify of the qwen35
# group (all shapes: the pair rows, bit for bit) and the matmul group (small: the tail row), the
# qwen35-tiny check, the 27B pp512 / pp2048 and a decode step; on an H200 also its 27B figures.
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../../../.."
tar xzf .gpu/f/f.tgz -C .gpu/f; F=$PWD/.gpu/f/bonsai
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv > $L/env.log 2>&1; cp $L/env.log $OUT/
r() { local name=$1; shift; echo "== $name: $*" >> $L/summary.log; local t0=$(date +%s); timeout ${LIMIT:-240} "$@" > $L/$name.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $L/summary.log; tail -${TAILN:-3} $L/$name.log >> $L/summary.log; cp $L/summary.log $OUT/; tar czf $OUT/logs.tgz -C $L .; }
LIMIT=100 TAILN=2 r verify-q $F kernels verify --shapes all --only qwen35
LIMIT=80 TAILN=2 r verify-m $F kernels verify --shapes small --only matmul
grep -hE "FAIL|pair|tail" $L/verify-*.log | head -20 >> $L/summary.log
LIMIT=60 TAILN=4 r check $F check --synthetic qwen35-tiny -n 8
LIMIT=120 TAILN=6 r pp27 $F bench --synthetic bonsai2-27b -p 512 -n 64 -r 2
LIMIT=60 TAILN=4 r pp27-2048 $F bench --synthetic bonsai2-27b -p 2048 -n 0 -r 1
if grep -q H200 $L/env.log; then
  LIMIT=120 TAILN=5 r h27 $F bench --synthetic bonsai2-27b -p 512 -n 128 -r 2 --ctx-depth 0,32768
fi

#!/usr/bin/env bash
# Call 1 (H100: no H200 was lent): the split of only the last partial wave's tiles (.gpu/n, the wgmma GEMM's `_split` entry
# points on a 1-D grid of whole tiles then the tail's K splits) against main 350aeaa (.gpu/h):
# verify of the matmul group on every shape, bench_gemm, 27B pp512 alternating twice, pp2048,
# Bonsai-8B / Ternary-8B pp512 + tg128 (headline), the batched step (its all-split grids moved
# to the 1-D form), 27B tg128 at depth 0 and 32768.
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../../../.."
for x in h:main n:new; do d=${x%%:*}; tar xzf .gpu/$d/${x#*:}.tgz -C .gpu/$d; done
M=$PWD/.gpu/h/bonsai; N=$PWD/.gpu/n/bonsai
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv > $L/env.log 2>&1; cp $L/env.log $OUT/
r() { local name=$1; shift; echo "== $name: $*" >> $L/summary.log; local t0=$(date +%s); timeout ${LIMIT:-240} "$@" > $L/$name.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $L/summary.log; tail -${TAILN:-3} $L/$name.log >> $L/summary.log; cp $L/summary.log $OUT/; tar czf $OUT/logs.tgz -C $L .; }
LIMIT=100 TAILN=2 r verify-n $N kernels verify --shapes all --only matmul
grep -E "FAIL" $L/verify-n.log | head >> $L/summary.log
for i in 1 2; do for b in h:$M n:$N; do LIMIT=60 TAILN=2 r pp27-${b%%:*}-$i ${b#*:} bench --synthetic bonsai2-27b -p 512 -n 0 -r 2; done; done
for b in h:$M n:$N; do LIMIT=60 TAILN=3 r h8b-${b%%:*} ${b#*:} bench --synthetic bonsai-8b -p 512 -n 128 -r 3; done
LIMIT=60 TAILN=3 r pp27-2048-n $N bench --synthetic bonsai2-27b -p 2048 -n 0 -r 1
for b in h:$M n:$N; do LIMIT=60 TAILN=6 r batch-${b%%:*} ${b#*:} bench --synthetic bonsai-8b -p 0 -n 64 -r 2 --batch 1,64; done
LIMIT=60 TAILN=3 r ht8b-n $N bench --synthetic ternary-8b -p 512 -n 128 -r 3
LIMIT=120 TAILN=4 r h27-n $N bench --synthetic bonsai2-27b -p 512 -n 128 -r 2 --ctx-depth 0,32768
for b in h:$M n:$N; do LIMIT=90 TAILN=1 r bgemm-${b%%:*} ${b#*:} kernels verify --bench-only --only bench_gemm; grep -E "N=(10240|34816|5120) .*wgmma" $L/bgemm-${b%%:*}.log >> $L/summary.log; done

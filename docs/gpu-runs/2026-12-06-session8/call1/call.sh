#!/usr/bin/env bash
# Call 1: branch delta-tc (.gpu/t: the chunked delta on the tensor cores) against main (.gpu/m):
# verify of the qwen35 group on every shape, the kernels alone, 27B pp512 alternating. The lab
# binary (.gpu/s, branch lab-rotate-skip: the one-row rotates return at once, and wave-split's K
# split for grids of one wave and part of a second) against main: the 27B decode step (only the
# rotates differ at one token: an upper bound on fusing them away) and pp512 of 27B and 8B (only
# the split differs in a prefill). Main's decode step by kernel; on an H200, the headline.
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../../../.."
for x in m:main t:tc s:skip; do d=${x%%:*}; tar xzf .gpu/$d/${x#*:}.tgz -C .gpu/$d; done
M=$PWD/.gpu/m/bonsai; T=$PWD/.gpu/t/bonsai; S=$PWD/.gpu/s/bonsai
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $L/env.log 2>&1; cp $L/env.log $OUT/
r() { local name=$1; shift; echo "== $name: $*" >> $L/summary.log; local t0=$(date +%s); timeout ${LIMIT:-240} "$@" > $L/$name.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $L/summary.log; tail -${TAILN:-3} $L/$name.log >> $L/summary.log; cp $L/summary.log $OUT/; tar czf $OUT/logs.tgz -C $L .; }
LIMIT=100 TAILN=2 r verify-t $T kernels verify --shapes all --only qwen35
LIMIT=60 TAILN=2 r verify-s $S kernels verify --shapes small --only matmul
TAILN=4 r check-t $T check --synthetic qwen35-tiny -n 8
for b in m:$M t:$T; do LIMIT=60 TAILN=9 r bq-${b%%:*} ${b#*:} kernels verify --bench-only --only bench_qwen35; done
for i in 1 2; do for b in m:$M t:$T s:$S; do LIMIT=60 TAILN=3 r pp27-${b%%:*}-$i ${b#*:} bench --synthetic bonsai2-27b -p 512 -n 0 -r 2; done; done
for b in m:$M s:$S; do LIMIT=60 TAILN=3 r tg27-${b%%:*} ${b#*:} bench --synthetic bonsai2-27b -p 0 -n 64 -r 2; done
for b in m:$M s:$S; do LIMIT=60 TAILN=3 r pp8-${b%%:*} ${b#*:} bench --synthetic bonsai-8b -p 512 -n 0 -r 3; done
LIMIT=60 TAILN=40 r trace27 $M --kernel-config trace=kernels bench -v --synthetic bonsai2-27b -p 0 -n 16 -r 1
if grep -q H200 $L/env.log; then
  LIMIT=60 TAILN=4 r h-8b $M bench --synthetic bonsai-8b -p 512 -n 128 -r 3
  LIMIT=60 TAILN=4 r h-t8b $M bench --synthetic ternary-8b -p 512 -n 128 -r 3
  LIMIT=90 TAILN=5 r h-27b $T bench --synthetic bonsai2-27b -p 512 -n 128 -r 2 --ctx-depth 0,32768
fi

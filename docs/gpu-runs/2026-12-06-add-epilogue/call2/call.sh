#!/usr/bin/env bash
# Call 2: why the 256-token tile, faster alone on the 1-bit Bonsai-8B shapes, made its prefill
# slower: .gpu/w (branch wide-q1-lab: the wide tile for every m >= 256) against main (.gpu/b),
# pp512 alternating, the GEMMs alone (bench_gemm), and every kernel of a pp512 by ncu with the
# caches left as the model leaves them.
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../../../.."
for x in b:base w:wide; do d=${x%%:*}; tar xzf .gpu/$d/${x#*:}.tgz -C .gpu/$d; done
B=$PWD/.gpu/b/bonsai; W=$PWD/.gpu/w/bonsai
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $L/env.log 2>&1; cp $L/env.log $OUT/
r() { local name=$1; shift; echo "== $name: $*" >> $L/summary.log; local t0=$(date +%s); timeout ${T:-240} "$@" > $L/$name.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $L/summary.log; tail -${TAILN:-3} $L/$name.log >> $L/summary.log; cp $L/summary.log $OUT/; tar czf $OUT/logs.tgz -C $L .; }
for i in 1 2; do
  for b in b:$B w:$W; do r pp8-${b%%:*}-$i ${b#*:} bench --synthetic bonsai-8b -p 512 -n 0 -r 3; done
done
TAILN=40 r bench-gemm $B kernels verify --bench-only --only bench_gemm
for b in b:$B w:$W; do
  cp ${b#*:} .gpu/bonsai
  NCU_EXTRA="--cache-control none" NCU_TIMEOUT=200 T=220 TAILN=30 r prof-${b%%:*} bash scripts/lab/kernel-profile.sh $L prof-${b%%:*} 2 -- bench --synthetic bonsai-8b -p 512 -n 0 -r 1
done

#!/usr/bin/env bash
# Call 2: the wgmma tiles' copy diet (.gpu/n: full-tile copies without predicates) and the diet
# plus the B descriptor once per group (.gpu/d) against 9ab9ae4 (.gpu/m): verify of every matmul
# tile (d), 27B / Ternary-8B / Bonsai-8B pp512 alternating, bench_gemm (d).
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../.."
mkdir -p .gpu/n .gpu/m .gpu/d
tar xzf .gpu/n/new.tgz -C .gpu/n && tar xzf .gpu/m/main.tgz -C .gpu/m && tar xzf .gpu/d/desc.tgz -C .gpu/d
N=$PWD/.gpu/n/bonsai; M=$PWD/.gpu/m/bonsai-base; D=$PWD/.gpu/d/bonsai
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $L/env.log 2>&1
r() { local name=$1; shift; echo "== $name: $*" >> $L/summary.log; local t0=$(date +%s); timeout ${T:-240} "$@" > $L/$name.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $L/summary.log; tail -${TAILN:-3} $L/$name.log >> $L/summary.log; cp $L/summary.log $OUT/; tar czf $OUT/logs.tgz -C $L .; }
cp $L/env.log $OUT/
r verify $D kernels verify --shapes small --only matmul
for i in 1 2; do
  r pp27-main-$i $M bench --synthetic bonsai2-27b -p 512 -n 0 -r 2
  r pp27-diet-$i $N bench --synthetic bonsai2-27b -p 512 -n 0 -r 2
  r pp27-desc-$i $D bench --synthetic bonsai2-27b -p 512 -n 0 -r 2
done
for g in ternary-8b bonsai-8b; do
  r pp-$g-main $M bench --synthetic $g -p 512 -n 0 -r 3
  r pp-$g-diet $N bench --synthetic $g -p 512 -n 0 -r 3
  r pp-$g-desc $D bench --synthetic $g -p 512 -n 0 -r 3
done
TAILN=30 r gemm-desc $D kernels verify --bench-only --only bench_gemm

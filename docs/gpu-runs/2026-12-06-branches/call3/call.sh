#!/usr/bin/env bash
# Call 3: the wgmma GEMM asking its first ring groups' weights into L2 before griddepcontrol.wait
# (.gpu/p) against the same tree without it (1be0a97, .gpu/b): verify, the batched step, pp512.
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../../../.."
for x in b:base p:pf; do d=${x%%:*}; tar xzf .gpu/$d/${x#*:}.tgz -C .gpu/$d; done
B=$PWD/.gpu/b/bonsai; P=$PWD/.gpu/p/bonsai
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $L/env.log 2>&1
r() { local name=$1; shift; echo "== $name: $*" >> $L/summary.log; local t0=$(date +%s); timeout ${T:-240} "$@" > $L/$name.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $L/summary.log; tail -${TAILN:-3} $L/$name.log >> $L/summary.log; cp $L/summary.log $OUT/; tar czf $OUT/logs.tgz -C $L .; }
cp $L/env.log $OUT/
T=200 r verify $P kernels verify --shapes small --only matmul,norm_matmul
for i in 1 2; do
  for b in b:$B p:$P; do TAILN=6 r batch-${b%%:*}-$i ${b#*:} bench --synthetic bonsai-8b -p 0 -n 64 -r 2 --batch 1,16,64,128; done
done
for i in 1 2; do
  for b in b:$B p:$P; do r pp8-${b%%:*}-$i ${b#*:} bench --synthetic bonsai-8b -p 512 -n 0 -r 3; done
done
for b in b:$B p:$P; do r ppt8-${b%%:*} ${b#*:} bench --synthetic ternary-8b -p 512 -n 0 -r 3; done
for i in 1 2; do
  for b in b:$B p:$P; do r pp27-${b%%:*}-$i ${b#*:} bench --synthetic bonsai2-27b -p 512 -n 0 -r 2; done
done

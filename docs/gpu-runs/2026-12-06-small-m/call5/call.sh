#!/usr/bin/env bash
# Lab: the small-m GEMM up to 64 tokens (.gpu/s, branch small-m-64) against main's wgmma GEMM
# past 16 tokens (.gpu/f, 39180fe: the small-m GEMM up to 16): batched steps at 16..64, ternary,
# 64 served streams on a warm server, verify on the device. CUDAARCHS=90 builds.
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../../../.."
for x in f:final s:s64; do d=${x%%:*}; tar xzf .gpu/$d/${x#*:}.tgz -C .gpu/$d; done
F=$PWD/.gpu/f/bonsai; S=$PWD/.gpu/s/bonsai
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $L/env.log 2>&1; cp $L/env.log $OUT/
r() { local name=$1; shift; echo "== $name: $*" >> $L/summary.log; local t0=$(date +%s); timeout ${LIMIT:-240} "$@" > $L/$name.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $L/summary.log; tail -${TAILN:-3} $L/$name.log >> $L/summary.log; cp $L/summary.log $OUT/; tar czf $OUT/logs.tgz -C $L .; }
LIMIT=100 TAILN=2 r verify $S kernels verify --shapes small --only matmul,norm_matmul
for b in f:$F s:$S; do TAILN=7 r batch-${b%%:*} ${b#*:} bench --synthetic bonsai-8b -p 0 -n 64 -r 2 --batch 1,16,24,32,48,64; done
for b in f:$F s:$S; do TAILN=4 r batcht-${b%%:*} ${b#*:} bench --synthetic ternary-8b -p 0 -n 64 -r 2 --batch 32,64; done
for b in f:$F s:$S; do
  log=$L/server-${b%%:*}.log
  ${b#*:} serve --synthetic bonsai-8b --port 0 -np 64 --ctx 1024 > $log 2>&1 &
  pid=$!
  for _ in $(seq 600); do grep -q "http://" $log && break; sleep 0.2; done
  url=$(grep -o "http://[0-9.:]*" $log | head -1)
  for n in 16 64; do TAILN=2 r serve$n-${b%%:*} ${b#*:} bench serve --url $url --streams $n -p 512 -n 128 --json; done
  kill $pid; wait $pid 2>/dev/null || true
done

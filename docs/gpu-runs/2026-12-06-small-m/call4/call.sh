#!/usr/bin/env bash
# The final small-m branch (.gpu/f, small-m-gemm 39180fe: the small-m GEMM behind the f16
# pre-pass, gemv_tc_tokens8 removed) against main (.gpu/b, 6a18a8e): verify, batched decode steps
# (1-bit and ternary), 8 / 16 / 64 served streams. CUDAARCHS=90 builds.
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../../../.."
for x in b:base f:final; do d=${x%%:*}; tar xzf .gpu/$d/${x#*:}.tgz -C .gpu/$d; done
B=$PWD/.gpu/b/bonsai; F=$PWD/.gpu/f/bonsai
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $L/env.log 2>&1; cp $L/env.log $OUT/
r() { local name=$1; shift; echo "== $name: $*" >> $L/summary.log; local t0=$(date +%s); timeout ${LIMIT:-240} "$@" > $L/$name.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $L/summary.log; tail -${TAILN:-3} $L/$name.log >> $L/summary.log; cp $L/summary.log $OUT/; tar czf $OUT/logs.tgz -C $L .; }
LIMIT=150 TAILN=2 r verify $F kernels verify --shapes small --only matmul,norm_matmul,decode_seqs,qwen35
for b in b:$B f:$F; do TAILN=9 r batch-${b%%:*} ${b#*:} bench --synthetic bonsai-8b -p 0 -n 64 -r 2 --batch 1,2,4,8,16,32,64; done
for b in b:$B f:$F; do TAILN=6 r batcht-${b%%:*} ${b#*:} bench --synthetic ternary-8b -p 0 -n 64 -r 2 --batch 2,8,16,64; done
for b in b:$B f:$F; do
  log=$L/server-${b%%:*}.log
  ${b#*:} serve --synthetic bonsai-8b --port 0 -np 64 --ctx 1024 > $log 2>&1 &
  pid=$!
  for _ in $(seq 600); do grep -q "http://" $log && break; sleep 0.2; done
  url=$(grep -o "http://[0-9.:]*" $log | head -1)
  for n in 8 16 64; do TAILN=2 r serve$n-${b%%:*} ${b#*:} bench serve --url $url --streams $n -p 512 -n 128 --json; done
  kill $pid; wait $pid 2>/dev/null
done

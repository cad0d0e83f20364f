#!/usr/bin/env bash
# Call 3: the GEMM Add epilogues with the residuals loaded before the stores (.gpu/c, 83bba2f)
# against main before it (c205934, .gpu/b): verify of c, pp512 (Bonsai-8B, Ternary-8B, 27B), the
# batched step, 64 served streams; .gpu/w = c with the 256-token tile for 1-bit GEMMs too
# (branch wide-q1-lab), Bonsai-8B pp512 only.
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../../../.."
for x in b:base c:cand w:wide; do d=${x%%:*}; tar xzf .gpu/$d/${x#*:}.tgz -C .gpu/$d; done
B=$PWD/.gpu/b/bonsai; C=$PWD/.gpu/c/bonsai; W=$PWD/.gpu/w/bonsai
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $L/env.log 2>&1; cp $L/env.log $OUT/
r() { local name=$1; shift; echo "== $name: $*" >> $L/summary.log; local t0=$(date +%s); timeout ${T:-240} "$@" > $L/$name.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $L/summary.log; tail -${TAILN:-3} $L/$name.log >> $L/summary.log; cp $L/summary.log $OUT/; tar czf $OUT/logs.tgz -C $L .; }
for i in 1 2; do
  for b in b:$B c:$C w:$W; do r pp8-${b%%:*}-$i ${b#*:} bench --synthetic bonsai-8b -p 512 -n 0 -r 3; done
done
for i in 1 2; do
  for b in b:$B c:$C; do TAILN=6 r batch-${b%%:*}-$i ${b#*:} bench --synthetic bonsai-8b -p 0 -n 64 -r 2 --batch 1,16,64,128; done
done
for b in b:$B c:$C; do r ppt8-${b%%:*} ${b#*:} bench --synthetic ternary-8b -p 512 -n 0 -r 3; done
for b in b:$B c:$C; do r pp27-${b%%:*} ${b#*:} bench --synthetic bonsai2-27b -p 512 -n 0 -r 2; done
for b in b:$B c:$C; do
  log=$L/server-${b%%:*}.log
  ${b#*:} serve --synthetic bonsai-8b --port 0 -np 64 --ctx 1024 > $log 2>&1 &
  pid=$!
  for _ in $(seq 600); do grep -q "http://" $log && break; sleep 0.2; done
  url=$(grep -o "http://[0-9.:]*" $log | head -1)
  TAILN=12 r serve64-${b%%:*} ${b#*:} bench serve --url $url --streams 64 -p 512 -n 128 --json
  kill $pid; wait $pid 2>/dev/null
done
T=200 r verify $C kernels verify --shapes small --only matmul,norm_matmul

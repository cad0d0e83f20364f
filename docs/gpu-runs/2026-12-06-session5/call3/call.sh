#!/usr/bin/env bash
# Call 3: the multi-token binary GEMV as promoted (.gpu/n: 1-bit up to 6 tokens, ternary up to 8)
# against main fceff6b (.gpu/b): H100 verify of the changed groups, batched steps x7 / x8 (the
# 1-bit limit), 2 / 4 / 8 served streams (one warm server each, the new one first).
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../../../.."
for x in b:base n:new; do d=${x%%:*}; tar xzf .gpu/$d/${x#*:}.tgz -C .gpu/$d; done
B=$PWD/.gpu/b/bonsai; N=$PWD/.gpu/n/bonsai
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $L/env.log 2>&1; cp $L/env.log $OUT/
r() { local name=$1; shift; echo "== $name: $*" >> $L/summary.log; local t0=$(date +%s); timeout ${LIMIT:-240} "$@" > $L/$name.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $L/summary.log; tail -${TAILN:-3} $L/$name.log >> $L/summary.log; cp $L/summary.log $OUT/; tar czf $OUT/logs.tgz -C $L .; }
LIMIT=150 TAILN=2 r verify $N kernels verify --shapes small --only matmul,norm_matmul,decode_seqs
for b in b:$B n:$N; do TAILN=5 r batch-${b%%:*} ${b#*:} bench --synthetic bonsai-8b -p 0 -n 64 -r 2 --batch 6,7,8; done
for b in n:$N b:$B; do
  log=$L/server-${b%%:*}.log
  ${b#*:} serve --synthetic bonsai-8b --port 0 -np 8 --ctx 1024 > $log 2>&1 &
  pid=$!
  for _ in $(seq 600); do grep -q "http://" $log && break; sleep 0.2; done
  url=$(grep -o "http://[0-9.:]*" $log | head -1)
  for n in 2 4 8; do TAILN=2 r serve$n-${b%%:*} ${b#*:} bench serve --url $url --streams $n -p 512 -n 128 --json; done
  kill $pid; wait $pid 2>/dev/null
done

#!/usr/bin/env bash
# Call 4: main with the 256-token tile for 1-bit GEMMs too (a457869, .gpu/m) against the Add
# epilogue change alone (83bba2f, .gpu/c): Bonsai-8B pp512, the batched step, 64 served streams;
# main's batch-64 step traced and its pp512 per kernel (ncu).
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../../../.."
for x in m:main c:cand; do d=${x%%:*}; tar xzf .gpu/$d/${x#*:}.tgz -C .gpu/$d; done
M=$PWD/.gpu/m/bonsai; C=$PWD/.gpu/c/bonsai
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $L/env.log 2>&1; cp $L/env.log $OUT/
r() { local name=$1; shift; echo "== $name: $*" >> $L/summary.log; local t0=$(date +%s); timeout ${T:-240} "$@" > $L/$name.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $L/summary.log; tail -${TAILN:-3} $L/$name.log >> $L/summary.log; cp $L/summary.log $OUT/; tar czf $OUT/logs.tgz -C $L .; }
for i in 1 2; do
  for b in c:$C m:$M; do r pp8-${b%%:*}-$i ${b#*:} bench --synthetic bonsai-8b -p 512 -n 0 -r 3; done
done
for b in c:$C m:$M; do TAILN=6 r batch-${b%%:*} ${b#*:} bench --synthetic bonsai-8b -p 0 -n 64 -r 2 --batch 1,16,64,128; done
for b in c:$C m:$M; do
  log=$L/server-${b%%:*}.log
  ${b#*:} serve --synthetic bonsai-8b --port 0 -np 64 --ctx 1024 > $log 2>&1 &
  pid=$!
  for _ in $(seq 600); do grep -q "http://" $log && break; sleep 0.2; done
  url=$(grep -o "http://[0-9.:]*" $log | head -1)
  TAILN=12 r serve64-${b%%:*} ${b#*:} bench serve --url $url --streams 64 -p 512 -n 128 --json
  kill $pid; wait $pid 2>/dev/null
done
TAILN=20 r batch-trace $M --kernel-config trace=kernels bench -v --synthetic bonsai-8b -p 0 -n 16 -r 1 --batch 64
cp $M .gpu/bonsai
NCU_EXTRA="--cache-control none" NCU_TIMEOUT=200 T=220 TAILN=16 r prof-m bash scripts/lab/kernel-profile.sh $L prof-m 2 -- bench --synthetic bonsai-8b -p 512 -n 0 -r 1

#!/usr/bin/env bash
# Call 5: qk_norm_rope_kv_write with 4 rows a CTA (.gpu/r) against main before it (a457869, .gpu/m):
# verify of the groups that run it, Bonsai-8B pp512 (and per kernel by ncu), 27B pp512 and tg,
# the batched step, 64 served streams.
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../../../.."
for x in m:main r:rope; do d=${x%%:*}; tar xzf .gpu/$d/${x#*:}.tgz -C .gpu/$d; done
M=$PWD/.gpu/m/bonsai; R=$PWD/.gpu/r/bonsai
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $L/env.log 2>&1; cp $L/env.log $OUT/
r() { local name=$1; shift; echo "== $name: $*" >> $L/summary.log; local t0=$(date +%s); timeout ${T:-240} "$@" > $L/$name.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $L/summary.log; tail -${TAILN:-3} $L/$name.log >> $L/summary.log; cp $L/summary.log $OUT/; tar czf $OUT/logs.tgz -C $L .; }
T=120 r verify $R kernels verify --shapes small --only attention,qkv_rope,decode_seqs
for i in 1 2; do
  for b in m:$M r:$R; do r pp8-${b%%:*}-$i ${b#*:} bench --synthetic bonsai-8b -p 512 -n 0 -r 3; done
done
for b in m:$M r:$R; do TAILN=6 r batch-${b%%:*} ${b#*:} bench --synthetic bonsai-8b -p 0 -n 64 -r 2 --batch 1,16,64,128; done
for b in m:$M r:$R; do
  log=$L/server-${b%%:*}.log
  ${b#*:} serve --synthetic bonsai-8b --port 0 -np 64 --ctx 1024 > $log 2>&1 &
  pid=$!
  for _ in $(seq 600); do grep -q "http://" $log && break; sleep 0.2; done
  url=$(grep -o "http://[0-9.:]*" $log | head -1)
  TAILN=12 r serve64-${b%%:*} ${b#*:} bench serve --url $url --streams 64 -p 512 -n 128 --json
  kill $pid; wait $pid 2>/dev/null
done
for b in m:$M r:$R; do r pp27-${b%%:*} ${b#*:} bench --synthetic bonsai2-27b -p 512 -n 0 -r 2; done
for b in m:$M r:$R; do r tg27-${b%%:*} ${b#*:} bench --synthetic bonsai2-27b -p 0 -n 32 -r 2; done
cp $R .gpu/bonsai
NCU_EXTRA="--cache-control none" NCU_TIMEOUT=100 T=120 TAILN=14 r prof-r bash scripts/lab/kernel-profile.sh $L prof-r 2 -- bench --synthetic bonsai-8b -p 512 -n 0 -r 1

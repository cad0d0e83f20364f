#!/usr/bin/env bash
# Call 2: .gpu/s = main + x_to_f16_rows' loads in flight + the RMSNorm in the f16 pre-pass + the
# split-K merge with 4 splits' loads in flight (branch serve-step) against main (13f1124, .gpu/m),
# and .gpu/n (call 1's norm-prepass build: s without the merge change, plus the two qwen35-only
# branches). Verify of s, the batched step, pp512 (8B, 27B), a traced batch-64 step, 64 served
# streams (Bonsai-8B geometry, -b 2048 as the server's default). .gpu/t = s with one group-time of
# merge per extra K split in the split rule (4 in s): the batched step only.
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../../../.."
for x in m:main n:norm s:step t:split; do d=${x%%:*}; tar xzf .gpu/$d/${x#*:}.tgz -C .gpu/$d; done
M=$PWD/.gpu/m/bonsai; N=$PWD/.gpu/n/bonsai; S=$PWD/.gpu/s/bonsai; X=$PWD/.gpu/t/bonsai
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $L/env.log 2>&1
r() { local name=$1; shift; echo "== $name: $*" >> $L/summary.log; local t0=$(date +%s); timeout ${T:-240} "$@" > $L/$name.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $L/summary.log; tail -${TAILN:-3} $L/$name.log >> $L/summary.log; cp $L/summary.log $OUT/; tar czf $OUT/logs.tgz -C $L .; }
cp $L/env.log $OUT/
T=200 r verify $S kernels verify --shapes small --only matmul,norm_matmul
for i in 1 2; do
  for b in m:$M n:$N s:$S t:$X; do TAILN=6 r batch-${b%%:*}-$i ${b#*:} bench --synthetic bonsai-8b -p 0 -n 64 -r 2 --batch 1,16,64,128; done
done
for i in 1 2; do
  for b in m:$M s:$S; do r pp8-${b%%:*}-$i ${b#*:} bench --synthetic bonsai-8b -p 512 -n 0 -r 3; done
done
for i in 1 2; do
  for b in m:$M s:$S; do r pp27-${b%%:*}-$i ${b#*:} bench --synthetic bonsai2-27b -p 512 -n 0 -r 2; done
done
TAILN=12 r batch-trace $S --kernel-config trace=kernels bench -v --synthetic bonsai-8b -p 0 -n 16 -r 1 --batch 64
for b in m:$M s:$S; do
  log=$L/server-${b%%:*}.log
  ${b#*:} serve --synthetic bonsai-8b --port 0 -np 64 --ctx 1024 > $log 2>&1 &
  pid=$!
  for _ in $(seq 600); do grep -q "http://" $log && break; sleep 0.2; done
  url=$(grep -o "http://[0-9.:]*" $log | head -1)
  TAILN=12 r serve64-${b%%:*} ${b#*:} bench serve --url $url --streams 64 -p 512 -n 128 --json
  kill $pid; wait $pid 2>/dev/null
done

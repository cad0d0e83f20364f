#!/usr/bin/env bash
# Call 1: a batched decode step's DeltaNet conv and gated delta through the recurrent-state table
# (one launch per layer for all one-row sequences, .gpu/d) against main's GPU code (.gpu/f,
# 5066a42: main's sm_90a kernels). Verify of the qwen35 group (the table kernels against one
# launch per sequence, all shapes), the tiny model's CPU / GPU check (a batch of 3 with changing
# sets), the 27B batched decode steps, then 16 served 27B streams on a fresh server each.
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../../../.."
for x in f:f d:d; do d=${x%%:*}; tar xzf .gpu/$d/${x#*:}.tgz -C .gpu/$d; done
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv > $L/env.log 2>&1; cp $L/env.log $OUT/
r() { local name=$1; shift; echo "== $name: $*" >> $L/summary.log; local t0=$(date +%s); timeout ${LIMIT:-240} "$@" > $L/$name.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $L/summary.log; tail -${TAILN:-3} $L/$name.log >> $L/summary.log; cp $L/summary.log $OUT/; tar czf $OUT/logs.tgz -C $L .; }
serve() { # serve TAG BIN STREAMS...
  local tag=$1 bin=$2; shift 2; local log=$L/server-$tag.log
  $bin serve --synthetic bonsai2-27b --port 0 -np 16 --ctx 1024 > $log 2>&1 &
  local pid=$!
  for _ in $(seq 600); do grep -q "http://" $log && break; sleep 0.2; done
  local url=$(grep -o "http://[0-9.:]*" $log | head -1)
  for n in "$@"; do LIMIT=120 TAILN=12 r serve$n-$tag $bin bench serve --url $url --streams $n -p 512 -n 128; done
  kill $pid; wait $pid 2>/dev/null
}
LIMIT=240 TAILN=3 r verify-d .gpu/d/bonsai kernels verify --shapes all --only qwen35
grep -E "delta_seqs|FAIL" $L/verify-d.log > $L/verify-d-seqs.log; cp $L/verify-d-seqs.log $OUT/
LIMIT=60 TAILN=4 r check-d .gpu/d/bonsai check --synthetic qwen35-tiny -n 8
for b in f d; do LIMIT=150 TAILN=10 r batch27-$b .gpu/$b/bonsai bench --synthetic bonsai2-27b -p 0 -n 32 -r 1 --batch 1,2,4,8,16; done
for b in d f; do serve $b .gpu/$b/bonsai 16; done

#!/usr/bin/env bash
# Call 2: decode batches past the multi-token GEMV (9.. sequences) planned as the GEMMs' batches
# (each transform with its norm and the f16 pre-pass in one launch, .gpu/b, on top of call 1's
# state table) against main's GPU code (.gpu/f, 5066a42). The tiny model's CPU / GPU check,
# 27B batched decode steps, then 32 served 27B streams on a fresh server per binary.
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../../../.."
for x in f:f b:b; do d=${x%%:*}; tar xzf .gpu/$d/${x#*:}.tgz -C .gpu/$d; done
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv > $L/env.log 2>&1; cp $L/env.log $OUT/
r() { local name=$1; shift; echo "== $name: $*" >> $L/summary.log; local t0=$(date +%s); timeout ${LIMIT:-240} "$@" > $L/$name.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $L/summary.log; tail -${TAILN:-3} $L/$name.log >> $L/summary.log; cp $L/summary.log $OUT/; tar czf $OUT/logs.tgz -C $L .; }
serve() { # serve TAG BIN STREAMS...
  local tag=$1 bin=$2; shift 2; local log=$L/server-$tag.log
  $bin serve --synthetic bonsai2-27b --port 0 -np 32 --ctx 1024 > $log 2>&1 &
  local pid=$!
  for _ in $(seq 600); do grep -q "http://" $log && break; sleep 0.2; done
  local url=$(grep -o "http://[0-9.:]*" $log | head -1)
  for n in "$@"; do LIMIT=120 TAILN=3 r serve$n-$tag $bin bench serve --url $url --streams $n -p 512 -n 128; done
  kill $pid; wait $pid 2>/dev/null; true
}
LIMIT=60 TAILN=4 r check-b .gpu/b/bonsai check --synthetic qwen35-tiny -n 8
for b in f b; do LIMIT=120 TAILN=6 r batch27-$b .gpu/$b/bonsai bench --synthetic bonsai2-27b -p 0 -n 32 -r 1 --batch 8,16,32; done
for b in b f; do serve $b .gpu/$b/bonsai 32; done

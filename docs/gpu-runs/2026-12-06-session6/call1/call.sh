#!/usr/bin/env bash
# Call 1: branch batched-planes-2 (.gpu/p, a2a0ca2: the batched plan's GEMVs on planes of m rows,
# each GEMV's `_out` epilogue writing the next one's; .gpu/q, +the batched attention writing its
# planes) against main ada685a (.gpu/n) and fceff6b (.gpu/b, before the multi-token GEMV): verify
# of the changed groups, batched steps, served streams.
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../../../.."
for x in b:base n:new p:bp q:bq; do d=${x%%:*}; tar xzf .gpu/$d/${x#*:}.tgz -C .gpu/$d; done
B=$PWD/.gpu/b/bonsai; N=$PWD/.gpu/n/bonsai; P=$PWD/.gpu/p/bonsai; Q=$PWD/.gpu/q/bonsai
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $L/env.log 2>&1; cp $L/env.log $OUT/
r() { local name=$1; shift; echo "== $name: $*" >> $L/summary.log; local t0=$(date +%s); timeout ${LIMIT:-240} "$@" > $L/$name.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $L/summary.log; tail -${TAILN:-3} $L/$name.log >> $L/summary.log; cp $L/summary.log $OUT/; tar czf $OUT/logs.tgz -C $L .; }
serve() { # serve TAG BIN GEOMETRY STREAMS...
  local tag=$1 bin=$2 g=$3; shift 3; local log=$L/server-$tag.log
  $bin serve --synthetic $g --port 0 -np 64 --ctx 1024 > $log 2>&1 &
  local pid=$!
  for _ in $(seq 600); do grep -q "http://" $log && break; sleep 0.2; done
  local url=$(grep -o "http://[0-9.:]*" $log | head -1)
  for n in "$@"; do LIMIT=120 TAILN=2 r serve$n-$tag $bin bench serve --url $url --streams $n -p 512 -n 128 --json; done
  kill $pid; wait $pid 2>/dev/null
}
LIMIT=150 TAILN=2 r verify $Q kernels verify --shapes small --only matmul,norm_matmul,decode_seqs,planes_out
for g in tiny qwen35-tiny; do TAILN=4 r check-$g $Q check --synthetic $g -n 8; done
for i in 1 2; do for b in n:$N p:$P q:$Q; do TAILN=9 r batch-${b%%:*}-$i ${b#*:} bench --synthetic bonsai-8b -p 0 -n 64 -r 2 --batch 1,2,3,4,6,8; done; done
TAILN=9 r batch-b $B bench --synthetic bonsai-8b -p 0 -n 64 -r 2 --batch 1,2,4,6
for b in n:$N q:$Q; do TAILN=6 r batcht-${b%%:*} ${b#*:} bench --synthetic ternary-8b -p 0 -n 64 -r 2 --batch 1,2,4,8; done
for b in n:$N q:$Q; do TAILN=5 r batch27-${b%%:*} ${b#*:} bench --synthetic bonsai2-27b -p 0 -n 32 -r 1 --batch 1,2,4; done
LIMIT=150 TAILN=40 r trace4-q $Q --kernel-config trace=kernels bench -v --synthetic bonsai-8b -p 0 -n 16 -r 1 --batch 4
for b in n:$N q:$Q; do serve ${b%%:*} ${b#*:} bonsai-8b 1 2 4 8 64; done

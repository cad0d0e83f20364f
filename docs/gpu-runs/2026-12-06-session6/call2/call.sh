#!/usr/bin/env bash
# Call 2: main 27d7caa (.gpu/q, the batched plan on planes) against (a) the same with the
# multi-token GEMV for up to 8 1-bit tokens (.gpu/r, b1_tokens_default_max One => 8: does 8 now
# beat the small-m GEMM?) and (b) branch batched-rotate (.gpu/u: the transforms of a batched
# qwen35 step writing planes of m rows); on an H200, the headline and served figures of main,
# else a trace of the x4 step.
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../../../.."
for x in q:bq r:q1max8 u:rot; do d=${x%%:*}; tar xzf .gpu/$d/${x#*:}.tgz -C .gpu/$d; done
Q=$PWD/.gpu/q/bonsai; R=$PWD/.gpu/r/bonsai; U=$PWD/.gpu/u/bonsai
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
LIMIT=100 TAILN=2 r verify-u $U kernels verify --shapes small --only qwen35
TAILN=4 r check-u $U check --synthetic qwen35-tiny -n 8
for b in q:$Q u:$U; do TAILN=5 r batch27-${b%%:*} ${b#*:} bench --synthetic bonsai2-27b -p 0 -n 32 -r 1 --batch 1,2,4,8; done
for i in 1; do for b in q:$Q r:$R; do TAILN=6 r batch-${b%%:*}-$i ${b#*:} bench --synthetic bonsai-8b -p 0 -n 64 -r 2 --batch 6,7,8; done; done
if grep -q H200 $L/env.log; then
  TAILN=4 r pp-8b $Q bench --synthetic bonsai-8b -p 512 -n 128 -r 3
  TAILN=4 r pp-t8b $Q bench --synthetic ternary-8b -p 512 -n 128 -r 3
  TAILN=4 r pp-27b $Q bench --synthetic bonsai2-27b -p 512 -n 128 -r 2
  TAILN=12 r batch-q $Q bench --synthetic bonsai-8b -p 0 -n 64 -r 2 --batch 1,2,4,8,16,64,128
  serve q $Q bonsai-8b 1 64 256
  serve qt $Q ternary-8b 64
else
  LIMIT=200 TAILN=60 r trace4-q $Q --kernel-config trace=kernels bench -v --synthetic bonsai-8b -p 0 -n 16 -r 1 --batch 4
fi

#!/usr/bin/env bash
# Call 1: main 5676b8d (.gpu/m) against branch seqs-warps (the batched decode attention with 4
# warps a CTA, two CTAs an SM: .gpu/w4; the same with 2 warps, four an SM, uncommitted: .gpu/w2):
# verify of decode_seqs, the batched step alternating, served 64 streams each. On an H200 (none
# lent since 2026-12-05) also main's headline figures (Bonsai-8B / Ternary-8B pp512 + tg128,
# Bonsai 2 27B at depth 0 and 32768, served 1 / 16 / 64 / 256 streams of Bonsai-8B and 64 of
# Ternary-8B), the qwen35 goldens in three formats (written by
# crates/bonsai-model/tests/golden_qwen35.rs with BONSAI_QWEN35_GOLDEN_GGUF_DIR=.gpu/qwen35) and
# the Qwen3 ones; last, verify on every shape.
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../../../.."
for x in m:main w4:w4 w2:w2; do d=${x%%:*}; tar xzf .gpu/$d/${x#*:}.tgz -C .gpu/$d; done
M=$PWD/.gpu/m/bonsai; W4=$PWD/.gpu/w4/bonsai; W2=$PWD/.gpu/w2/bonsai
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv > $L/env.log 2>&1; cp $L/env.log $OUT/
r() { local name=$1; shift; echo "== $name: $*" >> $L/summary.log; local t0=$(date +%s); timeout ${LIMIT:-240} "$@" > $L/$name.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $L/summary.log; tail -${TAILN:-3} $L/$name.log >> $L/summary.log; cp $L/summary.log $OUT/; tar czf $OUT/logs.tgz -C $L --exclude='*.gguf' .; }
serve() { # serve TAG BIN GEOMETRY STREAMS...
  local tag=$1 bin=$2 g=$3; shift 3; local log=$L/server-$tag.log
  $bin serve --synthetic $g --port 0 -np 64 --ctx 1024 > $log 2>&1 &
  local pid=$!
  for _ in $(seq 600); do grep -q "http://" $log && break; sleep 0.2; done
  local url=$(grep -o "http://[0-9.:]*" $log | head -1)
  for n in "$@"; do LIMIT=90 TAILN=14 r serve$n-$tag $bin bench serve --url $url --streams $n -p 512 -n 128; done
  curl -s $url/metrics > $L/metrics-$tag.txt
  kill $pid; wait $pid 2>/dev/null
}
for b in w4:$W4 w2:$W2; do LIMIT=60 TAILN=2 r verify-${b%%:*} ${b#*:} kernels verify --shapes all --only decode_seqs; done
for i in 1 2; do for b in m:$M w4:$W4 w2:$W2; do LIMIT=60 TAILN=6 r batch-${b%%:*}-$i ${b#*:} bench --synthetic bonsai-8b -p 0 -n 64 -r 2 --batch 1,16,64,128; done; done
if grep -q H200 $L/env.log; then
  LIMIT=60 TAILN=4 r h8b $M bench --synthetic bonsai-8b -p 512 -n 128 -r 3
  LIMIT=60 TAILN=4 r ht8b $M bench --synthetic ternary-8b -p 512 -n 128 -r 3
  LIMIT=120 TAILN=5 r h27 $M bench --synthetic bonsai2-27b -p 512 -n 128 -r 2 --ctx-depth 0,32768
  LIMIT=40 TAILN=4 r d512 $M bench --synthetic bonsai-8b -p 0 -n 128 -r 2 --ctx-depth 512
  serve m $M bonsai-8b 1 16 64 256
  serve w4 $W4 bonsai-8b 64
  serve tm $M ternary-8b 64
  for f in .gpu/qwen35/*.gguf; do LIMIT=40 TAILN=2 r check-$(basename $f .gguf) $M check -m $f -n 32; done
  for x in q1:q1_0 tq2:pq2_0; do
    LIMIT=40 TAILN=1 r convert-${x%%:*} $M convert tests/golden/${x%%:*} -o $L/golden-${x%%:*}.gguf --type ${x#*:}
    LIMIT=40 TAILN=2 r check-${x%%:*} $M check -m $L/golden-${x%%:*}.gguf -n 64
  done
else
  for b in m:$M w4:$W4 w2:$W2; do serve ${b%%:*} ${b#*:} bonsai-8b 64; done
  serve m2 $M bonsai-8b 64
fi
LIMIT=230 TAILN=2 r verify $M kernels verify --shapes all
grep -E "FAIL" $L/verify.log | head >> $L/summary.log; cp $L/summary.log $OUT/

#!/usr/bin/env bash
# Ran on an H100 (no H200 was lent). Call 2: main 5676b8d (.gpu/m) against branch seqs-warps (.gpu/s: the batched decode attention's
# CTAs of 8, 4 or 2 warps, the most that fit one wave of 8 warps an SM): verify of decode_seqs
# (its new 4- and 2-warp batches), the batched step at short contexts (alternating twice) and
# after 512 cached tokens (a served stream's depth); served 64 streams on fresh servers warmed by
# 16 streams; Bonsai 2 27B's batched step (last: the call's limit may cut the tail).
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../../../.."
for x in m:main s:seqs; do d=${x%%:*}; tar xzf .gpu/$d/${x#*:}.tgz -C .gpu/$d; done
M=$PWD/.gpu/m/bonsai; S=$PWD/.gpu/s/bonsai
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv > $L/env.log 2>&1; cp $L/env.log $OUT/
r() { local name=$1; shift; echo "== $name: $*" >> $L/summary.log; local t0=$(date +%s); timeout ${LIMIT:-240} "$@" > $L/$name.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $L/summary.log; tail -${TAILN:-3} $L/$name.log >> $L/summary.log; cp $L/summary.log $OUT/; tar czf $OUT/logs.tgz -C $L --exclude='*.gguf' .; }
serve() { # serve TAG BIN GEOMETRY STREAMS...
  local tag=$1 bin=$2 g=$3; shift 3; local log=$L/server-$tag.log
  $bin serve --synthetic $g --port 0 -np 64 --ctx 1024 > $log 2>&1 &
  local pid=$!
  for _ in $(seq 600); do grep -q "http://" $log && break; sleep 0.2; done
  local url=$(grep -o "http://[0-9.:]*" $log | head -1)
  for n in "$@"; do LIMIT=90 TAILN=3 r serve$n-$tag $bin bench serve --url $url --streams $n -p 512 -n 128; done
  kill $pid; wait $pid 2>/dev/null
}
LIMIT=60 TAILN=2 r verify-s $S kernels verify --shapes all --only decode_seqs
grep -E "FAIL" $L/verify-s.log | head >> $L/summary.log
for i in 1 2; do for b in m:$M s:$S; do LIMIT=60 TAILN=7 r batch-${b%%:*}-$i ${b#*:} bench --synthetic bonsai-8b -p 0 -n 64 -r 2 --batch 1,16,32,64,128; done; done
for i in 1; do for b in m:$M s:$S; do LIMIT=60 TAILN=5 r depth-${b%%:*}-$i ${b#*:} bench --synthetic bonsai-8b -p 0 -n 64 -r 2 --batch 16,64,128 --ctx-depth 512; done; done
for b in m:$M s:$S; do serve ${b%%:*} ${b#*:} bonsai-8b 16 64; done
for b in m:$M s:$S; do LIMIT=60 TAILN=5 r b27-${b%%:*} ${b#*:} bench --synthetic bonsai2-27b -p 0 -n 32 -r 1 --batch 16,64; done
# The tail of verify's last group, cut by call 1's limit.
LIMIT=150 TAILN=2 r verify-image $M kernels verify --shapes all --only image_gemm
grep -E "FAIL" $L/verify-image.log | head >> $L/summary.log; cp $L/summary.log $OUT/

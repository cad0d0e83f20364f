#!/usr/bin/env bash
# Call 1: main 5c8e1ae (.gpu/s) against the wgmma GEMM's issue diet (.gpu/c: layout_word without
# a run-time division, the B descriptor's low word once per group, the 128-token tile's lane-word
# copies stepped by a fixed row stride, the Q2 decode's selector by one high multiply and a raw
# prmt): verify of the PTX wrappers and every group with a quantized matmul, then
# alternating twice Bonsai-8B pp512 / tg128 and the batched step, once Ternary-8B and Bonsai 2
# 27B, the GEMMs alone (`bench_gemm`) and 64 served streams on fresh servers.
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../../../.."
for x in s:seqs c:c; do d=${x%%:*}; tar xzf .gpu/$d/${x#*:}.tgz -C .gpu/$d; done
M=$PWD/.gpu/s/bonsai; C=$PWD/.gpu/c/bonsai
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
LIMIT=200 TAILN=2 r verify-c $C kernels verify --shapes all --only ptx_wrappers,matmul,norm_matmul,qwen35,planes_out,qkv_rope,decode_seqs,small
grep -E "FAIL" $L/verify-c.log | head >> $L/summary.log; cp $L/summary.log $OUT/
for i in 1 2; do for b in s:$M c:$C; do
  LIMIT=60 TAILN=4 r pp8-${b%%:*}-$i ${b#*:} bench --synthetic bonsai-8b -p 512 -n 128 -r 3
  LIMIT=60 TAILN=5 r batch-${b%%:*}-$i ${b#*:} bench --synthetic bonsai-8b -p 0 -n 64 -r 2 --batch 16,64,128
done; done
for b in s:$M c:$C; do
  LIMIT=60 TAILN=4 r t8-${b%%:*} ${b#*:} bench --synthetic ternary-8b -p 512 -n 64 -r 2
  LIMIT=60 TAILN=4 r tb8-${b%%:*} ${b#*:} bench --synthetic ternary-8b -p 0 -n 64 -r 2 --batch 64
  LIMIT=90 TAILN=4 r pp27-${b%%:*} ${b#*:} bench --synthetic bonsai2-27b -p 512 -n 16 -r 2
done
for b in s:$M c:$C; do LIMIT=60 TAILN=12 r gemm-${b%%:*} ${b#*:} kernels verify --bench-only --only bench_gemm; done
for b in s:$M c:$C; do serve ${b%%:*} ${b#*:} bonsai-8b 64; done

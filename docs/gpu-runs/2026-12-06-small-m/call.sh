#!/usr/bin/env bash
# Lab (to run): 2..8 tokens through the wgmma GEMM instead of gemv_tc_tokens8 (.gpu/s, branch
# small-m-wgmma: GEMV_MAX_TOKENS = 1 on the Rust side) against main (.gpu/b): the batched step at
# small batches and 8 / 16 served streams. Build both with CUDAARCHS=90, tar as b/base.tgz and
# s/smallm.tgz. Emulator verify of s: `kernels verify --shapes small --only matmul,norm_matmul`
# 725 checks, 0 failed (m = 2..8 now run every GEMM kernel).
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../../.."
for x in b:base s:smallm; do d=${x%%:*}; tar xzf .gpu/$d/${x#*:}.tgz -C .gpu/$d; done
B=$PWD/.gpu/b/bonsai; S=$PWD/.gpu/s/bonsai
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $L/env.log 2>&1; cp $L/env.log $OUT/
r() { local name=$1; shift; echo "== $name: $*" >> $L/summary.log; local t0=$(date +%s); timeout ${T:-240} "$@" > $L/$name.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $L/summary.log; tail -${TAILN:-3} $L/$name.log >> $L/summary.log; cp $L/summary.log $OUT/; tar czf $OUT/logs.tgz -C $L .; }
for i in 1 2; do
  for b in b:$B s:$S; do TAILN=8 r batch-${b%%:*}-$i ${b#*:} bench --synthetic bonsai-8b -p 0 -n 64 -r 2 --batch 1,2,4,8,16; done
done
for b in b:$B s:$S; do TAILN=8 r batcht-${b%%:*} ${b#*:} bench --synthetic ternary-8b -p 0 -n 64 -r 2 --batch 2,8,16; done
for b in b:$B s:$S; do
  log=$L/server-${b%%:*}.log
  ${b#*:} serve --synthetic bonsai-8b --port 0 -np 16 --ctx 1024 > $log 2>&1 &
  pid=$!
  for _ in $(seq 600); do grep -q "http://" $log && break; sleep 0.2; done
  url=$(grep -o "http://[0-9.:]*" $log | head -1)
  for n in 8 16; do TAILN=2 r serve$n-${b%%:*} ${b#*:} bench serve --url $url --streams $n -p 512 -n 128 --json; done
  kill $pid; wait $pid 2>/dev/null
done
TAILN=16 r trace8 $B --kernel-config trace=kernels bench -v --synthetic bonsai-8b -p 0 -n 16 -r 1 --batch 8
T=200 r verify $S kernels verify --shapes small --only matmul,norm_matmul
TAILN=16 r trace8s $S --kernel-config trace=kernels bench -v --synthetic bonsai-8b -p 0 -n 16 -r 1 --batch 8
TAILN=16 r trace16 $B --kernel-config trace=kernels bench -v --synthetic bonsai-8b -p 0 -n 16 -r 1 --batch 16
TAILN=16 r trace1 $B --kernel-config trace=kernels bench -v --synthetic bonsai-8b -p 0 -n 16 -r 1 --batch 1

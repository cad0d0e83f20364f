#!/usr/bin/env bash
# Call 2: the multi-token binary GEMV (2..8 tokens, `_gemv_b1_t2` / `_t4` / `_t8`; .gpu/n) against main
# fceff6b (.gpu/b, the small-m GEMM at 2..32): batched steps 1..8 alternating (Bonsai-8B,
# Ternary-8B), Bonsai 2 27B x1 / x2 / x4, H100 verify of the matmul groups, a traced x4 step.
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../../../.."
for x in b:base n:new; do d=${x%%:*}; tar xzf .gpu/$d/${x#*:}.tgz -C .gpu/$d; done
B=$PWD/.gpu/b/bonsai; N=$PWD/.gpu/n/bonsai
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $L/env.log 2>&1; cp $L/env.log $OUT/
r() { local name=$1; shift; echo "== $name: $*" >> $L/summary.log; local t0=$(date +%s); timeout ${LIMIT:-240} "$@" > $L/$name.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $L/summary.log; tail -${TAILN:-3} $L/$name.log >> $L/summary.log; cp $L/summary.log $OUT/; tar czf $OUT/logs.tgz -C $L .; }
for i in 1 2; do
  for b in b:$B n:$N; do TAILN=9 r batch-${b%%:*}-$i ${b#*:} bench --synthetic bonsai-8b -p 0 -n 64 -r 2 --batch 1,2,3,4,6,8; done
done
for b in b:$B n:$N; do TAILN=7 r batcht-${b%%:*} ${b#*:} bench --synthetic ternary-8b -p 0 -n 64 -r 2 --batch 1,2,4,8; done
LIMIT=300 TAILN=2 r verify $N kernels verify --shapes small --only matmul,norm_matmul,decode_seqs
for b in b:$B n:$N; do TAILN=6 r batch27-${b%%:*} ${b#*:} bench --synthetic bonsai2-27b -p 0 -n 32 -r 1 --batch 1,2,4; done
TAILN=1 r trace4 $N --kernel-config trace=kernels bench -v --synthetic bonsai-8b -p 0 -n 16 -r 1 --batch 4

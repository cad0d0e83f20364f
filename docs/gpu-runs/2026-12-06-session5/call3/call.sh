#!/usr/bin/env bash
# Call 3: the multi-token binary GEMV as promoted (.gpu/n: 1-bit up to 6 tokens, ternary up to 8)
# against main fceff6b (.gpu/b): H100 verify of the changed groups, batched steps x6 / x7 / x8
# (the 1-bit limit). Little device time was left: the served 2 / 4 / 8 streams wait.
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../../../.."
for x in b:base n:new; do d=${x%%:*}; tar xzf .gpu/$d/${x#*:}.tgz -C .gpu/$d; done
B=$PWD/.gpu/b/bonsai; N=$PWD/.gpu/n/bonsai
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $L/env.log 2>&1; cp $L/env.log $OUT/
r() { local name=$1; shift; echo "== $name: $*" >> $L/summary.log; local t0=$(date +%s); timeout ${LIMIT:-240} "$@" > $L/$name.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $L/summary.log; tail -${TAILN:-3} $L/$name.log >> $L/summary.log; cp $L/summary.log $OUT/; tar czf $OUT/logs.tgz -C $L .; }
LIMIT=150 TAILN=2 r verify $N kernels verify --shapes small --only matmul,norm_matmul,decode_seqs
for b in b:$B n:$N; do TAILN=5 r batch-${b%%:*} ${b#*:} bench --synthetic bonsai-8b -p 0 -n 64 -r 2 --batch 6,7,8; done

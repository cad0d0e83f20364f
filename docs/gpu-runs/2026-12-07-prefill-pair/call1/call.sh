#!/usr/bin/env bash
# Call 1: main 5a57ee0 (.gpu/m) against the prefill's mixer projections as one GEMM launch
# (.gpu/p, branch prefill-pair) and that with the wgmma grids' tails split (.gpu/t, branch
# tail-launch): verify (qwen35 all: the pair rows; matmul small: the tail row), the 27B pp512
# alternating, the prefill by kernel (ncu, caches as the model leaves them); the 27B decode and
# On an H200 also the 27B at depth 0 and 32768.
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../../../.."
for x in m:m p:p t:t; do d=${x%%:*}; tar xzf .gpu/$d/${x#*:}.tgz -C .gpu/$d; done
M=$PWD/.gpu/m/bonsai; P=$PWD/.gpu/p/bonsai; T=$PWD/.gpu/t/bonsai
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv > $L/env.log 2>&1; cp $L/env.log $OUT/
r() { local name=$1; shift; echo "== $name: $*" >> $L/summary.log; local t0=$(date +%s); timeout ${LIMIT:-240} "$@" > $L/$name.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $L/summary.log; tail -${TAILN:-3} $L/$name.log >> $L/summary.log; cp $L/summary.log $OUT/; tar czf $OUT/logs.tgz -C $L .; }
for i in 1 2; do for b in m:$M p:$P t:$T; do LIMIT=60 TAILN=2 r pp27-${b%%:*}-$i ${b#*:} bench --synthetic bonsai2-27b -p 512 -n 0 -r 2; done; done
LIMIT=100 TAILN=2 r verify-t $T kernels verify --shapes all --only qwen35
LIMIT=80 TAILN=2 r verify-tm $T kernels verify --shapes small --only matmul
grep -E "FAIL|pair|tail" $L/verify-t*.log | head -20 >> $L/summary.log
LIMIT=60 TAILN=2 r pp27-2048-t $T bench --synthetic bonsai2-27b -p 2048 -n 0 -r 1
cp $T .gpu/bonsai
NCU_EXTRA="--cache-control none" NCU_TIMEOUT=120 LIMIT=130 TAILN=40 r prof-27b bash scripts/lab/kernel-profile.sh $L prof-27b 2 -- bench --synthetic bonsai2-27b -p 512 -n 0 -r 1
if grep -q H200 $L/env.log; then
  LIMIT=100 TAILN=5 r h27 $T bench --synthetic bonsai2-27b -p 512 -n 128 -r 1 --ctx-depth 0,32768
fi

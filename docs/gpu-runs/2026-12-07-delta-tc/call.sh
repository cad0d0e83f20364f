#!/usr/bin/env bash
# The chunked Gated DeltaNet's state and output passes on the tensor cores (3xTF32 mma.sync, branch delta-tc,
# .gpu/t) against main (.gpu/m): verify of the qwen35 group on every shape, the kernels alone,
# 27B pp512 alternating, ncu of one layer's state and output passes. Build both with scripts/build-gpu-bundle.sh
# (or the release build with BONSAI_NVCC), strip, tar as .gpu/m/main.tgz and .gpu/t/tc.tgz.
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../../.."
for x in m:main t:tc; do d=${x%%:*}; tar xzf .gpu/$d/${x#*:}.tgz -C .gpu/$d; done
M=$PWD/.gpu/m/bonsai; T=$PWD/.gpu/t/bonsai
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $L/env.log 2>&1; cp $L/env.log $OUT/
r() { local name=$1; shift; echo "== $name: $*" >> $L/summary.log; local t0=$(date +%s); timeout ${LIMIT:-240} "$@" > $L/$name.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $L/summary.log; tail -${TAILN:-3} $L/$name.log >> $L/summary.log; cp $L/summary.log $OUT/; tar czf $OUT/logs.tgz -C $L .; }
LIMIT=100 TAILN=2 r verify-t $T kernels verify --shapes all --only qwen35
for b in m:$M t:$T; do LIMIT=60 TAILN=12 r bq-${b%%:*} ${b#*:} kernels verify --bench-only --only bench_qwen35; done
for i in 1 2; do for b in m:$M t:$T; do TAILN=3 r pp27-${b%%:*}-$i ${b#*:} bench --synthetic bonsai2-27b -p 512 -n 0 -r 2; done; done
TAILN=4 r check-t $T check --synthetic qwen35-tiny -n 8
export PATH=/usr/local/cuda/bin:$PATH
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
LIMIT=120 TAILN=2 r ncu-t "$NCU" --clock-control none --cache-control none --set full --kernel-name regex:'gated_delta_chunk_state|gated_delta_chunk_out' \
    --launch-skip 4 --launch-count 2 --page details $T bench --synthetic bonsai2-27b -p 512 -n 0 -r 1

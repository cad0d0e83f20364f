#!/usr/bin/env bash
# Call 3: verify of the merged form (.gpu/f, 5066a42: call 2's c1 without the unused prmt
# wrapper): every group with a wgmma GEMM at the small shapes, the matmul group at all shapes
# (cut by the limit), then its batched step.
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../../../.."
tar xzf .gpu/f/f.tgz -C .gpu/f
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv > $L/env.log 2>&1; cp $L/env.log $OUT/
r() { local name=$1; shift; echo "== $name: $*" >> $L/summary.log; local t0=$(date +%s); timeout ${LIMIT:-240} "$@" > $L/$name.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $L/summary.log; tail -${TAILN:-3} $L/$name.log >> $L/summary.log; cp $L/summary.log $OUT/; tar czf $OUT/logs.tgz -C $L --exclude='*.gguf' .; }
LIMIT=100 TAILN=2 r verify-f .gpu/f/bonsai kernels verify --shapes small --only ptx_wrappers,matmul,norm_matmul
LIMIT=120 TAILN=2 r verify-f-all .gpu/f/bonsai kernels verify --shapes all --only matmul
grep -E "FAIL" $L/verify-f*.log | head >> $L/summary.log; cp $L/summary.log $OUT/
LIMIT=30 TAILN=4 r batch-f .gpu/f/bonsai bench --synthetic bonsai-8b -p 0 -n 64 -r 2 --batch 64,128

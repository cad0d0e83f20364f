#!/usr/bin/env bash
# Call 1: the GEMVs that rotate their own input (branch rotate-in, .gpu/r) against main's GPU
# code (.gpu/f, 5066a42: main's sm_90a kernels; later commits changed the emulator and sm_80
# only). Verify of the new checks (qwen35 group, all shapes), the tiny qwen35 model's CPU / GPU
# check, then 27B decode alternating twice, and one traced replay of the branch.
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../../../.."
for x in f:f r:r; do d=${x%%:*}; tar xzf .gpu/$d/${x#*:}.tgz -C .gpu/$d; done
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv > $L/env.log 2>&1; cp $L/env.log $OUT/
r() { local name=$1; shift; echo "== $name: $*" >> $L/summary.log; local t0=$(date +%s); timeout ${LIMIT:-240} "$@" > $L/$name.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $L/summary.log; tail -${TAILN:-3} $L/$name.log >> $L/summary.log; cp $L/summary.log $OUT/; tar czf $OUT/logs.tgz -C $L .; }
LIMIT=240 TAILN=3 r verify-r .gpu/r/bonsai kernels verify --shapes all --only qwen35
grep -E "gemv_rotated|FAIL" $L/verify-r.log > $L/verify-r-rotated.log; cp $L/verify-r-rotated.log $OUT/
LIMIT=60 TAILN=4 r check-r .gpu/r/bonsai check --synthetic qwen35-tiny -n 8
for i in 1 2; do for b in f r; do
  LIMIT=60 TAILN=4 r tg27-$b-$i .gpu/$b/bonsai bench --synthetic bonsai2-27b -p 0 -n 64 -r 2
done; done
LIMIT=150 TAILN=40 r trace27-r .gpu/r/bonsai --kernel-config trace=kernels bench -v --synthetic bonsai2-27b -p 0 -n 16 -r 1

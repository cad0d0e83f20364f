#!/usr/bin/env bash
# Call 2: where call 1's Bonsai-8B pp512 lost 7 % with the stream-K build: ncu of a Bonsai-8B
# pp512 with main (.gpu/f), the batched merge (.gpu/n) and stream-K (.gpu/s), and of main's 27B
# pp512 (call 1 profiled s's).
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../../../.."
for d in f n s; do tar xzf .gpu/$d/$d.tgz -C .gpu/$d; done
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv > $L/env.log 2>&1; cp $L/env.log $OUT/
r() { local name=$1; shift; echo "== $name: $*" >> $L/summary.log; local t0=$(date +%s); timeout ${LIMIT:-240} "$@" > $L/$name.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $L/summary.log; tail -${TAILN:-3} $L/$name.log >> $L/summary.log; cp $L/summary.log $OUT/; tar czf $OUT/logs.tgz -C $L .; }
for d in f n s; do
  cp .gpu/$d/bonsai .gpu/bonsai
  NCU_EXTRA="--cache-control none" NCU_TIMEOUT=80 LIMIT=90 TAILN=14 r prof-8b-$d bash scripts/lab/kernel-profile.sh $L prof-8b-$d 2 -- bench --synthetic bonsai-8b -p 512 -n 0 -r 1
done
cp .gpu/f/bonsai .gpu/bonsai
NCU_EXTRA="--cache-control none" NCU_TIMEOUT=100 LIMIT=110 TAILN=24 r prof-27b-f bash scripts/lab/kernel-profile.sh $L prof-27b-f 2 -- bench --synthetic bonsai2-27b -p 512 -n 0 -r 1

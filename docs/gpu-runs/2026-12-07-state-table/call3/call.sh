#!/usr/bin/env bash
# Call 3: the f16-rows plan for decode batches past the multi-token GEMV (.gpu/b, f2de21e)
# against the state table alone (.gpu/d, 7ef6752), 27B at 16 and 32 sequences, one call.
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../../../.."
for x in d:d b:b; do d=${x%%:*}; tar xzf .gpu/$d/${x#*:}.tgz -C .gpu/$d; done
r() { local name=$1; shift; echo "== $name: $*" >> $L/summary.log; local t0=$(date +%s); timeout ${LIMIT:-240} "$@" > $L/$name.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $L/summary.log; tail -${TAILN:-3} $L/$name.log >> $L/summary.log; cp $L/summary.log $OUT/; tar czf $OUT/logs.tgz -C $L .; }
for b in d b; do LIMIT=80 TAILN=4 r batch27-$b .gpu/$b/bonsai bench --synthetic bonsai2-27b -p 0 -n 16 -r 1 --batch 16,32; done

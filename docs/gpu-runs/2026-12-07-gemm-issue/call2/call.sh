#!/usr/bin/env bash
# Call 2: which part of call 1's issue diet cost the Q2 prefills (Ternary-8B and 27B pp512 -4 %
# there). main 5c8e1ae (.gpu/s) against c1 (.gpu/c1: call 1's binary c with the Q2
# selector back to byte_perm) and c2 (.gpu/c2: c1 without the strided lane-word copies, i.e.
# layout_word and the descriptor only), alternating twice on the Q2 prefills, once on the
# Bonsai-8B batched step.
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../../../.."
for x in s:seqs c1:c1 c2:c2; do d=${x%%:*}; tar xzf .gpu/$d/${x#*:}.tgz -C .gpu/$d; done
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv > $L/env.log 2>&1; cp $L/env.log $OUT/
r() { local name=$1; shift; echo "== $name: $*" >> $L/summary.log; local t0=$(date +%s); timeout ${LIMIT:-240} "$@" > $L/$name.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $L/summary.log; tail -${TAILN:-3} $L/$name.log >> $L/summary.log; cp $L/summary.log $OUT/; tar czf $OUT/logs.tgz -C $L --exclude='*.gguf' .; }
for i in 1 2; do for b in s c1 c2; do
  LIMIT=60 TAILN=4 r t8-$b-$i .gpu/$b/bonsai bench --synthetic ternary-8b -p 512 -n 0 -r 3
  LIMIT=90 TAILN=4 r pp27-$b-$i .gpu/$b/bonsai bench --synthetic bonsai2-27b -p 512 -n 0 -r 2
done; done
for b in s c1 c2; do LIMIT=60 TAILN=4 r batch-$b .gpu/$b/bonsai bench --synthetic bonsai-8b -p 0 -n 64 -r 2 --batch 64,128; done

#!/usr/bin/env bash
# Call 4: the merged form (.gpu/f, 5066a42) on the verify groups call 3 left out (their layout_word
# and copy code passed in call 1's binary, whose Q2 decode differed).
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../../../.."
tar xzf .gpu/f/f.tgz -C .gpu/f
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv > $L/env.log 2>&1; cp $L/env.log $OUT/
r() { local name=$1; shift; echo "== $name: $*" >> $L/summary.log; local t0=$(date +%s); timeout ${LIMIT:-240} "$@" > $L/$name.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $L/summary.log; tail -${TAILN:-3} $L/$name.log >> $L/summary.log; cp $L/summary.log $OUT/; tar czf $OUT/logs.tgz -C $L --exclude='*.gguf' .; }
LIMIT=140 TAILN=2 r verify-f .gpu/f/bonsai kernels verify --shapes all --only small,decode_seqs,planes_out,qkv_rope,qwen35
grep -E "FAIL" $L/verify-f.log | head >> $L/summary.log; cp $L/summary.log $OUT/

#!/usr/bin/env bash
# Lab (not a test): one device call measuring scripts/lab/merge-stage.patch against main.
# The patch (unmeasured on a GPU; emulator `kernels verify --shapes small --only
# matmul,decode_seqs` 493 checks, 0 failed): the wgmma GEMM's split merge and its Add epilogue
# stage their global loads in the ring's free shared memory with cp.async (one latency a round
# where register batches took one per split and batch; the same sums in the same order), and
# the split GEMMs (wgmma, small-m) count arrivals in counters of the module that each launch
# leaves zero, so no memset goes before a split GEMM (docs/kernel-notes.md, "Prefill GEMMs").
# Before the call, here: build main into .gpu/m and main + the patch into .gpu/d (each
# .gpu/X/X.tgz holding a stripped `bonsai`), then carry .gpu/m and .gpu/d and run
#   bash scripts/lab/merge-stage-ab.sh $OUT
# verify of d, then 27B pp512 m, d; Bonsai-8B pp512 m, d; 27B pp512 d, m; check of d (in that
# order, so a short device budget still gets the A/B).
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../.."
for d in m d; do tar xzf .gpu/$d/$d.tgz -C .gpu/$d; done
M=$PWD/.gpu/m/bonsai; D=$PWD/.gpu/d/bonsai
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv > $L/env.log 2>&1; cp $L/env.log $OUT/
r() { local name=$1; shift; echo "== $name: $*" >> $L/summary.log; local t0=$(date +%s); timeout ${LIMIT:-240} "$@" > $L/$name.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $L/summary.log; tail -${TAILN:-3} $L/$name.log >> $L/summary.log; cp $L/summary.log $OUT/; tar czf $OUT/logs.tgz -C $L .; }
LIMIT=60 TAILN=2 r verify-d $D kernels verify --shapes small --only matmul,decode_seqs
grep -h "FAIL" $L/verify-d.log | head -20 >> $L/summary.log
for b in m:$M d:$D; do LIMIT=50 TAILN=2 r pp27-${b%%:*}-1 ${b#*:} bench --synthetic bonsai2-27b -p 512 -n 0 -r 2; done
for b in m:$M d:$D; do LIMIT=25 TAILN=2 r pp8-${b%%:*} ${b#*:} bench --synthetic bonsai-8b -p 512 -n 0 -r 3; done
for b in d:$D m:$M; do LIMIT=50 TAILN=2 r pp27-${b%%:*}-2 ${b#*:} bench --synthetic bonsai2-27b -p 512 -n 0 -r 2; done
for b in m:$M d:$D; do LIMIT=40 TAILN=3 r x64-${b%%:*} ${b#*:} bench --synthetic bonsai-8b -p 0 -n 32 -r 1 --batch 64; done
LIMIT=25 TAILN=3 r check-d $D check --synthetic qwen35-tiny -n 8

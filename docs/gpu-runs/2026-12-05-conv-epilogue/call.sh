#!/usr/bin/env bash
# Device call: the conv in the GEMV pair's launch (new) against the pair alone (base, 2aa9e35):
# verify, qwen35 goldens, 27B decode A/B, the 27B figures (pp512, tg128, depth 32K), the timeline.
set -u
O=$OUT/l; mkdir -p $O
tar xzf .gpu/m/main.tgz -C /tmp && mv /tmp/bonsai /tmp/bonsai-base
tar xzf .gpu/n/new.tgz -C /tmp && mv /tmp/bonsai /tmp/bonsai-new
M=/tmp/bonsai-base; N=/tmp/bonsai-new
r() { local n=$1; shift; echo "=== $n: $*"; timeout ${T:-150} "$@" > $O/$n.log 2>&1; echo "=== $n rc=$? ${SECONDS}s"; tail -n ${TAILN:-3} $O/$n.log; }
T=200 TAILN=1 r verify $N kernels verify --shapes all --only planes_out,qwen35
grep -iE "fail|skipped" $O/verify.log | grep -v " 0 failed" | head -10
for f in .gpu/qwen35/*.gguf; do T=60 TAILN=2 r check-$(basename $f .gguf) $N check -m $f -n 32; done
for round in 1 2; do
  T=120 TAILN=2 r tg27-base-$round $M bench --synthetic bonsai2-27b -p 0 -n 64 -r 2
  T=120 TAILN=2 r tg27-new-$round $N bench --synthetic bonsai2-27b -p 0 -n 64 -r 2
done
T=200 TAILN=8 r bench27 $N bench --synthetic bonsai2-27b -p 512 -n 128 -r 2 --ctx-depth 0,32768
[ -n "${TRACE:-}" ] && T=240 TAILN=24 r trace27 bash -c "$N --kernel-config trace=kernels bench --synthetic bonsai2-27b -p 0 -n 24 -r 1 2>&1 | grep -A22 'per kernel (release'"
tar czf $OUT/logs.tgz -C $O . && rm -rf $O

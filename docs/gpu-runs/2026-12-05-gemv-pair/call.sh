#!/usr/bin/env bash
# Device call: the GEMV pair + the gated delta's early state load (new) against main (base):
# verify, qwen35 goldens, 27B decode A/B, then the prefill tile pack and the 27B timeline.
set -u
O=$OUT/l; mkdir -p $O
tar xzf .gpu/m/main.tgz -C /tmp && mv /tmp/bonsai /tmp/bonsai-main
tar xzf .gpu/n/new.tgz -C /tmp && mv /tmp/bonsai /tmp/bonsai-new
M=/tmp/bonsai-main; N=/tmp/bonsai-new
r() { local n=$1; shift; echo "=== $n: $*"; timeout ${T:-150} "$@" > $O/$n.log 2>&1; echo "=== $n rc=$? ${SECONDS}s"; tail -n ${TAILN:-3} $O/$n.log; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
T=200 TAILN=1 r verify $N kernels verify --shapes all --only planes_out,qwen35
grep -iE "fail|skipped" $O/verify.log | grep -v " 0 failed" | head -10
for f in .gpu/qwen35/*.gguf; do T=60 TAILN=2 r check-$(basename $f .gguf) $N check -m $f -n 32; done
for round in 1 2; do
  T=120 TAILN=2 r tg27-main-$round $M bench --synthetic bonsai2-27b -p 0 -n 64 -r 2
  T=120 TAILN=2 r tg27-new-$round $N bench --synthetic bonsai2-27b -p 0 -n 64 -r 2
done
T=150 TAILN=22 r trace27 bash -c "$N --kernel-config trace=kernels bench --synthetic bonsai2-27b -p 0 -n 24 -r 1 2>&1 | grep -A20 'per kernel (release'"
for g in bonsai-8b ternary-8b; do
  for v in main:$M new:$N; do
    T=60 TAILN=1 r pp-$g-${v%%:*} ${v#*:} bench --synthetic $g -p 512 -n 128 -r 3
  done
done
T=60 TAILN=1 r pp2048-main $M bench --synthetic bonsai-8b -p 2048 -n 0 -r 2
tar czf $OUT/logs.tgz -C $O . && rm -rf $O

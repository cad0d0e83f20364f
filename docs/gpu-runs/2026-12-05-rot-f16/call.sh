#!/usr/bin/env bash
# The Hadamard transform into the f16 GEMM's input: verify (qwen35 group), qwen35-tiny check with
# a 200-token prompt, 27B pp512 alternating main / new.
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../.."
mkdir -p .gpu/n .gpu/m
tar xzf .gpu/n/new.tgz -C .gpu/n && tar xzf .gpu/m/main.tgz -C .gpu/m
N=$PWD/.gpu/n/bonsai; M=$PWD/.gpu/m/bonsai-base
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $L/env.log 2>&1
r() { local name=$1; shift; echo "== $name: $*" >> $L/summary.log; local t0=$(date +%s); timeout ${T:-240} "$@" > $L/$name.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $L/summary.log; tail -4 $L/$name.log >> $L/summary.log; tar czf $OUT/logs.tgz -C $L .; }
IDS=$(python3 -c "import random; random.seed(3); print(','.join(str(random.randrange(1,500)) for _ in range(200)))")
r verify $N kernels verify --shapes small --only qwen35
r check $N check --synthetic qwen35-tiny -n 16 --prompt-tokens $IDS
for i in 1 2; do
  r pp-main-$i $M bench --synthetic bonsai2-27b -p 512 -n 16 -r 1
  r pp-new-$i $N bench --synthetic bonsai2-27b -p 512 -n 16 -r 1
done
r pp2048-main $M bench --synthetic bonsai2-27b -p 2048 -n 16 -r 1
r pp2048-new $N bench --synthetic bonsai2-27b -p 2048 -n 16 -r 1
cp $L/summary.log $OUT/

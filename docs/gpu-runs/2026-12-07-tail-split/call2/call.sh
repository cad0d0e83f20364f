#!/usr/bin/env bash
# Call 2 (H100, the machine of call 1): Bonsai-8B pp512 alternating main (.gpu/h) and the tail
# split (.gpu/n) three times (call 1 had them 30,808.5 / 31,275.0 once each; of the 8B prefill's
# split grids only the order changed).
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../../../.."
for x in h:main n:new; do d=${x%%:*}; tar xzf .gpu/$d/${x#*:}.tgz -C .gpu/$d; done
M=$PWD/.gpu/h/bonsai; N=$PWD/.gpu/n/bonsai
nvidia-smi --query-gpu=name --format=csv > $L/env.log 2>&1
for i in 1 2 3; do for b in h:$M n:$N; do echo "$i ${b%%:*} $(${b#*:} bench --synthetic bonsai-8b -p 512 -n 0 -r 3 2>&1 | grep '| pp512')" >> $L/summary.log; done; done
cp $L/* $OUT/

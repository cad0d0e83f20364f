#!/usr/bin/env bash
# Call 1: against main (13f1124, .gpu/m): .gpu/c = main + decode-ab-in-delta + prefill-prepasses;
# .gpu/w = c + the 256-token tile for 1-bit GEMMs; .gpu/n = c + the RMSNorm in the f16 GEMMs'
# pre-pass (norm-prepass). 27B tg64 / pp512 (m, c), 8B pp512 (m, c, w, n), the batched step (m, c,
# n), verify of the changed groups, ncu of the batch-64 step's GEMMs, a traced batch-64 step.
set -uo pipefail
OUT=$1; L=$(mktemp -d)
cd "$(dirname "$0")/../../../.."
for x in m:main c:cand w:wide n:norm; do d=${x%%:*}; tar xzf .gpu/$d/${x#*:}.tgz -C .gpu/$d; done
M=$PWD/.gpu/m/bonsai; C=$PWD/.gpu/c/bonsai; W=$PWD/.gpu/w/bonsai; N=$PWD/.gpu/n/bonsai
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $L/env.log 2>&1
r() { local name=$1; shift; echo "== $name: $*" >> $L/summary.log; local t0=$(date +%s); timeout ${T:-240} "$@" > $L/$name.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $L/summary.log; tail -${TAILN:-3} $L/$name.log >> $L/summary.log; cp $L/summary.log $OUT/; tar czf $OUT/logs.tgz -C $L .; }
cp $L/env.log $OUT/
for i in 1 2; do
  r tg27-main-$i $M bench --synthetic bonsai2-27b -p 0 -n 64 -r 2
  r tg27-cand-$i $C bench --synthetic bonsai2-27b -p 0 -n 64 -r 2
done
for i in 1 2; do
  r pp27-main-$i $M bench --synthetic bonsai2-27b -p 512 -n 0 -r 2
  r pp27-cand-$i $C bench --synthetic bonsai2-27b -p 512 -n 0 -r 2
done
for i in 1 2; do
  for b in m:$M c:$C w:$W n:$N; do r pp8-${b%%:*}-$i ${b#*:} bench --synthetic bonsai-8b -p 512 -n 0 -r 3; done
done
for b in m:$M c:$C n:$N; do r batch-${b%%:*} ${b#*:} bench --synthetic bonsai-8b -p 0 -n 64 -r 2 --batch 1,64; done
T=300 r verify $N kernels verify --shapes small --only qwen35,matmul,norm_matmul
TAILN=1 r batch-trace $N --kernel-config trace=kernels bench -v --synthetic bonsai-8b -p 0 -n 32 -r 1 --batch 64
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
T=150 TAILN=1 r ncu-batch timeout 140 "$NCU" --clock-control none --kernel-name regex:'gemm_wgmma' --launch-skip 300 --launch-count 4 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section LaunchStats \
    --metrics regex:'smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio',regex:'lts__t_bytes.sum.per_second',l1tex__m_xbar2l1tex_read_bytes.sum.per_second \
    $N bench --synthetic bonsai-8b -p 0 -n 8 -r 1 --batch 64

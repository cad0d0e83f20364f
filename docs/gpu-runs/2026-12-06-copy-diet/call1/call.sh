#!/usr/bin/env bash
# Call 1: partial-wave K splits (ba8d876) against main on 27B pp512, alternating; main's 27B prefill
# per kernel (ncu) and decode step (trace).
set -uo pipefail
OUT=$1; L=$OUT/l; mkdir -p $L
cd "$(dirname "$0")/../.."
mkdir -p .gpu/n .gpu/m
tar xzf .gpu/n/new.tgz -C .gpu/n && tar xzf .gpu/m/main.tgz -C .gpu/m
N=$PWD/.gpu/n/bonsai-base; M=$PWD/.gpu/m/bonsai
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $L/env.log 2>&1
r() { local name=$1; shift; echo "== $name: $*" >> $L/summary.log; local t0=$(date +%s); timeout ${T:-240} "$@" > $L/$name.log 2>&1; echo "rc=$? $(( $(date +%s)-t0 ))s" >> $L/summary.log; tail -${TAILN:-3} $L/$name.log >> $L/summary.log; }
for i in 1 2; do
  r pp-main-$i $M bench --synthetic bonsai2-27b -p 512 -n 0 -r 2
  r pp-pws-$i $N bench --synthetic bonsai2-27b -p 512 -n 0 -r 2
done
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
timeout 200 "$NCU" --clock-control none --kernel-name regex:'gate_up_swiglu_q2_gemm_wgmma_n256$' --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
    --metrics regex:'smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio',regex:'lts__t_bytes.sum.per_second',l1tex__m_xbar2l1tex_read_bytes.sum.per_second \
    $M kernels verify --bench-only --only bench_gemm > $L/ncu-stalls.log 2>&1
echo "ncu-stalls rc=$?" >> $L/summary.log
T=150 r trace27b $M --kernel-config trace=kernels bench --synthetic bonsai2-27b -p 0 -n 24 -r 1
cp $M .gpu/bonsai
NCU_TIMEOUT=200 T=220 TAILN=40 r prof-pp512 bash scripts/lab/kernel-profile.sh $L prof 2 -- bench --synthetic bonsai2-27b -p 512 -n 0 -r 1
cp $L/summary.log $OUT/

#!/usr/bin/env bash
# Lab (not a test): how CPU decode and prefill scale with threads, bonsai against llama.cpp, on
# one machine (the GPU machine's 16 cores: carry .gpu/bonsai and .cache/llama-cpu/bin).
#   bash scripts/lab/cpu-scaling.sh OUT [MODEL]     MODEL: a synthetic name (default bonsai-1.7b)
set -uo pipefail
OUT=${1:?usage: cpu-scaling.sh OUT [MODEL]}; MODEL=${2:-bonsai-1.7b}
cd "$(dirname "$0")/../.."
B=${BONSAI:-.gpu/bonsai}; L=${LLAMA_BENCH:-.cache/llama-cpu/bin/llama-bench}
export LD_LIBRARY_PATH=$(dirname "$L")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p "$OUT"
{ lscpu; echo; grep -m1 '^flags' /proc/cpuinfo; cat /sys/fs/cgroup/cpu.max 2>/dev/null; } >"$OUT/lscpu.txt"
grep -E "^(Model name|CPU\(s\)|Thread|Core|Socket|NUMA node|L2|L3)" "$OUT/lscpu.txt"
F=/tmp/$MODEL.gguf
[ -f "$F" ] || "$B" bench --synthetic "$MODEL" --write-gguf "$F" 2>&1 | tail -1
for t in ${THREAD_LIST:-1 2 4 8 12 16}; do
    b=$(RAYON_NUM_THREADS=$t timeout 120 "$B" bench --cpu -m "$F" -p ${PP:-64} -n 32 -r 2 --json 2>/dev/null |
        python3 -c 'import json,sys; v=json.load(sys.stdin); print(" ".join(f"{r["test"]}={r["tok_per_s_median"]:.1f}" for r in v["results"]))')
    l=$(timeout 120 "$L" -m "$F" -t $t -p ${PP:-64} -n 32 -r 2 -o json 2>/dev/null |
        python3 -c 'import json,sys; print(" ".join(f"{("pp%d"%t["n_prompt"]) if t["n_gen"]==0 else ("tg%d"%t["n_gen"])}={t["avg_ts"]:.1f}" for t in json.load(sys.stdin)))')
    echo "threads $t | bonsai $b | llama.cpp $l"
done | tee "$OUT/scaling.txt"

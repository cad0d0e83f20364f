#!/usr/bin/env bash
# Lab: bonsai CPU builds against each other and against llama.cpp on this machine's CPU (the GPU
# machine's 16 cores, reached through the device tool, where nothing is built).
#
#   bash scripts/lab/cpu-ab.sh OUT BUNDLE.tgz
#
# BUNDLE holds bonsai-* (the builds to compare; bonsai-head first by name is the baseline),
# optionally kernels-tests (a `cargo test --no-run` binary of bonsai-kernels, run on the CPU
# matmul tests first: this machine has AVX-512, the developers' may not), and llama-bench,
# llama-peer-check, libgomp.so.1 from scripts/build-llama-cpu.sh.
# Settings: THREADS (default nproc), REPS (alternations, default 2), SIDE (builds to run
# scripts/cpu-vs-llama.sh with; default all), CHECK (the build whose output cpu-vs-llama checks
# against llama.cpp's; default none).
set -uo pipefail
OUT=$1
B=$(mktemp -d)
tar xzf "$2" -C "$B"
THREADS=${THREADS:-$(nproc)}
REPS=${REPS:-2}
M=/tmp/cpu-ab-models
mkdir -p "$OUT" "$M"
lscpu > "$OUT/lscpu.txt"
export LD_LIBRARY_PATH=$B RAYON_NUM_THREADS=$THREADS
builds=$(cd "$B" && ls bonsai-* | sort)
SIDE=${SIDE:-$builds}
if [ -x "$B/kernels-tests" ]; then
    timeout 600 "$B/kernels-tests" matmul_q1 gate_up_swiglu_q1 panel_gemm q1_lut embed_rows weights > "$OUT/kernels-tests.log" 2>&1
    echo "kernels-tests rc $?: $(grep 'test result' "$OUT/kernels-tests.log")"
fi
first=$(echo "$builds" | head -1)
for g in tiny bonsai-1.7b; do
    [ -f "$M/$g.gguf" ] || "$B/$first" bench --synthetic "$g" --write-gguf "$M/$g.gguf" > /dev/null
done
# The builds alone, alternating.
for rep in $(seq "$REPS"); do
    for b in $builds; do
        for args in "-p 64 -n 32" "-p 512 -n 128"; do
            # shellcheck disable=SC2086
            line=$(timeout 300 "$B/$b" bench --cpu -m "$M/bonsai-1.7b.gguf" $args -r 1 2>&1 | grep -E '^\| (pp|tg)' | awk -F'|' '{gsub(/ /,"",$2); gsub(/ /,"",$3); printf "%s %s  ", $2, $3}')
            echo "rep $rep $b: $line" | tee -a "$OUT/ab.log"
        done
    done
done
for b in $SIDE; do
    skip=1
    [ "${CHECK:-}" = "$b" ] && skip=0
    BONSAI=$B/$b LLAMA_BENCH=$B/llama-bench MODEL_DIR=$M THREADS=$THREADS REPS=$REPS MODELS=bonsai-1.7b \
        SKIP_CHECK=$skip timeout 900 bash scripts/cpu-vs-llama.sh "$OUT/side-$b" > "$OUT/side-$b.log" 2>&1
    echo "side by side, $b (rc $?):"
    cat "$OUT/side-$b/table.md" 2>/dev/null || tail -5 "$OUT/side-$b.log"
done

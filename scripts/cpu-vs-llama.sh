#!/usr/bin/env bash
# bonsai's CPU path against upstream llama.cpp, side by side on this machine: the same GGUF
# files, the same thread count, alternating runs. Not a CI test (it takes minutes).
#
#   bash scripts/cpu-vs-llama.sh [OUT_DIR]        # default OUT_DIR: .cache/cpu-vs-llama
#
# Binaries (pre-built ones can be carried to a machine without Rust or network):
#   BONSAI        bonsai binary                  (default target/release/bonsai)
#   LLAMA_BENCH   llama-bench                    (default .cache/llama-cpu/bin/llama-bench,
#                                                 from scripts/build-llama-cpu.sh)
#   LLAMA_CHECK   llama-peer-check               (default: next to LLAMA_BENCH)
# Settings: THREADS (default: nproc), MODELS (default "bonsai-1.7b ternary-1.7b bonsai-8b"),
#   REPS (alternations, default 3; medians reported), SKIP_CHECK=1 / SKIP_BENCH=1, MODEL_DIR (where
#   the GGUF files are written and reused; default OUT_DIR).
#
# 1. Writes the models with `bonsai bench --synthetic G --write-gguf FILE` (random weights at the
#    real geometry; Q1_0, ternary as upstream Q2_0 with 64-weight groups; both engines load them).
# 2. Check: the tiny model and the first model of MODELS, on both engines: perplexity over text
#    from README.md in windows (bonsai's definition, every next token of a window scored) and 32
#    greedy tokens. llama.cpp quantizes activations to 8 bits (Q8_0) where bonsai keeps f32, so
#    perplexity agrees to a fraction of a percent, not exactly, and a greedy run may leave a
#    near-tie the other way; the script prints both and the first differing token.
# 3. Bench: per model and repetition, llama-bench (-p 64,512 -n 32,128 -r 1, after its warm-up)
#    then `bonsai bench --cpu` (-p 64 -n 32, then -p 512 -n 128, -r 1 after one warm-up), with
#    RAYON_NUM_THREADS=THREADS and -t THREADS. Prints a markdown table of medians.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT/.cache/cpu-vs-llama}
BONSAI=${BONSAI:-$ROOT/target/release/bonsai}
LLAMA_BENCH=${LLAMA_BENCH:-$ROOT/.cache/llama-cpu/bin/llama-bench}
LLAMA_CHECK=${LLAMA_CHECK:-$(dirname "$LLAMA_BENCH")/llama-peer-check}
THREADS=${THREADS:-$(nproc)}
MODELS=${MODELS:-bonsai-1.7b ternary-1.7b bonsai-8b}
REPS=${REPS:-3}
MODEL_DIR=${MODEL_DIR:-$OUT}
mkdir -p "$OUT" "$MODEL_DIR"
for bin in "$BONSAI" "$LLAMA_BENCH"; do
    [ -x "$bin" ] || { echo "missing binary: $bin (see the header of $0)" >&2; exit 1; }
done
# The OpenMP runtime build-llama-cpu.sh copied next to the binaries.
export LD_LIBRARY_PATH=$(dirname "$LLAMA_BENCH")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export RAYON_NUM_THREADS=$THREADS

{
    echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cpus online, threads used: $THREADS"
    echo "cpu flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|avx512f|avx512bw|avx512_vnni|avx512vnni|avx_vnni)$' | tr '\n' ' ')"
    echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "bonsai: $BONSAI ($("$BONSAI" --version 2>/dev/null || echo '?'))"
    echo "llama-bench: $LLAMA_BENCH ($("$LLAMA_BENCH" --version 2>&1 | head -1))"
} | tee "$OUT/machine.txt"

model_file() { echo "$MODEL_DIR/$1.gguf"; }
write_model() {
    local f
    f=$(model_file "$1")
    [ -f "$f" ] || "$BONSAI" bench --synthetic "$1" --write-gguf "$f"
}
write_model tiny
for m in $MODELS; do write_model "$m"; done

# --- 2. the same computation ---------------------------------------------------------------
check_one() {
    BONSAI=$BONSAI LLAMA_CHECK=$LLAMA_CHECK THREADS=$THREADS bash "$ROOT/scripts/llama-peer/check-one.sh" \
        "$(model_file "$1")" "$2" "$3" "$OUT" "$1"
}
if [ "${SKIP_CHECK:-0}" != 1 ]; then
    [ -x "$LLAMA_CHECK" ] || { echo "missing $LLAMA_CHECK (SKIP_CHECK=1 to skip the check)" >&2; exit 1; }
    { check_one tiny 128 4000; check_one "${MODELS%% *}" 64 600; } | tee "$OUT/check.txt"
fi

# --- 3. speed -------------------------------------------------------------------------------
[ "${SKIP_BENCH:-0}" = 1 ] && exit 0
results=$OUT/results.tsv
: >"$results"
for m in $MODELS; do
    f=$(model_file "$m")
    for rep in $(seq "$REPS"); do
        echo "== $m, repetition $rep of $REPS: llama-bench, then bonsai ($THREADS threads)"
        "$LLAMA_BENCH" -m "$f" -t "$THREADS" -p 64,512 -n 32,128 -r 1 -o json >"$OUT/llama-$m-$rep.json" 2>"$OUT/llama-$m-$rep.log"
        "$BONSAI" bench --cpu -m "$f" -p 64 -n 32 -r 1 --json >"$OUT/bonsai-$m-$rep-a.json" 2>"$OUT/bonsai-$m-$rep-a.log"
        "$BONSAI" bench --cpu -m "$f" -p 512 -n 128 -r 1 --json >"$OUT/bonsai-$m-$rep-b.json" 2>"$OUT/bonsai-$m-$rep-b.log"
        python3 - "$m" "$OUT/llama-$m-$rep.json" "$OUT/bonsai-$m-$rep-a.json" "$OUT/bonsai-$m-$rep-b.json" >>"$results" <<'EOF'
import json, sys
model = sys.argv[1]
for t in json.load(open(sys.argv[2])):
    test = f"pp{t['n_prompt']}" if t["n_gen"] == 0 else f"tg{t['n_gen']}"
    print(f"{model}\t{test}\tllama\t{t['avg_ts']}\t")
for path in sys.argv[3:]:
    v = json.load(open(path))
    for r in v["results"]:
        pct = r.get("percent_of_bandwidth_limit")
        print(f"{model}\t{r['test']}\tbonsai\t{r['tok_per_s_median']}\t{'' if pct is None else pct}")
    print(f"{model}\tbandwidth\tbonsai\t{v['bandwidth_bytes_per_s']}\t{v['bandwidth_method']}")
EOF
    done
done

python3 - "$results" "$THREADS" <<'EOF' | tee "$OUT/table.md"
import statistics, sys
from collections import defaultdict
rates, pct, bw, method = defaultdict(list), defaultdict(list), defaultdict(list), {}
for line in open(sys.argv[1]):
    model, test, engine, value, extra = line.rstrip("\n").split("\t")
    if test == "bandwidth":
        bw[model].append(float(value)); method[model] = extra
        continue
    rates[(model, test, engine)].append(float(value))
    if extra:
        pct[(model, test)].append(float(extra))
models = list(dict.fromkeys(k[0] for k in rates))
print(f"| model | test | llama.cpp tok/s | bonsai tok/s | bonsai / llama.cpp | bonsai % of limit |")
print("|---|---|---|---|---|---|")
for model in models:
    for test in ["pp64", "pp512", "tg32", "tg128"]:
        l, b = rates.get((model, test, "llama")), rates.get((model, test, "bonsai"))
        if not l or not b:
            continue
        lm, bm = statistics.median(l), statistics.median(b)
        p = f"{statistics.median(pct[(model, test)]):.1f} %" if pct.get((model, test)) else ""
        print(f"| {model} | {test} | {lm:.1f} | {bm:.1f} | {bm / lm:.2f}x | {p} |")
runs = max(len(v) for v in rates.values())
print(f"\n{sys.argv[2]} threads each; medians of {runs} alternating runs.")
for model in models:
    if bw.get(model):
        print(f"{model}: limit from {method[model]}: {statistics.median(bw[model]) / 1e9:.1f} GB/s")
EOF

#!/usr/bin/env bash
# Files bonsai writes, read by llama.cpp (issue: "files that llama.cpp reads"). Not a CI test.
#
#   bash scripts/interop-llama.sh [OUT_DIR]        # default OUT_DIR: .cache/interop-llama
#
# Writes GGUF files from the golden tiny Qwen3 checkpoints (tests/golden/{q1,tq2}) with
# `bonsai convert --type T` and re-packs them with `bonsai quantize --type T`, and a random-weight
# qwen35 (the Bonsai 2 architecture, unfolded: `bench --synthetic qwen35-tiny --write-gguf`), then
# runs each file that upstream llama.cpp reads (Q1_0 id 41, Q2_0 with 64-weight groups id 42) on
# both engines: 32 greedy tokens and perplexity (scripts/llama-peer/check-one.sh). llama.cpp
# quantizes the activations of those matmuls to 8 bits, so the exact checks give it the same
# weights decoded to F32 (`bonsai quantize --type f32`) against bonsai on the low-bit file. PQ2_0 (142) and PTQ1_0 (143)
# are PrismML-fork types that no llama.cpp on a package registry reads: for those the script
# checks that bonsai reads each back to the same greedy tokens as the Q2_0 file of the same weights.
# Binaries: BONSAI (default target/release/bonsai), LLAMA_CHECK (default
# .cache/llama-cpu/bin/llama-peer-check, from scripts/build-llama-cpu.sh). THREADS (default nproc).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT/.cache/interop-llama}
BONSAI=${BONSAI:-$ROOT/target/release/bonsai}
LLAMA_CHECK=${LLAMA_CHECK:-$ROOT/.cache/llama-cpu/bin/llama-peer-check}
THREADS=${THREADS:-$(nproc)}
mkdir -p "$OUT"
for bin in "$BONSAI" "$LLAMA_CHECK"; do
    [ -x "$bin" ] || { echo "missing binary: $bin (see the header of $0)" >&2; exit 1; }
done
export LD_LIBRARY_PATH=$(dirname "$LLAMA_CHECK")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
echo "llama.cpp: $LLAMA_CHECK (llama-cpp-python 0.3.36's vendored upstream llama.cpp, scripts/build-llama-cpu.sh)"
echo "bonsai: $BONSAI ($("$BONSAI" --version))"

G=$ROOT/tests/golden
q() { "$BONSAI" "$@" >"$OUT/write.log" 2>&1 || { cat "$OUT/write.log" >&2; exit 1; }; }
q convert "$G/q1" --type q1_0 -o "$OUT/q1-convert-Q1_0.gguf"
q convert "$G/tq2" --type q2_0 -o "$OUT/tq2-convert-Q2_0.gguf"
q convert "$G/tq2" --type pq2_0 -o "$OUT/tq2-convert-PQ2_0.gguf"
q convert "$G/tq2" --type ptq1_0 -o "$OUT/tq2-convert-PTQ1_0.gguf"
q quantize "$OUT/tq2-convert-PQ2_0.gguf" "$OUT/tq2-quantize-Q2_0.gguf" --type q2_0
q quantize "$OUT/tq2-convert-PTQ1_0.gguf" "$OUT/tq2-quantize-from-PTQ1_0-Q2_0.gguf" --type q2_0
q quantize "$OUT/tq2-convert-Q2_0.gguf" "$OUT/tq2-quantize-PQ2_0.gguf" --type pq2_0
q quantize "$OUT/q1-convert-Q1_0.gguf" "$OUT/q1-quantize-Q2_0.gguf" --type q2_0
q bench --synthetic qwen35-tiny --write-gguf "$OUT/qwen35-tiny-Q2_0.gguf"
q quantize "$OUT/qwen35-tiny-Q2_0.gguf" "$OUT/qwen35-tiny-quantize-PQ2_0.gguf" --type pq2_0
for f in q1-convert-Q1_0 tq2-convert-Q2_0 qwen35-tiny-Q2_0; do
    q quantize "$OUT/$f.gguf" "$OUT/$f-as-F32.gguf" --type f32
done

check() {
    local llama_file=$OUT/${2:-$1}.gguf
    BONSAI=$BONSAI LLAMA_CHECK=$LLAMA_CHECK THREADS=$THREADS bash "$ROOT/scripts/llama-peer/check-one.sh" \
        "$OUT/$1.gguf" 128 4000 "$OUT" "${2:-$1}" "$llama_file"
}
{
    for f in q1-convert-Q1_0 q1-quantize-Q2_0 tq2-convert-Q2_0 tq2-quantize-Q2_0 tq2-quantize-from-PTQ1_0-Q2_0 qwen35-tiny-Q2_0; do check "$f"; done
    for f in q1-convert-Q1_0 tq2-convert-Q2_0 qwen35-tiny-Q2_0; do check "$f" "$f-as-F32"; done
    echo "== fork types, bonsai only: greedy tokens against tq2-convert-Q2_0 (the same weights)"
    "$BONSAI" generate --cpu -m "$OUT/tq2-convert-Q2_0.gguf" -p "The bonsai tree" -n 32 --temp 0 >"$OUT/ref-gen.txt" 2>/dev/null
    for f in tq2-convert-PQ2_0 tq2-convert-PTQ1_0 tq2-quantize-PQ2_0; do
        "$BONSAI" generate --cpu -m "$OUT/$f.gguf" -p "The bonsai tree" -n 32 --temp 0 >"$OUT/$f-gen.txt" 2>/dev/null
        if cmp -s "$OUT/ref-gen.txt" "$OUT/$f-gen.txt"; then echo "$f: identical"; else echo "$f: DIFFERENT"; fi
    done
    "$BONSAI" generate --cpu -m "$OUT/qwen35-tiny-Q2_0.gguf" -p "The bonsai tree" -n 32 --temp 0 >"$OUT/ref35-gen.txt" 2>/dev/null
    "$BONSAI" generate --cpu -m "$OUT/qwen35-tiny-quantize-PQ2_0.gguf" -p "The bonsai tree" -n 32 --temp 0 >"$OUT/q35-pq2-gen.txt" 2>/dev/null
    if cmp -s "$OUT/ref35-gen.txt" "$OUT/q35-pq2-gen.txt"; then echo "qwen35-tiny-quantize-PQ2_0: identical"; else echo "qwen35-tiny-quantize-PQ2_0: DIFFERENT"; fi
} | tee "$OUT/interop.txt"

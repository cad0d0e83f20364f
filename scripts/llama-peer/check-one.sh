#!/usr/bin/env bash
# One GGUF file on both engines: perplexity over text from README.md in windows of CTX (bonsai's
# definition, every next token of a window scored) and 32 greedy tokens after a fixed prompt.
# llama.cpp quantizes activations to 8 bits (Q8_0) where bonsai keeps f32, so perplexity agrees to
# a fraction of a percent, not exactly, and a greedy run may take a near-tie the other way; the
# comparison prints both, the first differing token and the first step's top logits.
# LLAMA_FILE (optional) is the file llama.cpp reads instead: FILE's weights decoded to F32
# (`bonsai quantize FILE LLAMA_FILE --type f32`), so its matmuls run in f32 as bonsai's do and the
# two engines agree to f32 rounding (the exact check).
#
#   bash scripts/llama-peer/check-one.sh FILE CTX CHARS OUT_DIR NAME [LLAMA_FILE]
# Env: BONSAI, LLAMA_CHECK (llama-peer-check from scripts/build-llama-cpu.sh), THREADS.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
f=$1 ctx=$2 chars=$3 OUT=$4 name=$5 llama_file=${6:-$1}
prompt="The bonsai tree" n=32
text=$OUT/check-text.txt
head -c "$chars" "$ROOT/README.md" >"$text"
echo "== check $name ($(basename "$llama_file") on llama.cpp; perplexity, windows of $ctx; $n greedy tokens after \"$prompt\")"
"$LLAMA_CHECK" "$llama_file" "$text" "$ctx" "$prompt" "$n" "$THREADS" >"$OUT/check-$name-llama.txt"
"$BONSAI" perplexity --cpu -m "$f" -f "$text" --ctx "$ctx" >"$OUT/check-$name-bonsai.txt" 2>/dev/null
"$BONSAI" generate --cpu -m "$f" -p "$prompt" -n "$n" --temp 0 --ctx $((ctx + n + 64)) \
    --dump-logits "$OUT/check-$name-bonsai-logits.f32" >"$OUT/check-$name-bonsai-gen.txt" 2>/dev/null
vocab=$("$BONSAI" info "$f" | sed -n 's/.*, vocab \([0-9]*\),.*/\1/p')
python3 "$ROOT/scripts/llama-peer/compare_check.py" "$OUT/check-$name-llama.txt" "$OUT/check-$name-bonsai.txt" \
    "$OUT/check-$name-bonsai-gen.txt" "$prompt" "$OUT/check-$name-bonsai-logits.f32" "$vocab"

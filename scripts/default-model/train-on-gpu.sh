#!/usr/bin/env bash
# Trains bonsai's default model on one GPU: writes the story corpus (once, into
# .cache/default-model/), trains for a fixed wall-clock budget and leaves in OUTDIR:
#   train.log           everything train.py printed (loss curve, final train / held-out loss)
#   command.txt         the exact training command, the GPU and the wall time
#   checkpoint.tar.gz   the Hugging Face checkpoint folder (config.json, model.safetensors,
#                       tokenizer files, eval.json), a few MB; ship it with
#                       `bash scripts/default-model/install.sh OUTDIR/checkpoint.tar.gz`
# Usage: bash scripts/default-model/train-on-gpu.sh OUTDIR [train.py options...]
# Env: TRAIN_SECONDS (training-loop budget, default 360), CORPUS_SAMPLES (default 2000000),
#      PYTHON (default python3). Needs torch, tokenizers, safetensors and numpy; no network.
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,12p' "$0" >&2; exit 2; }
OUT=$1
shift
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PYTHON=${PYTHON:-python3}
SECONDS_BUDGET=${TRAIN_SECONDS:-360}
SAMPLES=${CORPUS_SAMPLES:-2000000}
# The training corpus's seed (the tokenizer was learned on seed 1000, the held-out text is seed 99).
CORPUS_SEED=1

mkdir -p "$OUT"
WORK="$ROOT/.cache/default-model"
CORPUS="$WORK/stories-seed$CORPUS_SEED-$SAMPLES.txt"
CHECKPOINT="$WORK/checkpoint"
mkdir -p "$WORK"
start=$(date +%s)
if [ ! -s "$CORPUS" ]; then
    echo "writing $SAMPLES stories to $CORPUS"
    "$PYTHON" "$HERE/stories.py" --seed "$CORPUS_SEED" --count "$SAMPLES" --jobs "$(nproc)" --out "$CORPUS.tmp"
    mv "$CORPUS.tmp" "$CORPUS"
fi
rm -rf "$CHECKPOINT"
cmd=("$PYTHON" "$HERE/train.py" --corpus "$CORPUS" --out "$CHECKPOINT" --seconds "$SECONDS_BUDGET" "$@")
{
    echo "command: ${cmd[*]}"
    echo "corpus: stories.py --seed $CORPUS_SEED --count $SAMPLES"
    echo "gpu: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
} >"$OUT/command.txt"
PYTHONUNBUFFERED=1 "${cmd[@]}" 2>&1 | tee "$OUT/train.log"
tar -C "$WORK" -czf "$OUT/checkpoint.tar.gz" checkpoint
echo "wall time (corpus, tokenization, training, evaluation): $(($(date +%s) - start)) s" | tee -a "$OUT/command.txt"

#!/usr/bin/env bash
# Makes a trained checkpoint bonsai's built-in default model:
#   1. converts it (`bonsai convert --type q1_0`) to models/bonsai-tiny-stories-q1_0.gguf,
#   2. scores the held-out text with `bonsai perplexity` on the CPU and checks the figure against
#      PyTorch's for the same checkpoint (eval.json, or eval_checkpoint.py when eval.json was
#      computed on another held-out text and torch is importable),
#   3. writes models/bonsai-tiny-stories.expect (SHA-256, held-out perplexity and the bound the
#      tests hold it to) and models/bonsai-tiny-stories.train.json (the training run's eval.json),
#   4. prints the figures the README's "The default model" section quotes.
# Usage: bash scripts/default-model/install.sh CHECKPOINT_DIR|CHECKPOINT.tar.gz
# Env: BONSAI (the binary; default target/release/bonsai, built if missing), PYTHON (python3).
# Rebuild bonsai afterwards: the binary embeds the GGUF.
set -euo pipefail
[ $# -eq 1 ] || { sed -n '2,12p' "$0" >&2; exit 2; }
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
SRC=$1
PYTHON=${PYTHON:-python3}
BONSAI=${BONSAI:-$ROOT/target/release/bonsai}
GGUF="$ROOT/models/bonsai-tiny-stories-q1_0.gguf"
HELDOUT="$ROOT/models/bonsai-tiny-stories.heldout.txt"
EXPECT="$ROOT/models/bonsai-tiny-stories.expect"
# The tests hold the perplexity to the measured value plus this share: far below what a wrong
# kernel or a mis-converted tensor costs, far above CPU-to-CPU summation-order differences.
BOUND_MARGIN=0.01
# PyTorch and bonsai compute in f32 from the same weights; they differ by summation order only.
MAX_RELATIVE_DIFF=1e-4

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The converter names the model (general.name) after the checkpoint's folder.
CKPT="$tmp/bonsai-tiny-stories"
if [ -f "$SRC" ]; then
    tar -C "$tmp" -xzf "$SRC"
    mv "$tmp/checkpoint" "$CKPT"
else
    cp -r "$SRC" "$CKPT"
fi
[ -f "$CKPT/config.json" ] || { echo "install.sh: $SRC holds no config.json" >&2; exit 1; }
if [ ! -x "$BONSAI" ]; then
    (cd "$ROOT" && cargo build --release -p bonsai-cli)
fi

"$BONSAI" convert "$CKPT" -o "$GGUF" --type q1_0
sha=$(sha256sum "$GGUF" | cut -d' ' -f1)
bytes=$(stat -c %s "$GGUF")
line=$("$BONSAI" perplexity --cpu -m "$GGUF" -f "$HELDOUT" 2>/dev/null)
ppl=$(echo "$line" | awk '/^perplexity:/ {print $2}')
echo "bonsai: $line"

heldout_sha=$(sha256sum "$HELDOUT" | cut -d' ' -f1)
reference=$("$PYTHON" - "$CKPT/eval.json" "$heldout_sha" <<'EOF'
import json, sys
e = json.load(open(sys.argv[1]))
print(e["heldout_perplexity"] if e.get("heldout_sha256") == sys.argv[2] else "")
EOF
)
if [ -z "$reference" ] && "$PYTHON" -c "import torch" 2>/dev/null; then
    reference=$(cd "$HERE" && "$PYTHON" eval_checkpoint.py "$CKPT" | cut -d' ' -f1)
fi
if [ -n "$reference" ]; then
    "$PYTHON" - "$ppl" "$reference" "$MAX_RELATIVE_DIFF" <<'EOF'
import sys
bonsai, torch_ppl, limit = map(float, sys.argv[1:])
diff = abs(bonsai - torch_ppl) / torch_ppl
print(f"PyTorch: {torch_ppl:.6f}; relative difference {diff:.1e} (limit {limit:.0e})")
sys.exit(0 if diff <= limit else "bonsai and PyTorch disagree: the conversion is wrong")
EOF
else
    echo "note: no PyTorch figure for this held-out text (eval.json is for another one, torch not importable): not compared"
fi

bound=$("$PYTHON" -c "import math, sys; print(f'{math.ceil(float(sys.argv[1]) * (1 + $BOUND_MARGIN) * 1e4) / 1e4:.4f}')" "$ppl")
cat >"$EXPECT" <<EOF
# The built-in default model, as scripts/default-model/install.sh last wrote it; read by
# crates/bonsai-cli/tests/default_model.rs and crates/bonsai-cli/tests/emulated_gpu.rs.
sha256 $sha
heldout_perplexity $ppl
heldout_perplexity_bound $bound
EOF
cp "$CKPT/eval.json" "$ROOT/models/bonsai-tiny-stories.train.json"

"$PYTHON" - "$CKPT/eval.json" <<EOF
import json, sys
e = json.load(open(sys.argv[1]))
g = e["geometry"]
print()
print("README figures:")
print(f"  file: models/bonsai-tiny-stories-q1_0.gguf, $bytes bytes, SHA-256 $sha")
print(f"  geometry: {g['n_layers']} layers, hidden {g['hidden']}, ffn {g['ffn']}, heads {g['n_q_heads']}/{g['n_kv_heads']}, "
      f"head_dim {g['head_dim']}, vocab {g['vocab']}, context {g['context']}; {e['parameters'] / 1e6:.1f} M parameters")
print(f"  held-out perplexity (bonsai, CPU): $ppl (tests: at most $bound)")
print(f"  training: {e['steps']} steps, {e['tokens'] / 1e6:.0f} M tokens in {e['train_seconds']:.0f} s "
      f"({e['tokens_per_second'] / 1e6:.2f} M tok/s) on {e['device']}; final train loss {e['final_train_loss']}, "
      f"validation loss {e['final_valid_loss']}")
EOF
echo "now rebuild bonsai (the binary embeds the model) and update README.md's figures"

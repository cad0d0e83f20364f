#!/usr/bin/env bash
# The one command that runs bonsai's whole test suite on a fresh machine (no GPU needed).
#
# It installs the pinned NVRTC 13.0 wheels (about 100 MB, once, into .cache/) so that the CUDA
# kernel library's compile check runs (sm_80, 86, 90, 100, 120), and the pinned `openai` Python
# client (for the server tests), then runs every Rust test.
set -euo pipefail
cd "$(dirname "$0")/.."

WHEELS=.cache/cuda-wheels
STAMP="$WHEELS/.installed-nvrtc-13.0.88"
if [ ! -f "$STAMP" ]; then
    echo "installing pinned NVRTC 13.0 wheels into $WHEELS (once)"
    rm -rf "$WHEELS"
    python3 -m pip install --quiet --disable-pip-version-check --no-warn-script-location \
        --target "$WHEELS" \
        nvidia-cuda-nvrtc==13.0.88 nvidia-cuda-runtime==13.0.96 nvidia-cuda-cccl==13.0.85
    touch "$STAMP"
fi
# The official OpenAI Python client, pinned, for the `bonsai serve` tests (tests/serve.rs).
OPENAI_DIR=.cache/py-openai
OPENAI_STAMP="$OPENAI_DIR/.installed-openai-1.99.0"
if [ ! -f "$OPENAI_STAMP" ]; then
    echo "installing the pinned openai 1.99.0 Python client into $OPENAI_DIR (once)"
    rm -rf "$OPENAI_DIR"
    python3 -m pip install --quiet --disable-pip-version-check --no-warn-script-location \
        --target "$OPENAI_DIR" openai==1.99.0
    touch "$OPENAI_STAMP"
fi
export PYTHONPATH="$PWD/$OPENAI_DIR${PYTHONPATH:+:$PYTHONPATH}"
export BONSAI_REQUIRE_OPENAI=1

export LD_LIBRARY_PATH="$PWD/$WHEELS/nvidia/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The compile check must not skip itself here: NVRTC was just installed.
export BONSAI_REQUIRE_NVRTC=1

# Incremental caches only cost disk on a one-shot CI build.
export CARGO_INCREMENTAL=0
cargo test --workspace --locked "$@"

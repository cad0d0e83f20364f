#!/usr/bin/env bash
# The one command that runs bonsai's whole test suite on a fresh machine (no GPU needed).
#
# It installs the pinned NVRTC 13.0 wheels (about 100 MB, once, into .cache/) so that the CUDA
# kernel library's compile check runs (sm_80, 90, 100, 120), and the pinned `openai` Python
# client (for the server tests), then runs every Rust test.
set -euo pipefail
cd "$(dirname "$0")/.."

# install_once DIR NAME PACKAGE...: pip-installs the pinned packages into DIR the first time.
install_once() {
    local dir=$1 name=$2
    shift 2
    if [ ! -f "$dir/.installed-$name" ]; then
        echo "installing pinned $name into $dir (once)"
        rm -rf "$dir"
        python3 -m pip install --quiet --disable-pip-version-check --no-warn-script-location \
            --target "$dir" "$@"
        touch "$dir/.installed-$name"
    fi
}
WHEELS=.cache/cuda-wheels
install_once "$WHEELS" nvrtc-13.0.88 nvidia-cuda-nvrtc==13.0.88 nvidia-cuda-runtime==13.0.96 nvidia-cuda-cccl==13.0.85
# The official OpenAI Python client, pinned, for the `bonsai serve` tests (tests/serve.rs).
OPENAI_DIR=.cache/py-openai
install_once "$OPENAI_DIR" openai-1.99.0 openai==1.99.0
export PYTHONPATH="$PWD/$OPENAI_DIR${PYTHONPATH:+:$PYTHONPATH}"
export BONSAI_REQUIRE_OPENAI=1

export LD_LIBRARY_PATH="$PWD/$WHEELS/nvidia/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The compile check must not skip itself here: NVRTC was just installed.
export BONSAI_REQUIRE_NVRTC=1

# Incremental caches only cost disk on a one-shot CI build.
export CARGO_INCREMENTAL=0
cargo test --workspace --locked "$@"

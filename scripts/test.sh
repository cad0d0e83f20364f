#!/usr/bin/env bash
# The one command that runs bonsai's whole test suite on a fresh machine (no GPU needed).
#
# It installs the pinned NVRTC 13.0 wheels (about 100 MB, once, into .cache/) so that the CUDA
# kernel library's compile check runs (sm_80, 86, 90, 100, 120), then runs every Rust test.
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
export LD_LIBRARY_PATH="$PWD/$WHEELS/nvidia/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The compile check must not skip itself here: NVRTC was just installed.
export BONSAI_REQUIRE_NVRTC=1

# Incremental caches only cost disk on a one-shot CI build.
export CARGO_INCREMENTAL=0
cargo test --workspace --locked "$@"

#!/usr/bin/env bash
# Builds what a GPU run needs into .gpu/ (git-ignored; pass it to the device call as a carried
# path): the release `bonsai` binary with the kernel library precompiled for sm_80..sm_90 (needs a
# CUDA compiler here: the pinned pip nvcc wheels), and the scripts it runs.
set -euo pipefail
cd "$(dirname "$0")/.."
NVCC=${BONSAI_NVCC:-/opt/cuda-wheels/nvidia/cu13/bin/nvcc}
if [ ! -x "$NVCC" ]; then
    echo "installing the pinned nvcc 13.0 wheels into /opt/cuda-wheels"
    python3 -m pip install --quiet --target /opt/cuda-wheels nvidia-cuda-nvcc==13.0.88 \
        nvidia-cuda-nvrtc==13.0.88 nvidia-nvvm==13.0.88 nvidia-cuda-runtime==13.0.96 \
        nvidia-cuda-crt==13.0.88 nvidia-cuda-cccl==13.0.85
fi
BONSAI_NVCC=$NVCC cargo build --release --locked -p bonsai-cli
mkdir -p .gpu
# Debug info stripped: the device call carries at most 64 MiB (symbols stay for backtraces).
strip --strip-debug -o .gpu/bonsai target/release/bonsai
echo "built .gpu/bonsai ($(du -h .gpu/bonsai | cut -f1)), commit $(git rev-parse --short HEAD)"

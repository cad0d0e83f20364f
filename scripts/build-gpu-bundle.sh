#!/usr/bin/env bash
# Builds what a GPU run needs into .gpu/ (git-ignored; pass it to the device call as a carried
# path): the release `bonsai` binary with the kernel library precompiled (needs a CUDA compiler
# here: the pinned pip nvcc wheels).
#
#   scripts/build-gpu-bundle.sh              .gpu/bonsai from the working tree
#   scripts/build-gpu-bundle.sh --base REV   .gpu/bonsai-base from commit REV (gpu-check.sh's `ab`
#                                            step measures it against .gpu/bonsai in one call)
#
# CUDAARCHS (e.g. `90`) embeds only those architectures: quicker builds for one GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
NVCC=${BONSAI_NVCC:-/opt/cuda-wheels/nvidia/cu13/bin/nvcc}
if [ ! -x "$NVCC" ]; then
    echo "installing the pinned nvcc 13.0 wheels into /opt/cuda-wheels"
    python3 -m pip install --quiet --target /opt/cuda-wheels nvidia-cuda-nvcc==13.0.88 \
        nvidia-cuda-nvrtc==13.0.88 nvidia-nvvm==13.0.88 nvidia-cuda-runtime==13.0.96 \
        nvidia-cuda-crt==13.0.88 nvidia-cuda-cccl==13.0.85
fi
mkdir -p .gpu
if [ "${1:-}" = "--base" ]; then
    rev=$(git rev-parse --short "${2:?usage: build-gpu-bundle.sh --base REV}")
    tree=.cache/base-$rev
    [ -d "$tree" ] || git worktree add --detach "$tree" "$rev"
    # Older commits read BONSAI_EMBED_ARCHS where newer ones read CUDAARCHS.
    (cd "$tree" && env ${CUDAARCHS:+BONSAI_EMBED_ARCHS=$CUDAARCHS} BONSAI_NVCC="$NVCC" CARGO_TARGET_DIR="$PWD/target" \
        cargo build --release --locked -p bonsai-cli)
    strip --strip-debug -o .gpu/bonsai-base "$tree/target/release/bonsai"
    echo "built .gpu/bonsai-base ($(du -h .gpu/bonsai-base | cut -f1)), commit $rev"
    exit 0
fi
BONSAI_NVCC=$NVCC cargo build --release --locked -p bonsai-cli
# Debug info stripped: the device call carries at most 64 MiB (symbols stay for backtraces).
strip --strip-debug -o .gpu/bonsai target/release/bonsai
echo "built .gpu/bonsai ($(du -h .gpu/bonsai | cut -f1)), commit $(git rev-parse --short HEAD)"

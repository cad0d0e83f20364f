#!/usr/bin/env bash
# Builds the llama.cpp peer of `scripts/cpu-vs-llama.sh`: a pinned, portable x86-64 CPU build of
# upstream llama.cpp (which runs Q1_0, and Q2_0 with 64-weight groups), from the source that the
# `llama-cpp-python` sdist on PyPI vendors.
#
#   bash scripts/build-llama-cpu.sh            # -> .cache/llama-cpu/bin/{llama-bench,llama-peer-check}
#
# Pinned: llama-cpp-python 0.3.36 (sdist sha256 below). Its vendor/llama.cpp has GGML_TYPE_Q1_0
# (id 41, block_q1_0 = f16 d + 16 bytes of sign bits, 128 weights: the layout bonsai reads and
# writes) and GGML_TYPE_Q2_0 (id 42, 64-weight groups, codes 00=-1 01=0 10=+1 11=+2).
#
# Target: GGML_NATIVE=OFF with AVX, AVX2, FMA, F16C, BMI2, AVX-512 F/BW/DQ/VL, VBMI and VNNI
# (ggml's "icelake" variant), one static binary. It runs on every AVX-512 x86 server from Ice
# Lake and Zen 4 on, so the binary built here runs on the GPU machine's CPU too. Upstream's Q1_0
# dot product (ggml_vec_dot_q1_0_q8_0) has an AVX2 path and no AVX-512 one, and Q2_0 only the
# generic one on x86, so no wider variant would change llama.cpp's speed on these models.
# LLAMA_VARIANTS=all builds every x86 variant instead (GGML_BACKEND_DL + GGML_CPU_ALL_VARIANTS,
# chosen at run time; slow: about twelve copies of ggml-cpu), and LLAMA_VARIANTS=native builds
# for this machine only.
#
# Also builds `llama-peer-check` (scripts/llama-peer/peer_check.cpp): greedy tokens and perplexity
# on token windows exactly as `bonsai perplexity` scores them, for the correctness check.
#
# Needs: python3 with pip (for cmake and ninja wheels and the sdist), gcc/g++ and network once.
# Environment: JOBS (default 2), NICE (default 10), LLAMA_CPU_DIR (default .cache/llama-cpu).
set -euo pipefail

LLAMA_CPP_PYTHON_VERSION=0.3.36
SDIST_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${LLAMA_CPU_DIR:-$ROOT/.cache/llama-cpu}
JOBS=${JOBS:-2}
NICE=${NICE:-10}
VARIANTS=${LLAMA_VARIANTS:-icelake}
mkdir -p "$DIR/src" "$DIR/bin"

# cmake and ninja as wheels in a private venv; the sdist's metadata step needs scikit-build-core
# (without it, pip would build cmake from source just to read the package's metadata).
if [ ! -x "$DIR/venv/bin/cmake" ]; then
    python3 -m venv "$DIR/venv"
    "$DIR/venv/bin/pip" install -q cmake ninja scikit-build-core
fi
SDIST=$DIR/src/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION.tar.gz
if [ ! -f "$SDIST" ]; then
    "$DIR/venv/bin/pip" download -q --no-binary :all: --no-deps --no-build-isolation \
        "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" -d "$DIR/src"
fi
echo "$SDIST_SHA256  $SDIST" | sha256sum -c --quiet
SRC=$DIR/src/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION/vendor/llama.cpp
[ -d "$SRC" ] || tar xzf "$SDIST" -C "$DIR/src"
grep -q "GGML_TYPE_Q1_0 *= 41" "$SRC/ggml/include/ggml.h" || { echo "vendored llama.cpp has no Q1_0 (id 41)" >&2; exit 1; }

case $VARIANTS in
    icelake) ARCH_FLAGS=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
                         -DGGML_BMI2=ON -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON
                         -DBUILD_SHARED_LIBS=OFF) ;;
    all) ARCH_FLAGS=(-DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON -DBUILD_SHARED_LIBS=ON) ;;
    native) ARCH_FLAGS=(-DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF) ;;
    *) echo "LLAMA_VARIANTS must be icelake, all or native" >&2; exit 1 ;;
esac

BUILD=$DIR/build-$VARIANTS
PATH=$DIR/venv/bin:$PATH
nice -n "$NICE" cmake -S "$SRC" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    "${ARCH_FLAGS[@]}" -DGGML_OPENMP=ON -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_COMMON=ON >"$DIR/cmake-$VARIANTS.log"
nice -n "$NICE" cmake --build "$BUILD" -j "$JOBS" --target llama-bench llama
cp "$BUILD/bin/llama-bench" "$DIR/bin/"
if [ "$VARIANTS" = all ]; then cp "$BUILD"/bin/*.so "$DIR/bin/"; fi

# The check tool, against the same libllama.
LIBS=$(find "$BUILD" \( -name 'libllama.a' -o -name 'libllama.so' \) | head -1)
GGML_LIBS=$(find "$BUILD/ggml" \( -name 'libggml*.a' -o -name 'libggml*.so' \) | sort -r | tr '\n' ' ')
# shellcheck disable=SC2086
nice -n "$NICE" g++ -O2 -std=c++17 -I"$SRC/include" -I"$SRC/ggml/include" \
    "$ROOT/scripts/llama-peer/peer_check.cpp" -o "$DIR/bin/llama-peer-check" \
    -Wl,--start-group "$LIBS" $GGML_LIBS -Wl,--end-group -fopenmp -lpthread -ldl -Wl,-rpath,'$ORIGIN'

# OpenMP's runtime travels with the binaries (the GPU machine may lack the same libgomp).
cp "$(g++ -print-file-name=libgomp.so.1)" "$DIR/bin/" 2>/dev/null || true
"$DIR/bin/llama-bench" --version 2>&1 | head -2 || true
echo "built: $DIR/bin ($(ls "$DIR/bin" | tr '\n' ' '))"

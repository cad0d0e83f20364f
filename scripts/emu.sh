#!/usr/bin/env bash
# Runs a bonsai command on the CPU emulator of the CUDA driver and GPU (crates/bonsai-kernels/emu/).
# Usage: bash scripts/emu.sh BONSAI_BINARY ARGS...   e.g. bash scripts/emu.sh target/release/bonsai kernels verify --shapes small
#   Builds $BONSAI_EMU_DIR/libcuda.so (default target/emu) from the kernel source the binary carries, if it changed,
#   then runs the command with that libcuda first on LD_LIBRARY_PATH and BONSAI_EMULATED=1.
#   Env: BONSAI_EMU_ASAN=1 (AddressSanitizer build), BONSAI_EMU_THREADS (OS threads for CTAs), CXX (default g++),
#   BONSAI_EMU_SCHEDULE=forward|reverse|shuffle[:SEED] (fiber order in a CTA: racy kernels behave differently),
#   BONSAI_EMU_ARCH=80|86|89|90|100|120 (the GPU the emulator poses as, default 90: an A100, RTX 3090, RTX 4090,
#   H200, B200 or RTX 5090; emu/emu_device.h. One library build serves them all).
#   A cooperative launch runs all its CTAs at once, one OS thread each (<= 64): BONSAI_COOP_CTAS caps such grids (default 4).
#   A command that is not the bonsai binary: set BONSAI_EMU_SOURCE_BIN=path/to/bonsai. `--build-only BIN` just builds;
#   `--selftest` builds and runs the emulator's own test of its execution model (no bonsai binary needed).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
EMU_SRC="$ROOT/crates/bonsai-kernels/emu"
OUT="${BONSAI_EMU_DIR:-$ROOT/target/emu}"
CXX="${CXX:-g++}"
# fp-contract=off: a*b+c is never fused, so results do not depend on the host's FMA support.
CXXFLAGS=(-O2 -std=c++17 -fPIC -pthread -ffp-contract=off -fvisibility=hidden -fno-strict-aliasing -Wno-unknown-pragmas)
if grep -qw fma /proc/cpuinfo 2>/dev/null; then CXXFLAGS+=(-mfma); fi   # fast fmaf; same results
if [ "${BONSAI_EMU_ASAN:-0}" = 1 ]; then CXXFLAGS+=(-fsanitize=address -fno-omit-frame-pointer -g); fi
read -r -a extra_flags <<<"${BONSAI_EMU_CXXFLAGS:-}"; CXXFLAGS+=("${extra_flags[@]}")   # experiments only

command -v "$CXX" >/dev/null || { echo "emu.sh: no C++ compiler ($CXX) found" >&2; exit 2; }
if [ "${1:-}" = "--selftest" ]; then
    mkdir -p "$OUT"
    runtime=("$EMU_SRC"/*.cpp)   # the whole fake driver: the selftest also checks the posed devices through it
    "$CXX" "${CXXFLAGS[@]}" -I"$EMU_SRC" -include cuda_emu.h -c "$EMU_SRC/selftest/emu_selftest.cpp" -o "$OUT/emu_selftest.o"
    "$CXX" "${CXXFLAGS[@]}" -I"$EMU_SRC" "$OUT/emu_selftest.o" "${runtime[@]}" -o "$OUT/emu_selftest"
    exec "$OUT/emu_selftest"
fi
build_only=0
if [ "${1:-}" = "--build-only" ]; then build_only=1; shift; fi
[ $# -ge 1 ] || { sed -n '2,10p' "${BASH_SOURCE[0]}" >&2; exit 2; }
SOURCE_BIN="${BONSAI_EMU_SOURCE_BIN:-$1}"
[ -x "$SOURCE_BIN" ] || { echo "emu.sh: $SOURCE_BIN is not an executable bonsai binary" >&2; exit 2; }

mkdir -p "$OUT"
exec 9>"$OUT/.lock"
# One build at a time: concurrent callers wait, then reuse it. (Without flock two first builds
# may both compile; each installs a complete library with an atomic mv.)
if command -v flock >/dev/null; then flock 9; fi

work="$(mktemp -d "$OUT/build.XXXXXX")"
trap 'rm -rf "$work"' EXIT
"$SOURCE_BIN" kernels source >"$work/combined.cu"
"$SOURCE_BIN" kernels source --entry-points >"$work/entry_points.txt"

# The one dynamic shared memory pattern, `extern __shared__ [__align__(n)] T name[];`, becomes a
# pointer into the current CTA's buffer.
sed -E 's/extern[[:space:]]+__shared__[[:space:]]+(__align__\([0-9]+\)[[:space:]]+)?([A-Za-z_][A-Za-z0-9_]*)[[:space:]]+([A-Za-z_][A-Za-z0-9_]*)[[:space:]]*\[[[:space:]]*\][[:space:]]*;/\2* \3 = reinterpret_cast<\2*>(emu_dynamic_smem());/' \
    "$work/combined.cu" >"$work/kernels.cpp"
# Every static `__shared__ [__align__(n)] T name[...];` gets EMU_POISON_SHARED(name); after it
# (cuda_emu.h: poisoned once per CTA, so reading shared memory nobody wrote shows).
sed -E -i 's/(__shared__[[:space:]]+(__align__\([0-9]+\)[[:space:]]+)?[A-Za-z_][A-Za-z0-9_ ]*[[:space:]]+([A-Za-z_][A-Za-z0-9_]*)[[:space:]]*(\[[^];]*\][[:space:]]*)*;)/\1 EMU_POISON_SHARED(\3);/' \
    "$work/kernels.cpp"
# One build serves every posed architecture (BONSAI_EMU_ARCH), with cuda_emu.h's __CUDA_ARCH__ of
# 900. That is right only while the kernels themselves never test the architecture: such tests
# belong in ptx.cuh's wrappers, whose emulated twins check the posed one at run time (emu_ptx.h).
if awk '/^\/\/ ---- [^ ]+\.cuh? ----$/ { file = $3 } /__CUDA_ARCH/ && file != "cuda/ptx.cuh" { print file ": " $0; bad = 1 }
        END { exit !bad }' "$work/combined.cu" >&2; then
    echo "emu.sh: kernel code above tests __CUDA_ARCH__ outside src/cuda/ptx.cuh; the emulator would run only its sm_90 branch" >&2
    exit 1
fi
if grep -n 'extern[[:space:]]*__shared__' "$work/kernels.cpp" >&2; then
    echo "emu.sh: a dynamic shared memory declaration above is not of the form 'extern __shared__ T name[];'" >&2
    exit 1
fi
{
    echo '#include "emu_table.h"'
    echo 'static const emu::KernelEntry kEmuKernels[] = {'
    sed -E 's/^(.+)$/    EMU_KERNEL(\1),/' "$work/entry_points.txt"
    echo '};'
    echo 'extern "C" const emu::KernelEntry* emu_kernel_table(size_t* count) {'
    echo '    *count = sizeof(kEmuKernels) / sizeof(kEmuKernels[0]);'
    echo '    return kEmuKernels;'
    echo '}'
} >>"$work/kernels.cpp"

hash="$( { cat "$work/kernels.cpp" "$EMU_SRC"/*.h "$EMU_SRC"/*.cpp; echo "$CXX ${CXXFLAGS[*]}"; "$CXX" --version; } | sha256sum | cut -c1-16)"
if [ ! -f "$OUT/libcuda.so" ] || [ "$(cat "$OUT/libcuda.hash" 2>/dev/null)" != "$hash" ]; then
    echo "emu.sh: building $OUT/libcuda.so (kernel source or emulator changed)" >&2
    started=$(date +%s)
    "$CXX" "${CXXFLAGS[@]}" -DBONSAI_EMU -I"$EMU_SRC" -include cuda_emu.h -c "$work/kernels.cpp" -o "$work/kernels.o" &
    kernels_pid=$!
    objects=("$work/kernels.o")
    for src in "$EMU_SRC"/*.cpp; do
        obj="$work/$(basename "$src" .cpp).o"
        "$CXX" "${CXXFLAGS[@]}" -I"$EMU_SRC" -c "$src" -o "$obj"
        objects+=("$obj")
    done
    wait "$kernels_pid"
    "$CXX" "${CXXFLAGS[@]}" -shared -Wl,-soname,libcuda.so.1 -o "$work/libcuda.so" "${objects[@]}"
    mv -f "$work/libcuda.so" "$OUT/libcuda.so"
    ln -sf libcuda.so "$OUT/libcuda.so.1"
    echo "$hash" >"$OUT/libcuda.hash"
    echo "emu.sh: built in $(( $(date +%s) - started )) s" >&2
fi
exec 9>&-
rm -rf "$work"   # `exec` below skips the EXIT trap
trap - EXIT

if [ "$build_only" = 1 ]; then echo "$OUT"; exit 0; fi
export LD_LIBRARY_PATH="$OUT${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export BONSAI_EMULATED=1
export BONSAI_COOP_CTAS="${BONSAI_COOP_CTAS:-4}"   # launch_ex.rs cooperative_grid_cap: one OS thread per CTA here
if [ "${BONSAI_EMU_ASAN:-0}" = 1 ]; then
    export LD_PRELOAD="$("$CXX" -print-file-name=libasan.so)${LD_PRELOAD:+:$LD_PRELOAD}"
    export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0}"
fi
exec "$@"

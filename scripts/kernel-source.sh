#!/usr/bin/env bash
# Prints the kernel library's source as `combined_source()` builds it: every `path: "..."` row of
# registry.rs in order (PRELUDE first, then SOURCES), each preceded by "// ---- <path> ----".
# Used by scripts/compile-kernels.sh and scripts/sass-scoreboards.sh (no Rust build needed).
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)/crates/bonsai-kernels/src"
grep -o 'path: "[^"]*"' "$src/cuda/registry.rs" | sed 's/path: "\(.*\)"/\1/' | while read -r p; do
    printf '// ---- %s ----\n' "$p"
    cat "$src/$p"
    printf '\n'
done

#!/usr/bin/env bash
# Lab (not a test): every kernel's duration in a bonsai command, summed by kernel name, via ncu
# (graph nodes profiled one by one). Runs on the GPU machine with .gpu/bonsai carried.
#   bash scripts/lab/kernel-profile.sh OUT NAME PER_STEP_DIVISOR -- BONSAI_ARGS...
# Writes OUT/NAME.csv (raw ncu) and prints the table: total us per kernel name / PER_STEP_DIVISOR
# (e.g. the number of decode steps or prefills the command ran), count per step, mean us.
set -uo pipefail
OUT=$1; NAME=$2; DIV=$3; shift 4
cd "$(dirname "$0")/../.."
export PATH=/usr/local/cuda/bin:$PATH
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
timeout "${NCU_TIMEOUT:-300}" "$NCU" --clock-control none --metrics gpu__time_duration.sum \
    ${NCU_EXTRA:-} --csv --page raw "$PWD/.gpu/bonsai" "$@" >"$OUT/$NAME.csv" 2>"$OUT/$NAME.err"
echo "ncu $NAME rc=$? rows=$(wc -l <"$OUT/$NAME.csv")"
python3 scripts/lab/kernel-profile-summary.py "$OUT/$NAME.csv" "$DIV" | tee "$OUT/$NAME.summary"

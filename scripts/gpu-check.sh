#!/usr/bin/env bash
# The one script a GPU test run executes. Builds nothing: it runs the prebuilt binaries carried in
# .gpu/ (see scripts/build-gpu-bundle.sh) and writes every log into the folder it is given.
#
#   scripts/gpu-check.sh OUT_DIR [STEP...]
#
# Steps (default: all but golden and image): env tiers verify bench model check golden image
#   env     device facts (nvidia-smi, driver, nvcc)
#   tiers   exercises the four kernel-library load tiers and a corrupted cache file, with timings
#   verify  bonsai kernels verify: every CUDA op against the CPU reference
#   bench   bonsai kernels verify --bench: per-kernel time and bandwidth vs the measured copy ceiling
#   model   bonsai bench on the synthetic geometries (pp512 + tg128, decode at depth, no graph, PDL)
#   check   bonsai check (CPU vs GPU greedy tokens, logits, perplexity) on both golden checkpoints
#           and on random-weight 8B geometries
#   lab     scripts/lab/run.sh: the decode GEMV variants (gemv_tc vs the older ones), needs nvcc
#   headline  pp512 + tg128 of Bonsai-8B and Ternary-8B only (the README's figures)
#   probe   tg128 with N empty dependent launches per layer (BONSAI_PROBE_STEPS): one step's cost
#   trace   the decode graph's per-kernel timeline on the GPU clock (BONSAI_TRACE=1), 8B and ternary
#   timeline scripts/lab/run.sh --timeline: read floor, gemv_tc phases, pre-staged x (needs nvcc)
#   mmarate scripts/lab/mma_rate.cu: issue rate of bf16 / s8 / b1 mma.sync, b1 fragment layout
#   locality-lab scripts/lab/dram_locality.cu: the GEMV's weight stream with the Q1 / Q2 row pieces
#           against unit-contiguous weights (DRAM access pattern)
#   owner-lab scripts/lab/owner_groups.cu: bandwidth of N SMs on a decode matrix, cluster vs counter
#           epilogues quantizing a GEMV's own output groups
#   decode-chain  bonsai bench / check of each decode layer-tail mode (ops, attn_planes, planes, chain)
#   chain   scripts/lab/persistent_chain.cu: grid-barrier cost and weight streaming of a persistent
#           decode step (8B layer stages), against one kernel reading the same bytes
#   profile Nsight Compute: per-kernel time of decode steps (8B, 1.7B), of an 8B pp512 prefill, and
#           the GEMV's stall reasons
#   image-profile  Nsight Compute on the wgmma joint attention and gemm_f32 at their largest shapes
#   variants  compile-time kernel variants (VARIANTS="base NAME ...", each optionally
#           NAME:KNOB=V,KNOB=V with run-time knobs) against the default: verify, check, tg128
#           alternating, traces (VARIANT_DEPTH: decode at depth too; VARIANT_TRACE_DEPTH: a
#           CTA-end trace at that depth; VARIANT_MODELS: the synthetic models checked and
#           traced, default bonsai-8b)
#   knobs   run-time knobs (KNOBS="NAME=V,NAME=V ...") against the default: check, tg128
#           alternating (KNOB_ROUNDS), traces (KNOB_TRACE=0: none)
#   gemv-stalls  Nsight Compute's per-instruction warp stalls of the binary GEMV (gate_up, attn_out)
#   graph-stalls Nsight Compute's warp states over one whole decode graph replay (8B): how much warp
#           time waits on instruction fetch, memory, barriers, inside the graph as it runs; then
#           per kernel and SASS instruction (SourceCounters, scripts/ncu-source-summary.py)
#   golden  scripts/reference/make_golden.py (torch + transformers) into OUT_DIR/golden
#   image   bonsai kernels image-compare (every Bonsai-Image op at the issue #6 shapes), then
#           scripts/reference/image_torch.py (torch f64 truth, torch f32/bf16 error and time,
#           PASS/FAIL per target). The raw f32 dump (several GB) goes to a scratch folder
#           (IMAGE_DUMP, kept; default a fresh temp dir, deleted afterwards); OUT_DIR/image keeps
#           manifest.json and image_torch.json. IMAGE_CASES=a,b limits the cases. Not a default
#           step: it may run past 4 minutes.
set -uo pipefail
OUT=${1:?usage: gpu-check.sh OUT_DIR [STEP...]}
shift
STEPS=${*:-env tiers verify bench model check}
# The device tool returns at most 8 files: step logs go to $LOGS and are packed into one
# $OUT/logs.tgz at the end; $OUT/summary.log holds each step's status and the tail of its log.
LOGS=$(mktemp -d)
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
BIN=$PWD/.gpu/bonsai                 # built with nvcc present: embedded SASS
# The same binary with the embedded tier switched off exercises the other tiers.
BIN_PLAIN="env BONSAI_SKIP_EMBEDDED=1 $BIN"
export PATH=/usr/local/cuda/bin:$PATH
status=0

run() { # run NAME CMD...: logs to $LOGS/NAME.log (killed after STEP_TIMEOUT s), remembers failure
    local name=$1; shift
    echo "=== $name: $*" | tee -a "$OUT/summary.log"
    local t0=$(date +%s%N)
    timeout "${STEP_TIMEOUT:-300}" "$@" >"$LOGS/$name.log" 2>&1
    local rc=$?
    local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    echo "=== $name: rc=$rc wall=${ms}ms" | tee -a "$OUT/summary.log"
    tail -n 40 "$LOGS/$name.log" | tee -a "$OUT/summary.log"
    [ $rc -eq 0 ] || status=1
    # Packed after every step, so a call killed at its time limit still returns the logs so far.
    tar czf "$OUT/logs.tgz" -C "$LOGS" --exclude='*.gguf' .
    return $rc
}

for step in $STEPS; do
case $step in
env)
    run env bash -c 'nvidia-smi; nvidia-smi -q | grep -iE "clocks|MHz" | head -20; nvcc --version; uname -a; nproc'
    ;;
tiers)
    # Each tier with its own empty cache directory, so nothing leaks between them.
    C=$(mktemp -d)
    run tier-embedded env BONSAI_CACHE_DIR=$C/a "$BIN" kernels info
    run tier-nvrtc env BONSAI_CACHE_DIR=$C/b PATH=/usr/bin:/bin $BIN_PLAIN kernels info
    run tier-cache-hit env BONSAI_CACHE_DIR=$C/b PATH=/usr/bin:/bin $BIN_PLAIN kernels info
    for f in $C/b/kernels/*; do printf 'garbage' | dd of="$f" bs=1 seek=200 conv=notrunc 2>/dev/null; done
    run tier-corrupt-rebuilt env BONSAI_CACHE_DIR=$C/b PATH=/usr/bin:/bin $BIN_PLAIN kernels info
    run tier-nvcc env BONSAI_CACHE_DIR=$C/c $BIN_PLAIN kernels build --compiler nvcc
    run tier-nvcc-hit env BONSAI_CACHE_DIR=$C/c $BIN_PLAIN kernels info
    rm -rf "$C"
    ;;
verify)
    # VERIFY_ONLY=group,group limits the run to those check groups (bonsai kernels verify --only).
    run verify "$BIN" kernels verify ${VERIFY_ONLY:+--only "$VERIFY_ONLY"}
    ;;
bench)
    # BENCH_ONLY=group,group times only those bench groups (verify --only; e.g. decode_chain).
    run bench "$BIN" kernels verify --bench-only ${BENCH_ONLY:+--only "$BENCH_ONLY"}
    ;;
model)
    for g in bonsai-8b ternary-8b bonsai-4b bonsai-1.7b; do
        run "model-$g" "$BIN" bench --synthetic "$g" -p 512 -n 128 -r 5
    done
    run model-8b-depth "$BIN" bench --synthetic bonsai-8b -p 0 -n 128 -r 3 --ctx-depth 8192,32768
    run model-8b-nograph env BONSAI_NO_GRAPH=1 "$BIN" bench --synthetic bonsai-8b -p 0 -n 128 -r 3
    # Programmatic dependent launch: by default only in the decode graph (launch_ex.rs); 0 = none,
    # 1 = every launch (prefill too).
    run model-8b-nopdl env BONSAI_PDL=0 "$BIN" bench --synthetic bonsai-8b -p 512 -n 128 -r 5
    run model-8b-pdl-all env BONSAI_PDL=1 "$BIN" bench --synthetic bonsai-8b -p 512 -n 128 -r 5
    run model-ternary-8b-nopdl env BONSAI_PDL=0 "$BIN" bench --synthetic ternary-8b -p 512 -n 128 -r 5
    # The CUDA-core prefill attention (the tensor-core one is the default since 2026-11-30) and
    # the bf16 one-token GEMV (the binary one is the default).
    run model-8b-prefill-split-keys env BONSAI_PREFILL_ATTENTION=split_keys "$BIN" bench --synthetic bonsai-8b -p 512 -n 0 -r 5
    run model-8b-gemv-tc env BONSAI_GEMV=tc "$BIN" bench --synthetic bonsai-8b -p 0 -n 128 -r 5
    ;;
headline)
    # The README's figures only: pp512 + tg128 of Bonsai-8B and Ternary-8B (the model step has more).
    for g in bonsai-8b ternary-8b; do
        run "headline-$g" "$BIN" bench --synthetic "$g" -p 512 -n 128 -r 3
    done
    ;;
check)
    # Convert with the carried binary (no Python needed), then compare CPU and GPU.
    for fmt in q1 tq2; do
        # Each golden checkpoint in its own format (convert's default type is q1_0).
        type=q1_0; [ "$fmt" = tq2 ] && type=tq2_0_g128
        run "convert-$fmt" "$BIN" convert "tests/golden/$fmt" -o "$LOGS/golden-$fmt.gguf" --type "$type"
        run "check-$fmt" "$BIN" check -m "$LOGS/golden-$fmt.gguf" -n 64
        run "check-$fmt-nograph" env BONSAI_NO_GRAPH=1 "$BIN" check -m "$LOGS/golden-$fmt.gguf" -n 64
        run "check-$fmt-pdl-all" env BONSAI_PDL=1 "$BIN" check -m "$LOGS/golden-$fmt.gguf" -n 64
    done
    # Real geometries (random weights): the GPU's real-shape kernels against the CPU.
    for g in bonsai-8b ternary-8b; do
        run "check-synthetic-$g" "$BIN" check --synthetic "$g" -n 16
    done
    run check-synthetic-bonsai-8b-prefill-split-keys env BONSAI_PREFILL_ATTENTION=split_keys "$BIN" check --synthetic bonsai-8b -n 16
    run check-synthetic-bonsai-8b-gemv-tc env BONSAI_GEMV=tc "$BIN" check --synthetic bonsai-8b -n 16
    ;;
lab)
    # The decode GEMV lab (scripts/lab): every variant checked against f64 and timed vs copy.
    mkdir -p "$LOGS/lab"
    run lab env OUT="$LOGS/lab" bash scripts/lab/run.sh
    ;;
mmarate)
    # Issue rate of the mma.sync kinds a decode GEMV could use, and the b1 fragment layout check.
    mkdir -p "$LOGS/lab"
    run mma-rate bash -c "nvcc -O3 -arch=sm_90 -o $LOGS/lab/mma_rate scripts/lab/mma_rate.cu && $LOGS/lab/mma_rate"
    ;;
chain)
    # What a persistent decode kernel could reach: grid barriers and weight streaming (lab).
    mkdir -p "$LOGS/lab"
    run persistent-chain bash -c "nvcc -O3 -arch=sm_90 -o $LOGS/lab/persistent_chain scripts/lab/persistent_chain.cu && $LOGS/lab/persistent_chain"
    ;;
locality-lab)
    # Is the binary GEMV's weight stream bound by its DRAM access pattern? 64 B per row per unit
    # (the Q1 layout) against 128 B (Q2) and 1 KB-contiguous units, same loads and ring (lab header).
    mkdir -p "$LOGS/lab"
    run dram-locality bash -c "nvcc -O3 -arch=sm_90 -o $LOGS/lab/dram_locality scripts/lab/dram_locality.cu && $LOGS/lab/dram_locality"
    ;;
owner-lab)
    # Could GEMV CTAs quantize their own output groups (no prepare launch)? Streaming bandwidth with
    # N SMs and the spread of CTA ends, a cluster-of-4 DSMEM epilogue against the global-counter
    # one, how many clusters of each shape fit at once and two DSMEM exchanges' cost (lab header).
    mkdir -p "$LOGS/lab"
    run owner-groups bash -c "nvcc -O3 -arch=sm_90 -o $LOGS/lab/owner_groups scripts/lab/owner_groups.cu && $LOGS/lab/owner_groups"
    ;;
decode-chain)
    # How a decode layer's tail runs (BONSAI_DECODE_CHAIN = ops | attn_planes | planes | chain;
    # backend/cuda/tail.rs; the chain is measured with DECODE_CHAIN_MODES="... chain"), and
    # CPU-vs-GPU checks of the default and of `planes`.
    for mode in ${DECODE_CHAIN_MODES:-ops attn_planes planes}; do
        run "tail-$mode-8b" env BONSAI_DECODE_CHAIN=$mode "$BIN" bench --synthetic bonsai-8b -p 0 -n 128 -r 3
        run "tail-$mode-ternary-8b" env BONSAI_DECODE_CHAIN=$mode "$BIN" bench --synthetic ternary-8b -p 0 -n 128 -r 3
    done
    for g in bonsai-8b ternary-8b; do
        run "tail-check-$g" "$BIN" check --synthetic "$g" -n 16
    done
    run planes-check-bonsai-8b env BONSAI_DECODE_CHAIN=planes "$BIN" check --synthetic bonsai-8b -n 16
    ;;
trace)
    # The decode graph's timeline on the GPU clock (BONSAI_TRACE=1: per kernel the time from its
    # griddep_wait release to the next kernel's, and how early it started; over 8 replays, each
    # kernel's median and range; the traced library is compiled at run time with the hooks, so
    # the first run takes ~80 s).
    for g in bonsai-8b ternary-8b; do
        run "trace-$g" env BONSAI_TRACE=1 BONSAI_TRACE_REPLAYS=8 "$BIN" bench --synthetic "$g" -p 0 -n 64 -r 1
    done
    run trace-bonsai-8b-depth8192 env BONSAI_TRACE=1 "$BIN" bench --synthetic bonsai-8b -p 0 -n 64 -r 1 --ctx-depth 8192
    # Plus every CTA's end of the binary GEMVs and prepares (the CTA table; one atomic per CTA).
    run trace-cta-bonsai-8b env BONSAI_TRACE=cta "$BIN" bench --synthetic bonsai-8b -p 0 -n 64 -r 1
    ;;
probe)
    # What one empty dependent step costs the decode graph (BONSAI_PROBE_STEPS=N empty launches per
    # layer, tail.rs): tg128 with 0, 1, 4 probes per layer, alternating.
    for n in 0 4 1 0 4; do
        run "probe-tg-bonsai-8b-$n" env BONSAI_PROBE_STEPS=$n "$BIN" bench --synthetic bonsai-8b -p 0 -n 128 -r 3
    done
    ;;
timeline)
    # The GEMV's per-phase timeline, the read floor and the pre-staged-x variant (one minute).
    mkdir -p "$LOGS/lab"
    run lab-timeline env OUT="$LOGS/lab" bash scripts/lab/run.sh --timeline
    ;;
gemm-profile)
    # Where a Bonsai-8B pp512 prefill goes now (each kernel alone), then the wgmma GEMMs' stall
    # reasons and speed-of-light sections.
    NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
    run profile-prefill-bonsai-8b "$NCU" --clock-control none --metrics gpu__time_duration.sum \
        --launch-skip 400 --launch-count 400 "$BIN" bench --synthetic bonsai-8b -p 512 -n 0 -r 1
    run profile-wgmma-stalls "$NCU" --clock-control none -k "regex:gemm_wgmma" --launch-skip 8 \
        --launch-count 4 --section WarpStateStats --section SpeedOfLight --section Occupancy --section MemoryWorkloadAnalysis \
        --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active" \
        "$BIN" bench --synthetic bonsai-8b -p 512 -n 0 -r 1
    ;;
image-profile)
    # Nsight Compute on the image model's two wgmma kernels at their largest shapes (joint attention
    # h24 seq 4608, gemm_f32 4608 x 27648 x 3072): speed of light, warp stalls, tensor-pipe activity.
    NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
    run profile-image-wgmma "$NCU" --clock-control none -k "regex:joint_attention_hd128_wgmma|gemm_f32_3xtf32_wgmma" \
        --launch-count 2 --section WarpStateStats --section SpeedOfLight --section Occupancy --section MemoryWorkloadAnalysis \
        --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,regex:sm__pipe_tensor_op_(hmma|gmma)_cycles_active.avg.pct_of_peak_sustained_active" \
        "$BIN" kernels image-compare --dump "$(mktemp -d)" --cases joint_attention_h24_seq4608_hd128,gemm_f32_m4608_n27648_k3072
    ;;
profile)
    # Per-kernel time of ungraphed decode steps (Nsight Compute serializes launches, so this is
    # each kernel alone, launch gaps excluded), then the stall reasons of the decode GEMV.
    NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
    for g in bonsai-8b bonsai-1.7b; do
        run "profile-decode-$g" env BONSAI_NO_GRAPH=1 "$NCU" --clock-control none --metrics gpu__time_duration.sum \
            --launch-skip 600 --launch-count 240 "$BIN" bench --synthetic "$g" -p 0 -n 8 -r 1
    done
    # One Bonsai-8B pp512 prefill (bench warms up first, so skip its launches; each kernel alone).
    run profile-prefill-bonsai-8b "$NCU" --clock-control none --metrics gpu__time_duration.sum \
        --launch-skip 400 --launch-count 400 "$BIN" bench --synthetic bonsai-8b -p 512 -n 0 -r 1
    run profile-gemv-stalls env BONSAI_NO_GRAPH=1 "$NCU" --clock-control none -k "regex:gemv_(b1|tc)" --launch-skip 40 \
        --launch-count 4 --section WarpStateStats --section SpeedOfLight --section Occupancy \
        --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
        "$BIN" bench --synthetic bonsai-8b -p 0 -n 8 -r 1
    ;;
variants)
    # Compile-time variants (`#ifdef NAME` in a kernel) against the default, all compiled by this
    # machine's nvcc (the default too: BONSAI_SKIP_EMBEDDED=1) through BONSAI_KERNEL_DEFINES:
    # VARIANTS="base NAME NAME1,NAME2 ..." (base = no define). The caches (plain and traced) are
    # built in parallel first; then verify of VARIANT_VERIFY groups (default matmul) at
    # VARIANT_SHAPES (all or small; matmul at all shapes takes over 200 s per variant) and the
    # synthetic check under each non-base variant, tg128 alternating (VARIANT_ROUNDS, default 2),
    # and one traced run of each.
    # A variant may add run-time knobs after a colon: "NAME:KNOB=V,KNOB=V" (e.g.
    # "base:BONSAI_DECODE_CHAIN=planes"); its defines are the part before the colon.
    VARIANTS=${VARIANTS:?variants: set VARIANTS}
    defs() { local d=${1%%:*}; [ "$d" = base ] && echo "" || echo "$d"; }
    knobs() { [ "${1#*:}" = "$1" ] && echo "" || { local k=${1#*:}; echo "${k//,/ }"; }; }
    # The environment assignments of variant $1 (for `env $(venv V) CMD`; no value has spaces).
    venv() { echo "BONSAI_SKIP_EMBEDDED=1 BONSAI_KERNEL_DEFINES=$(defs "$1") $(knobs "$1")"; }
    for d in $(for v in $VARIANTS; do echo "${v%%:*}"; done | sort -u); do
        env BONSAI_SKIP_EMBEDDED=1 BONSAI_KERNEL_DEFINES="$(defs $d)" "$BIN" kernels build --compiler nvcc >"$LOGS/build-$d.log" 2>&1 &
        env BONSAI_TRACE=1 BONSAI_SKIP_EMBEDDED=1 BONSAI_KERNEL_DEFINES="$(defs $d)" "$BIN" kernels build --compiler nvcc >"$LOGS/build-trace-$d.log" 2>&1 &
        [ -z "${VARIANT_TRACE_DEPTH:-}" ] || env BONSAI_TRACE=cta BONSAI_SKIP_EMBEDDED=1 BONSAI_KERNEL_DEFINES="$(defs $d)" \
            "$BIN" kernels build --compiler nvcc >"$LOGS/build-trace-cta-$d.log" 2>&1 &
    done
    wait
    for v in $VARIANTS; do
        [ "$v" = base ] && continue
        if [ -n "$(defs "$v")" ]; then
            run "variant-verify-$v" env $(venv "$v") "$BIN" kernels verify --only "${VARIANT_VERIFY:-matmul}" --shapes "${VARIANT_SHAPES:-all}"
        fi
        for g in ${VARIANT_MODELS:-bonsai-8b}; do
            run "variant-check-$g-$v" env $(venv "$v") "$BIN" check --synthetic "$g" -n 16
        done
    done
    for r in $(seq "${VARIANT_ROUNDS:-2}"); do
        for g in bonsai-8b ternary-8b; do
            for v in $VARIANTS; do
                run "variant-$g-$v-$r" env $(venv "$v") "$BIN" bench --synthetic "$g" -p 0 -n 128 -r 3
            done
        done
    done
    # VARIANT_DEPTH (e.g. 8192,32768): also Bonsai-8B decode at those context depths, once each.
    if [ -n "${VARIANT_DEPTH:-}" ]; then
        for v in $VARIANTS; do
            run "variant-depth-$v" env $(venv "$v") "$BIN" bench --synthetic bonsai-8b -p 0 -n 128 -r 1 --ctx-depth "$VARIANT_DEPTH"
        done
    fi
    for g in ${VARIANT_MODELS:-bonsai-8b}; do
        for v in $VARIANTS; do
            run "variant-trace-$g-$v" env $(venv "$v") BONSAI_TRACE=1 BONSAI_TRACE_REPLAYS=8 "$BIN" bench --synthetic "$g" -p 0 -n 64 -r 1
        done
    done
    # VARIANT_TRACE_DEPTH (e.g. 8192): each variant's CTA-end trace (BONSAI_TRACE=cta) at that depth.
    if [ -n "${VARIANT_TRACE_DEPTH:-}" ]; then
        for v in $VARIANTS; do
            run "variant-trace-cta-depth-$v" env $(venv "$v") BONSAI_TRACE=cta "$BIN" bench --synthetic bonsai-8b -p 0 -n 64 -r 1 \
                --ctx-depth "$VARIANT_TRACE_DEPTH"
        done
    fi
    ;;
knobs)
    # Run-time measurement knobs against the default, on the production kernels: KNOBS="A=1
    # B=2,C=0 ..." (each item one setting, its assignments comma-separated). Per setting the
    # synthetic check, then tg128 of both 8B models alternating with the default (KNOB_ROUNDS,
    # default 2), then one traced run of each.
    KNOBS=${KNOBS:?knobs: set KNOBS}
    for k in $KNOBS; do
        run "knob-check-$k" env ${k//,/ } "$BIN" check --synthetic bonsai-8b -n 16
    done
    for r in $(seq "${KNOB_ROUNDS:-2}"); do
        for g in bonsai-8b ternary-8b; do
            run "knob-$g-default-$r" "$BIN" bench --synthetic "$g" -p 0 -n 128 -r 3
            for k in $KNOBS; do
                run "knob-$g-$k-$r" env ${k//,/ } "$BIN" bench --synthetic "$g" -p 0 -n 128 -r 3
            done
        done
    done
    # KNOB_TRACE=0 skips the traces (~100 s each).
    [ "${KNOB_TRACE:-1}" = 1 ] && for k in $KNOBS; do
        run "knob-trace-$k" env BONSAI_TRACE=1 BONSAI_TRACE_REPLAYS=8 ${k//,/ } "$BIN" bench --synthetic bonsai-8b -p 0 -n 64 -r 1
    done
    ;;
graph-stalls)
    # One decode graph replay profiled as one workload (--graph-profiling graph: kernels overlap as
    # in production, caches and clocks untouched): warp-state and scheduler statistics summed over
    # all its kernels (raw page -> scripts/ncu-stall-shares.py), and per-instruction warp samples
    # (source page -> scripts/ncu-source-summary.py, per kernel). Question (kernel-notes round 23):
    # where do the decode kernels' warps wait, inside the graph as it runs?
    NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
    run graph-stalls "$NCU" --graph-profiling graph --clock-control none --cache-control none \
        --launch-skip 40 --launch-count 1 --section WarpStateStats --section SchedulerStats \
        --section InstructionStats --section SourceCounters -o "$LOGS/graph-stalls" \
        "$BIN" bench --synthetic bonsai-8b -p 0 -n 64 -r 1
    run graph-stalls-details "$NCU" --import "$LOGS/graph-stalls.ncu-rep" --page details
    run graph-stalls-raw "$NCU" --import "$LOGS/graph-stalls.ncu-rep" --page raw --csv
    run graph-stalls-shares python3 scripts/ncu-stall-shares.py "$LOGS/graph-stalls-raw.log"
    run graph-stalls-sass bash -c "'$NCU' --import '$LOGS/graph-stalls.ncu-rep' --page source --print-source sass --csv > '$LOGS/graph-stalls-sass.csv'"
    run graph-stalls-summary python3 scripts/ncu-source-summary.py "$LOGS/graph-stalls-sass.csv" 4
    ;;
gemv-stalls)
    # Where the binary GEMV's warps wait, per SASS instruction (Nsight Compute's warp-state
    # sampling), for Bonsai-8B's gate_up and one Add GEMV (the 21st `_add_gemv_b1_early` launch:
    # attn_out in the run of 2026-11-30), each launched alone (ncu serializes launches): the
    # sections as text, the source page as CSV (one row per SASS instruction with its samples).
    # STALL_KERNELS / STALL_SKIP pick other kernels (e.g. STALL_KERNELS=matmul_q1_gemv_b1_tiles
    # STALL_SKIP=4: the LM head, launched once per token).
    NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
    for k in ${STALL_KERNELS:-gate_up_swiglu_q1_gemv_b1 matmul_q1_add_gemv_b1_early}; do
        run "stalls-$k" env BONSAI_NO_GRAPH=1 "$NCU" --clock-control none -k "regex:^$k\$" --launch-skip "${STALL_SKIP:-20}" \
            --launch-count 1 --import-source no --section SourceCounters --section WarpStateStats \
            --section SpeedOfLight --section MemoryWorkloadAnalysis --section SchedulerStats \
            --section InstructionStats --section Occupancy -o "$LOGS/stalls-$k" \
            "$BIN" bench --synthetic bonsai-8b -p 0 -n 8 -r 1
        run "stalls-$k-details" "$NCU" --import "$LOGS/stalls-$k.ncu-rep" --page details
        run "stalls-$k-sass" bash -c "'$NCU' --import '$LOGS/stalls-$k.ncu-rep' --page source --print-source sass --csv > '$LOGS/stalls-$k-sass.csv'; head -c 3000 '$LOGS/stalls-$k-sass.csv'"
        run "stalls-$k-summary" python3 scripts/ncu-source-summary.py "$LOGS/stalls-$k-sass.csv" 30
    done
    ;;
golden)
    run golden env PYTHONUNBUFFERED=1 python3 scripts/reference/make_golden.py --out "$OUT/golden"
    ;;
image)
    DUMP=${IMAGE_DUMP:-$(mktemp -d)}
    mkdir -p "$OUT/image"
    STEP_TIMEOUT=${IMAGE_TIMEOUT:-900} run image-compare "$BIN" kernels image-compare --dump "$DUMP" \
        ${IMAGE_CASES:+--cases "$IMAGE_CASES"}
    cp "$DUMP/manifest.json" "$OUT/image/" 2>/dev/null
    STEP_TIMEOUT=${IMAGE_TIMEOUT:-900} run image-torch env PYTHONUNBUFFERED=1 python3 scripts/reference/image_torch.py \
        "$DUMP" --json "$OUT/image/image_torch.json"
    [ -n "${IMAGE_DUMP:-}" ] || rm -rf "$DUMP"   # a folder the caller named is kept
    ;;
*)
    echo "unknown step: $step" >&2; status=1 ;;
esac
done
rm -f "$LOGS"/*.gguf
tar czf "$OUT/logs.tgz" -C "$LOGS" .
echo "=== done: status=$status" | tee -a "$OUT/summary.log"
exit $status

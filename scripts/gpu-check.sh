#!/usr/bin/env bash
# The one script a GPU run executes. Builds nothing: it runs the binaries carried in .gpu/
# (scripts/build-gpu-bundle.sh) and writes every log into the folder it is given.
#
#   scripts/gpu-check.sh OUT_DIR [STEP...]
#
# Steps (default: env verify check model):
#   env       device facts (nvidia-smi, driver, nvcc)
#   tiers     the four kernel-library load tiers and a corrupted cache entry, with timings
#   verify    bonsai kernels verify: every CUDA op against its CPU reference (VERIFY_SHAPES=small
#             for the small set; VERIFY_ONLY=group,group for some groups)
#   bench     bonsai kernels verify --bench-only: per-kernel time against the copy ceiling
#   check     bonsai check (CPU vs GPU: greedy tokens, logits, perplexity) on both golden
#             checkpoints, the Bonsai-8B and Ternary-8B geometries and the test geometries
#             (GQA groups 1/3/4/5/8, head_dim 64/128/256; CHECK_SYNTHETIC="a b" names others, and
#             CHECK_GOLDEN=0 skips the golden ones)
#   model     bonsai bench -v on the synthetic geometries (pp512 + tg128), decode at depth
#   headline  pp512 + tg128 of Bonsai-8B and Ternary-8B (the README's figures)
#   ab        the same call's A/B of .gpu/bonsai-base (the commit before a change) against
#             .gpu/bonsai: the headline geometries alternating AB_ROUNDS times (default 3), then
#             decode after 8,192 cached tokens, each binary
#   image     bonsai kernels image-compare, then scripts/reference/image_torch.py (PyTorch on the
#             GPU: truth, error and time of every Bonsai-Image op). IMAGE_CASES=a,b limits the
#             cases; the raw dump (several GB) goes to IMAGE_DUMP or a temporary folder
#   golden    scripts/reference/make_golden.py (torch + transformers) into OUT_DIR/golden
#   batch     the batched decode step (bench --batch, Bonsai-8B geometry) of .gpu/bonsai-base (if
#             present; BASE_BATCH_SIZES) and .gpu/bonsai (BATCH_SIZES), then one traced replay of the
#             new one's step of TRACE_BATCH (default 64) sequences
#   serve     bonsai bench serve against bonsai serve on the Bonsai-8B geometry (1, 16, 64 and 256
#             streams of 512 prompt + 128 generated tokens) and Ternary-8B (64 streams), after
#             bench's own tg128 of the same geometry, from empty and after 512 cached tokens;
#             SERVE_STREAMS / SERVE_NP override
set -uo pipefail
OUT=${1:?usage: gpu-check.sh OUT_DIR [STEP...]}
shift
STEPS=${*:-env verify check model}
# Step logs go to $LOGS and are packed into one $OUT/logs.tgz after every step; $OUT/summary.log
# holds each step's status and the tail of its log.
LOGS=$(mktemp -d)
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
BIN=$PWD/.gpu/bonsai                 # built with nvcc present: embedded SASS
BASE=$PWD/.gpu/bonsai-base           # the `ab` step's baseline
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
    run tier-nvrtc env BONSAI_CACHE_DIR=$C/b BONSAI_NVCC=off "$BIN" --kernel-config embedded=off kernels info
    run tier-cache-hit env BONSAI_CACHE_DIR=$C/b BONSAI_NVCC=off "$BIN" --kernel-config embedded=off kernels info
    for f in $C/b/kernels/*; do printf 'garbage' | dd of="$f" bs=1 seek=200 conv=notrunc 2>/dev/null; done
    run tier-corrupt-rebuilt env BONSAI_CACHE_DIR=$C/b BONSAI_NVCC=off "$BIN" --kernel-config embedded=off kernels info
    run tier-nvcc env BONSAI_CACHE_DIR=$C/c "$BIN" kernels build --compiler nvcc
    run tier-nvcc-hit env BONSAI_CACHE_DIR=$C/c "$BIN" --kernel-config embedded=off kernels info
    rm -rf "$C"
    ;;
verify)
    run verify "$BIN" kernels verify --shapes "${VERIFY_SHAPES:-all}" ${VERIFY_ONLY:+--only "$VERIFY_ONLY"}
    ;;
bench)
    run bench "$BIN" kernels verify --bench-only ${BENCH_ONLY:+--only "$BENCH_ONLY"}
    ;;
check)
    # Convert with the carried binary (no Python needed), then compare CPU and GPU.
    for fmt in $([ "${CHECK_GOLDEN:-1}" = 1 ] && echo q1 tq2); do
        type=q1_0; [ "$fmt" = tq2 ] && type=pq2_0
        run "convert-$fmt" "$BIN" convert "tests/golden/$fmt" -o "$LOGS/golden-$fmt.gguf" --type "$type"
        run "check-$fmt" "$BIN" check -m "$LOGS/golden-$fmt.gguf" -n 64
        run "check-$fmt-nograph" "$BIN" --kernel-config graphs=off check -m "$LOGS/golden-$fmt.gguf" -n 64
    done
    for g in ${CHECK_SYNTHETIC:-bonsai-8b ternary-8b g1-hd64 g3-hd128 g4-hd256 g5-hd128 g8-hd64 tiny-q2}; do
        run "check-$g" "$BIN" check --synthetic "$g" -n 16
    done
    ;;
model)
    for g in bonsai-8b ternary-8b bonsai-4b bonsai-1.7b; do
        run "model-$g" "$BIN" bench -v --synthetic "$g" -p 512 -n 128 -r 5
    done
    run model-8b-depth "$BIN" bench --synthetic bonsai-8b -p 0 -n 128 -r 3 --ctx-depth 8192,32768
    run model-8b-nograph "$BIN" --kernel-config graphs=off bench --synthetic bonsai-8b -p 0 -n 128 -r 3
    ;;
headline)
    for g in bonsai-8b ternary-8b; do
        run "headline-$g" "$BIN" bench --synthetic "$g" -p 512 -n 128 -r 3
    done
    ;;
ab)
    [ -x "$BASE" ] || { echo "ab: no $BASE (build it from the baseline commit)" | tee -a "$OUT/summary.log"; status=1; continue; }
    for round in $(seq "${AB_ROUNDS:-3}"); do
        for g in bonsai-8b ternary-8b; do
            run "ab-base-$g-$round" "$BASE" bench --synthetic "$g" -p 512 -n 128 -r 3 --json
            run "ab-new-$g-$round" "$BIN" bench --synthetic "$g" -p 512 -n 128 -r 3 --json
        done
    done
    run ab-base-depth "$BASE" bench --synthetic bonsai-8b -p 0 -n 128 -r 3 --ctx-depth 8192 --json
    run ab-new-depth "$BIN" bench --synthetic bonsai-8b -p 0 -n 128 -r 3 --ctx-depth 8192 --json
    ;;
batch)
    if [ -x "$BASE" ]; then
        run batch-base "$BASE" bench --synthetic bonsai-8b -p 0 -n 64 -r 2 --batch "${BASE_BATCH_SIZES:-16,64}"
    fi
    run batch-new "$BIN" bench --synthetic bonsai-8b -p 0 -n 64 -r 2 --batch "${BATCH_SIZES:-8,16,32,64,128}"
    run batch-trace "$BIN" --kernel-config trace=kernels bench -v --synthetic bonsai-8b -p 0 -n 32 -r 1 --batch "${TRACE_BATCH:-64}"
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
serve)
    # One server per geometry; bench serve targets it with each stream count in turn.
    for g in ${SERVE_MODELS:-bonsai-8b ternary-8b}; do
        run "serve-tg-$g" "$BIN" bench --synthetic "$g" -p 0 -n 128 -r 3
        # A served stream decodes after its 512-token prompt: bench's decode at that depth.
        run "serve-tg-depth-$g" "$BIN" bench --synthetic "$g" -p 0 -n 128 -r 3 --ctx-depth 512
        log=$LOGS/serve-server-$g.log
        "$BIN" serve --synthetic "$g" --port 0 -np "${SERVE_NP:-64}" --ctx 1024 -b "${SERVE_BATCH:-512}" >"$log" 2>&1 &
        pid=$!
        for _ in $(seq 600); do grep -q "http://" "$log" && break; sleep 0.2; done
        url=$(grep -o "http://[0-9.:]*" "$log" | head -1)
        streams=${SERVE_STREAMS:-1 16 64 256}
        [ "$g" = bonsai-8b ] || streams=${SERVE_STREAMS_OTHER:-64}
        for n in $streams; do
            run "serve-$g-$n" "$BIN" bench serve --url "$url" --streams "$n" -p 512 -n 128 --json
        done
        curl -s "$url/metrics" >"$LOGS/serve-metrics-$g.txt" 2>/dev/null
        kill $pid; wait $pid 2>/dev/null
    done
    ;;
golden)
    run golden env PYTHONUNBUFFERED=1 python3 scripts/reference/make_golden.py --out "$OUT/golden"
    ;;
*)
    echo "unknown step: $step" >&2; status=1 ;;
esac
done
rm -f "$LOGS"/*.gguf
tar czf "$OUT/logs.tgz" -C "$LOGS" .
echo "=== done: status=$status" | tee -a "$OUT/summary.log"
exit $status

// Decode attention (one query token, m == 1) over the f16 KV cache: `attention_decode_g{G}_hd{HD}`,
// one entry point per GQA group G = n_q / n_kv and head_dim HD (both compile-time, so the per-lane
// state lives in registers). Same result as attention_split_keys at m == 1 (reference.rs).
//
// Grid (n_kv, n_splits) x ATT_DEC_WARPS warps, fixed by the launcher from the SM count (about one
// CTA per SM: 8 warps of ~240 registers fill a register file), independent of the live length,
// so a captured decode graph serves every position.
// Each CTA reads pos0 from the device and takes keys [split * keys_per_split, +keys_per_split) of
// the len = pos0 + 1 live ones, keys_per_split = max(ceil(len / n_splits), min_split_keys)
// rounded up to ATT_DEC_SPLIT_ALIGN: short contexts use few CTAs (up to min_split_keys = 128
// tokens one per kv head, no merge), long ones all of them. CTAs past the last used split exit at
// once. In the traced decode graph this beat an even share of 16-key splits, and reading pos0 and
// the older cache rows before griddep_wait (attention_decode_body) with the planes quantized from
// shared memory cut it further (docs/kernel-notes.md, "Decode attention").
// Inside a CTA: all G q heads of the kv head, so K/V are read once. A warp takes steps of
// ATT_DEC_STEP_KEYS keys (warp w: steps w, w + WARPS, ...): HD / D lanes share one key, each
// holding D dims (D = 16 for G <= ATT_DEC_WIDE_MAX_GROUP, two 16-byte loads of K and two of V per
// key, else 8 to bound registers), so a warp loads WARP_SIZE * D / HD keys at a time; the next
// step's loads are issued before this step's math. Wider lanes mean fewer shuffle levels per
// score and fewer exps per lane (16 dims: 3 levels at HD 128, not 4). Scores are
// partial dots reduced over the key's lanes with shuffles (G independent chains per key, no long
// dependent loop); each warp keeps an online softmax per head in the log2 domain (q pre-scaled by
// log2(e) / sqrt(HD), exp2 on the SFU). Warps combine through shared memory; a CTA writes one
// partial [max, sum, acc[HD]] per (head, split), or the final output when it is the only split.
// The last CTA per kv head (self-resetting counter, as in attention.cu) merges the <= 32 partials
// of its G heads with all threads in parallel over (head, dim).
// A position >= max_seq yields NaN output.
// The cache is paged (prelude.cuh): pools [blocks][n_kv][KV_BLOCK][HD], position j in block
// block_table[j / KV_BLOCK]. A warp step's keys start at a multiple of the step (8 or 4 keys,
// dividing KV_BLOCK) and so are consecutive rows of one block: each lane reads the step's table
// entry once (an L1 broadcast; the table is host-written, so the first step's is read before
// griddep_wait too), then issues the step's 16-byte loads from that block as before.
//
// Speed of light on the H200 (Bonsai-8B: n_kv 8, G 4, HD 128, 132 CTAs -> n_splits 16):
// bytes read = 2 (K, V) * n_kv * len * HD * 2 = 4 KiB per cached token per layer, at 4.8 TB/s,
// plus the block table's 4 bytes per 64 tokens per CTA (L2/L1 hits, negligible next to it):
//   len 16:    64 KiB  -> 0.01 us; the floor is latency: the launch, pos0 + q loads and one K/V
//              round trip, no partial or merge (one split).
//   len 8192:  33.5 MB -> 7.0 us, plus the merge (fence, atomic, re-read of 32 partials).
//   len 32768: 134 MB  -> 28 us; the issue-bound floor (about 66 warp instructions per key: ~530
//              SASS per 8-key warp step at G 4) stays below it.
// Bonsai 2 27B (n_kv 4, G 6, HD 256 -> n_splits 32, 128 CTAs): also 4 KiB per cached token.
//   len 40:    one CTA per kv head, no merge; the floor is latency plus each warp's one or two
//              4-key steps (below).
//   len 32768: 134 MB -> 28 us. Issue: a warp's 4-key step is ~620 instructions (192 FMA for the
//              dots, 192 for V, 32 unpacks of K and of V, att_dec_warp_sums' 51 shuffles and ~50
//              selects and adds, 24 exp2): 32,768 warp steps, 20M warp instructions, over 128
//              CTAs of 8 warps ~40k issue cycles per scheduler = ~20 us at 1.98 GHz, under the
//              stream's time.
// Measured against it: docs/kernel-notes.md, "Decode attention".
#define ATT_DEC_WARPS 8
#define ATT_DEC_MAX_SPLITS 32
#define ATT_DEC_SPLIT_ALIGN 16
#define ATT_DEC_STEP_KEYS 8
// Most static shared memory the warps' accumulators take at once (see ACC_PASSES).
#define ATT_DEC_WARP_ACC_BYTES 32768
// f16 values in one 16-byte load.
#define ATT_DEC_HALVES_PER_VEC 8
// Largest G whose lanes hold 16 dims of a key (q and acc: 2 * G * 16 registers).
#define ATT_DEC_WIDE_MAX_GROUP 4
#define ATT_DEC_LOG2E 1.4426950408889634f

// 8 f16 of a 16-byte load to f32.
__device__ __forceinline__ void att_dec_unpack(uint4 raw, float* f) {
    const u32 w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        f[2 * i] = f16_to_f32((u16)(w[i] & 0xffffu));
        f[2 * i + 1] = f16_to_f32((u16)(w[i] >> 16));
    }
}

// One level of att_dec_warp_sums' halvings: of the CARRIED values v[0 .. CARRIED) a lane keeps
// the lower half where its `offset` bit is clear, the upper half where it is set, and adds the
// partner lane's (lane ^ offset) copy of that half, into v[0 .. CARRIED / 2).
template <int N, int CARRIED>
__device__ __forceinline__ void att_dec_halve(float (&v)[N], int lane, int offset) {
    // All ones where this lane keeps the upper half. The halves are picked with bit masks: a
    // conditional choice between two elements compiled to a computed address, which put the
    // array in local memory.
    const u32 upper = (lane & offset) != 0 ? 0xffffffffu : 0u;
#pragma unroll
    for (int i = 0; i < CARRIED / 2; ++i) {
        const u32 low = __float_as_uint(v[i]), high = __float_as_uint(v[i + CARRIED / 2]);
        const float keep = __uint_as_float((low & ~upper) | (high & upper));
        const float give = __uint_as_float((high & ~upper) | (low & upper));
        v[i] = keep + __shfl_xor_sync(FULL_MASK, give, offset);
    }
}

// Each v[r][c] becomes its sum over the warp's 32 lanes, for N = ROWS * COLS values at once (the
// partial dots of a step's keys where a whole warp holds each key), value i being
// v[i / COLS][i % COLS]. The adds of every sum form the same depth-5
// butterfly tree as 5 xor-shuffle levels per value would, with fewer shuffles: the first
// HALVINGS levels each send half of the values a lane still carries (a lane with the level's bit
// set keeps the upper half), the remaining levels add the KEPT values left, and one shuffle per
// value broadcasts each sum from a lane that holds it. N = 24 (G 6, 4 keys): 12 + 6 + 3 + 2 * 3 +
// 24 = 51 shuffles instead of 5 * 24 = 120.
template <int ROWS, int COLS>
__device__ __forceinline__ void att_dec_warp_sums(float (&v2)[ROWS][COLS], int lane) {
    constexpr int N = ROWS * COLS;
    // A flat copy: indices stay compile-time constants once the loops unroll (registers).
    float v[N];
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] = v2[i / COLS][i % COLS];
    constexpr int HALVINGS = N % 8 == 0 ? 3 : N % 4 == 0 ? 2 : N % 2 == 0 ? 1 : 0;
    constexpr int KEPT = N >> HALVINGS;
    constexpr int BLOCK_SHIFT = 5 - HALVINGS;  // lane >> BLOCK_SHIFT: which KEPT values a lane holds
    // The levels of offsets 16, 8, 4 (each a template instance: its loop bound is a constant, so
    // every index is and v stays in registers).
    if constexpr (HALVINGS >= 1) att_dec_halve<N, N>(v, lane, WARP_SIZE / 2);
    if constexpr (HALVINGS >= 2) att_dec_halve<N, N / 2>(v, lane, WARP_SIZE / 4);
    if constexpr (HALVINGS >= 3) att_dec_halve<N, N / 4>(v, lane, WARP_SIZE / 8);
#pragma unroll
    for (int offset = (WARP_SIZE / 2) >> HALVINGS; offset > 0; offset >>= 1)
#pragma unroll
        for (int i = 0; i < KEPT; ++i) v[i] += __shfl_xor_sync(FULL_MASK, v[i], offset);
    // Lane (b << BLOCK_SHIFT) holds the sums of values b * KEPT .. + KEPT in v[0 .. KEPT).
    float kept[KEPT];
#pragma unroll
    for (int i = 0; i < KEPT; ++i) kept[i] = v[i];
#pragma unroll
    for (int b = 0; b < (1 << HALVINGS); ++b)
#pragma unroll
        for (int i = 0; i < KEPT; ++i) {
            const int at = b * KEPT + i;
            v2[at / COLS][at % COLS] = __shfl_sync(FULL_MASK, kept[i], b << BLOCK_SHIFT);
        }
}

// The G heads' partials of this CTA's `warps` warps (at most WARPS), combined: CTA-level
// max/sum/acc for (head h, dim d).
// `warp_acc` holds ROW_DIMS dims of each head (all HD, or one pass's share): d indexes them.
template <int G, int ROW_DIMS, int WARPS>
__device__ __forceinline__ float att_dec_combine_warps(float (*warp_max)[G], float (*warp_sum)[G],
                                                       float (*warp_acc)[G][ROW_DIMS], int warps, int h, int d,
                                                       float* cta_max, float* cta_sum) {
    float mx = neg_inf();
#pragma unroll
    for (int w = 0; w < WARPS; ++w) {
        if (w < warps) mx = fmaxf(mx, warp_max[w][h]);
    }
    float sum = 0.0f, value = 0.0f;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) {
        if (w < warps) {
            // A warp that had no keys holds max -inf, sum 0, acc 0: weight exp2(-inf) = 0.
            const float weight = exp2_ftz(warp_max[w][h] - mx);
            sum = fmaf(warp_sum[w][h], weight, sum);
            value = fmaf(warp_acc[w][h][d], weight, value);
        }
    }
    *cta_max = mx;
    *cta_sum = sum;
    return value;
}

// The `_planes` variants' epilogue: once this CTA's G * HD outputs (whole 128-groups at HD 128)
// are in `out_s` (shared memory: the same floats the CTA stored to `out`, without their L2 round
// trip), warp w of `warps` quantizes groups w, w + warps, ... of them into gemv_b1's planes,
// (s, X) and sum of squares (b1_prepare_group, matmul_gemv_b1.cu: the same arithmetic as
// gemv_b1_prepare on the same floats), at global group column * G * HD / 128 + w.
template <int G, int HD>
__device__ __forceinline__ void att_dec_write_planes(const float* out_s, int column, int warp, int warps,
                                                     u32* planes, u32* gsx, float* group_sq) {
    static_assert(HD % GROUP_SIZE == 0, "the planes variant needs whole 128-groups per head");
    constexpr int GROUPS = G * HD / GROUP_SIZE;
    __syncthreads();  // every thread's outputs are in out_s
    for (int local = warp; local < GROUPS; local += warps) {  // warp-uniform
        const long long group = (long long)column * GROUPS + local;
        b1_prepare_group(out_s + local * GROUP_SIZE, nullptr, planes + group * B1_GROUP_WORDS, gsx + 2 * group,
                         group_sq + group);
    }
}

// PLANES: also write the outputs' gemv_b1 planes (att_dec_write_planes; null pointers otherwise).
// Grid (columns, n_splits) of WARPS warps: column c takes q heads c * G .. + G, which read cache
// head c / REP. REP 1: a column is a kv head and its whole GQA group (G = n_q / n_kv). The `_heads`
// entry points take G = 1, REP = n_q / n_kv: a CTA per q head, four warps, the cache rows read
// by REP CTAs (L2 hits after the first) in exchange for a quarter of the math per warp, one group
// of planes per CTA, and a CTA small enough to share an SM with a GEMV CTA.
// RUNTIME_WARPS: the CTA has blockDim.x / 32 <= WARPS warps, chosen by the launcher (the batched
// kernels, decode_seqs.cu); shared memory is sized for WARPS.
template <int G, int HD, bool PLANES, int WARPS = ATT_DEC_WARPS, int REP = 1, bool RUNTIME_WARPS = false>
__device__ __forceinline__ void attention_decode_body(const float* __restrict__ qkv, const u32* __restrict__ pos0_ptr,
                                                      int max_seq, int n_kv, const u32* __restrict__ block_table,
                                                      const u16* __restrict__ k_cache,
                                                      const u16* __restrict__ v_cache, float* __restrict__ partial,
                                                      int n_splits, int min_split_keys, u32* __restrict__ counters,
                                                      float* __restrict__ out, u32* __restrict__ planes,
                                                      u32* __restrict__ gsx, float* __restrict__ group_sq) {
    // The `_heads` kernels (REP > 1) take the narrow lanes: their 96-register cap (an SM shared
    // with a GEMV CTA) does not hold the wide lanes' double-buffered rows without spilling.
    constexpr int D =
        G <= ATT_DEC_WIDE_MAX_GROUP && REP == 1 ? 2 * ATT_DEC_HALVES_PER_VEC : ATT_DEC_HALVES_PER_VEC;
    constexpr int VECS = D / ATT_DEC_HALVES_PER_VEC;  // 16-byte loads per key per lane
    constexpr int LANES_PER_KEY = HD / D;
    constexpr int KEYS_PER_LOAD = WARP_SIZE / LANES_PER_KEY;
    // Keys per warp step: ATT_DEC_STEP_KEYS, halved where a whole warp shares each key (narrow
    // lanes at HD 256, the groups over ATT_DEC_WIDE_MAX_GROUP): there a step is one 16-byte load
    // of K and of V per key and lane, and 8 keys' loads, double-buffered, next to the G heads' q,
    // acc and scores, would pass the 255-register cap.
    constexpr bool WHOLE_WARP_KEYS = LANES_PER_KEY == WARP_SIZE;
    constexpr int STEP_KEYS = WHOLE_WARP_KEYS ? ATT_DEC_STEP_KEYS / 2 : ATT_DEC_STEP_KEYS;
    constexpr int LOADS = STEP_KEYS / KEYS_PER_LOAD;
    static_assert(LOADS >= 1 && LOADS * KEYS_PER_LOAD == STEP_KEYS && LANES_PER_KEY * D == HD,
                  "HD must be 64, 128 or 256");
    static_assert(KV_BLOCK % STEP_KEYS == 0 && ATT_DEC_SPLIT_ALIGN % STEP_KEYS == 0,
                  "a warp step's keys must lie in one cache block");
    // The warps' accumulators meet in shared memory, in ACC_PASSES passes of PASS_DIMS dims each
    // where all HD at once would pass ATT_DEC_WARP_ACC_BYTES (G 6 at HD 256: 48 KiB, the static
    // shared memory limit).
    constexpr int ACC_PASSES = WARPS * G * HD * (int)sizeof(float) > ATT_DEC_WARP_ACC_BYTES ? 2 : 1;
    constexpr int PASS_DIMS = HD / ACC_PASSES;
    static_assert(PASS_DIMS % D == 0, "a lane's dims lie in one pass");
    __shared__ float warp_max_s[WARPS][G];
    __shared__ float warp_sum_s[WARPS][G];
    __shared__ __align__(16) float warp_acc_s[WARPS][G][PASS_DIMS];
    __shared__ float split_weight_s[G][ATT_DEC_MAX_SPLITS];
    __shared__ float head_total_s[G];
    __shared__ u32 is_last_s;
    __shared__ __align__(16) float out_s[PLANES ? G * HD : 1];  // the outputs, for the planes
    // The decode trace's phase marks of CTA 0 (BONSAI_TRACE builds only; nothing in production):
    // 1 released, 3 its warp 0's keys done, 4 every warp's partials in shared memory, 5 outputs
    // stored, 6 planes stored (at short contexts one CTA per kv head; with split keys CTA 0
    // records 5 and 6 only where it is the kv head's last CTA and merges).
    TRACE_MARKS_BEGIN;

    const int column = blockIdx.x;  // q heads column * G .. + G (a kv head's group where REP is 1)
    const int cache_head = column / REP;
    const int split = blockIdx.y;
    const int lane = threadIdx.x % WARP_SIZE;
    const int warp = threadIdx.x / WARP_SIZE;
    const int warps = RUNTIME_WARPS ? (int)blockDim.x / WARP_SIZE : WARPS;
    // Before griddep_wait (the entry points leave it to this function): pos0, which
    // position_advance wrote in an earlier graph replay (qk_norm_rope_kv_write, the kernel before
    // this one, only reads it), and further down the first key step's table entry (the host
    // writes the block table before the replay) and its cache rows older than pos0 (earlier steps
    // wrote them): their round trips overlap the previous kernel. q and the newest row are that
    // kernel's output: after the wait.
    const u32 pos0 = pos0_ptr[0];
    const bool in_range = pos0 < (u32)max_seq;  // else the cache holds no such position: NaN
    float* out_heads = out + (long long)column * G * HD;  // heads column * G .. + G, contiguous
    const int len = in_range ? (int)pos0 + 1 : 1;
    // At least min_split_keys keys per split (a multiple of ATT_DEC_SPLIT_ALIGN): a short context
    // then runs in one CTA per kv head, without the partials' round trip and the merge.
    const int even_share = max((len + n_splits - 1) / n_splits, min_split_keys);
    const int keys_per_split = (even_share + ATT_DEC_SPLIT_ALIGN - 1) / ATT_DEC_SPLIT_ALIGN * ATT_DEC_SPLIT_ALIGN;
    const int used = (len + keys_per_split - 1) / keys_per_split;
    if (in_range && split >= used) return;  // no keys for this split at this length (nothing read or written)
    const int key_begin = split * keys_per_split;
    const int key_end = min(key_begin + keys_per_split, len);

    // This lane's D dims of each head's query, scaled so that exp2(score) = e^(q.k / sqrt(HD)).
    const int key_lane = lane % LANES_PER_KEY;  // which D dims
    const int key_slot = lane / LANES_PER_KEY;  // which key of a load
    float run_max[G], run_sum[G], acc[G][D];
#pragma unroll
    for (int h = 0; h < G; ++h) {
        run_max[h] = neg_inf();
        run_sum[h] = 0.0f;
#pragma unroll
        for (int i = 0; i < D; ++i) acc[h][i] = 0.0f;
    }

    constexpr int KEY_STRIDE = HD / ATT_DEC_HALVES_PER_VEC;  // uint4 per cache row
    uint4 k_next[LOADS][VECS], v_next[LOADS][VECS];
    // This lane's first 16 bytes of the step at key `first` (< key_end, so its table entry is a
    // live position's), as an offset in halves; the step's other keys follow row by row.
    auto step_lane_offset = [&](int first) {
        return kv_row(block_table, n_kv, cache_head, first, HD) + key_slot * HD + key_lane * D;
    };
    // Loads of the step starting at key `first` (keys past key_end read as zero, never touched;
    // with `skip_newest`, key pos0 too, for load_newest after the wait).
    auto load_step = [&](int first, bool skip_newest) {
        const long long at = step_lane_offset(first);
        const uint4* k_lane = reinterpret_cast<const uint4*>(k_cache + at);
        const uint4* v_lane = reinterpret_cast<const uint4*>(v_cache + at);
#pragma unroll
        for (int u = 0; u < LOADS; ++u) {
            const int key = first + u * KEYS_PER_LOAD + key_slot;
            const bool live = key < key_end && !(skip_newest && key == (int)pos0);
#pragma unroll
            for (int c = 0; c < VECS; ++c) {
                k_next[u][c] = live ? k_lane[u * KEYS_PER_LOAD * KEY_STRIDE + c] : make_uint4(0u, 0u, 0u, 0u);
                v_next[u][c] = live ? v_lane[u * KEYS_PER_LOAD * KEY_STRIDE + c] : make_uint4(0u, 0u, 0u, 0u);
            }
        }
    };
    // The newest key's row of the step at `first`, if it holds it (qk_norm_rope_kv_write's output).
    auto load_newest = [&](int first) {
        const long long at = step_lane_offset(first);
        const uint4* k_lane = reinterpret_cast<const uint4*>(k_cache + at);
        const uint4* v_lane = reinterpret_cast<const uint4*>(v_cache + at);
#pragma unroll
        for (int u = 0; u < LOADS; ++u) {
            const int key = first + u * KEYS_PER_LOAD + key_slot;
            if (key != (int)pos0 || key >= key_end) continue;
#pragma unroll
            for (int c = 0; c < VECS; ++c) {
                k_next[u][c] = k_lane[u * KEYS_PER_LOAD * KEY_STRIDE + c];
                v_next[u][c] = v_lane[u * KEYS_PER_LOAD * KEY_STRIDE + c];
            }
        }
    };
    const int warps_stride = warps * STEP_KEYS;
    int step_key = key_begin + warp * STEP_KEYS;
    if (in_range && step_key < key_end) load_step(step_key, true);

    griddep_wait();
    griddep_launch_dependents();
    TRACE_MARK(1);
    if (!in_range) {
        if (split == 0) {
            for (int i = threadIdx.x; i < G * HD; i += blockDim.x) {
                out_heads[i] = __int_as_float(0x7fc00000);
                if constexpr (PLANES) out_s[i] = __int_as_float(0x7fc00000);
            }
            if constexpr (PLANES) att_dec_write_planes<G, HD>(out_s, column, warp, warps, planes, gsx, group_sq);
        }
        return;
    }
    if (step_key < key_end) load_newest(step_key);
    const float q_scale = rsqrtf((float)HD) * ATT_DEC_LOG2E;
    float q[G][D];
#pragma unroll
    for (int h = 0; h < G; ++h) {
        const float* src = qkv + (long long)(column * G + h) * HD + key_lane * D;
#pragma unroll
        for (int i = 0; i < D; i += 4) {
            const float4 a = *reinterpret_cast<const float4*>(src + i);
            q[h][i] = a.x * q_scale;
            q[h][i + 1] = a.y * q_scale;
            q[h][i + 2] = a.z * q_scale;
            q[h][i + 3] = a.w * q_scale;
        }
    }

    for (; step_key < key_end; step_key += warps_stride) {
        uint4 k_cur[LOADS][VECS], v_cur[LOADS][VECS];
#pragma unroll
        for (int u = 0; u < LOADS; ++u) {
#pragma unroll
            for (int c = 0; c < VECS; ++c) {
                k_cur[u][c] = k_next[u][c];
                v_cur[u][c] = v_next[u][c];
            }
        }
        if (step_key + warps_stride < key_end) load_step(step_key + warps_stride, false);

        float s[LOADS][G];
#pragma unroll
        for (int u = 0; u < LOADS; ++u) {
            float kf[D];
#pragma unroll
            for (int c = 0; c < VECS; ++c) att_dec_unpack(k_cur[u][c], kf + c * ATT_DEC_HALVES_PER_VEC);
#pragma unroll
            for (int h = 0; h < G; ++h) {
                // Two chains of D / 2 halve the dependent FMA latency.
                float even = q[h][0] * kf[0], odd = q[h][1] * kf[1];
#pragma unroll
                for (int i = 2; i < D; i += 2) {
                    even = fmaf(q[h][i], kf[i], even);
                    odd = fmaf(q[h][i + 1], kf[i + 1], odd);
                }
                float dot = even + odd;
                if constexpr (!WHOLE_WARP_KEYS) {
#pragma unroll
                    for (int offset = LANES_PER_KEY / 2; offset > 0; offset >>= 1)
                        dot += __shfl_xor_sync(FULL_MASK, dot, offset);
                }
                s[u][h] = dot;
            }
        }
        // A whole warp per key: the step's LOADS * G partial dots summed over the warp at once.
        if constexpr (WHOLE_WARP_KEYS) att_dec_warp_sums(s, lane);
#pragma unroll
        for (int u = 0; u < LOADS; ++u) {
            const bool live = step_key + u * KEYS_PER_LOAD + key_slot < key_end;
#pragma unroll
            for (int h = 0; h < G; ++h) s[u][h] = live ? s[u][h] : neg_inf();
        }
        // The step's first key is live, so every head's new max is finite.
#pragma unroll
        for (int h = 0; h < G; ++h) {
            float mx = s[0][h];
#pragma unroll
            for (int u = 1; u < LOADS; ++u) mx = fmaxf(mx, s[u][h]);
#pragma unroll
            for (int offset = LANES_PER_KEY; offset < WARP_SIZE; offset <<= 1)
                mx = fmaxf(mx, __shfl_xor_sync(FULL_MASK, mx, offset));
            // Deep in a context the max rarely moves: skip the rescale then (warp-uniform branch;
            // the skipped correction would be exp2(0) = 1 exactly, so the result is unchanged).
            if (mx > run_max[h]) {
                const float correction = exp2_ftz(run_max[h] - mx);  // 0 on the first step
                run_max[h] = mx;
                run_sum[h] *= correction;
#pragma unroll
                for (int i = 0; i < D; ++i) acc[h][i] *= correction;
            }
        }
#pragma unroll
        for (int u = 0; u < LOADS; ++u) {
            float vf[D];
#pragma unroll
            for (int c = 0; c < VECS; ++c) att_dec_unpack(v_cur[u][c], vf + c * ATT_DEC_HALVES_PER_VEC);
#pragma unroll
            for (int h = 0; h < G; ++h) {
                const float p = exp2_ftz(s[u][h] - run_max[h]);  // 0 for a masked key
                run_sum[h] += p;
#pragma unroll
                for (int i = 0; i < D; ++i) acc[h][i] = fmaf(p, vf[i], acc[h][i]);
            }
        }
    }

    TRACE_MARK(3);
    // The key slots of a warp share run_max: their sums add directly.
#pragma unroll
    for (int h = 0; h < G; ++h) {
#pragma unroll
        for (int offset = LANES_PER_KEY; offset < WARP_SIZE; offset <<= 1) {
            run_sum[h] += __shfl_xor_sync(FULL_MASK, run_sum[h], offset);
#pragma unroll
            for (int i = 0; i < D; ++i) acc[h][i] += __shfl_xor_sync(FULL_MASK, acc[h][i], offset);
        }
        if (lane == 0) {
            warp_max_s[warp][h] = run_max[h];
            warp_sum_s[warp][h] = run_sum[h];
        }
    }
    const int lane_pass = key_lane * D / PASS_DIMS;  // the pass that stores this lane's dims
#pragma unroll
    for (int pass = 0; pass < ACC_PASSES; ++pass) {
        if (pass > 0) __syncthreads();  // the previous pass's combine has read warp_acc_s
        if (key_slot == 0 && lane_pass == pass) {
#pragma unroll
            for (int h = 0; h < G; ++h)
#pragma unroll
                for (int i = 0; i < D; ++i) warp_acc_s[warp][h][key_lane * D - pass * PASS_DIMS + i] = acc[h][i];
        }
        __syncthreads();
        if (pass == 0) {
            TRACE_MARK(4);
        }

        for (int i = threadIdx.x; i < G * PASS_DIMS; i += blockDim.x) {
            const int h = i / PASS_DIMS, d = pass * PASS_DIMS + i % PASS_DIMS;
            float cta_max, cta_sum;
            const float value = att_dec_combine_warps<G, PASS_DIMS, WARPS>(warp_max_s, warp_sum_s, warp_acc_s, warps,
                                                                           h, d - pass * PASS_DIMS, &cta_max, &cta_sum);
            if (used == 1) {
                out_heads[h * HD + d] = value / cta_sum;
                if constexpr (PLANES) out_s[h * HD + d] = value / cta_sum;
            } else {
                float* dst = partial + ((long long)(column * G + h) * n_splits + split) * (HD + 2);
                dst[2 + d] = value;
                if (d == 0) {
                    dst[0] = cta_max;
                    dst[1] = cta_sum;
                }
            }
        }
    }
    if (used == 1) {
        TRACE_MARK(5);
        if constexpr (PLANES) att_dec_write_planes<G, HD>(out_s, column, warp, warps, planes, gsx, group_sq);
        TRACE_MARK(6);
        TRACE_MARKS_END;
        TRACE_CTA_ENDS;
        return;
    }

    // The last CTA of this column to finish merges the splits. `counters` is zero before the
    // launch and the last CTA puts its slot back to zero, so graph replays find it clean.
    __threadfence();  // this CTA's partials are visible before it counts itself done
    __syncthreads();
    if (threadIdx.x == 0) {
        u32* counter = counters + column;
        const u32 arrived = atomicAdd(counter, 1u);
        is_last_s = arrived == (u32)(used - 1) ? 1u : 0u;
        if (is_last_s) atomicExch(counter, 0u);
    }
    __syncthreads();
    if (!is_last_s) {
        TRACE_MARKS_END;
        TRACE_CTA_ENDS;
        return;
    }
    __threadfence();
    // Other CTAs wrote the partials during this launch: volatile reads, not a stale L1 line.
    // Three passes, each a dependent L2 round trip. Loading every split's max, sum and acc at
    // once per output (one round trip, weights recomputed per thread) was no faster at depth
    // (docs/kernel-notes.md, "Decode attention", the merge in one round trip).
    const volatile float* parts = partial + (long long)column * G * n_splits * (HD + 2);
    for (int t = threadIdx.x; t < G * used; t += blockDim.x) {
        const int h = t / used, sp = t % used;
        const volatile float* head_parts = parts + (long long)h * n_splits * (HD + 2);
        float mx = neg_inf();
        for (int j = 0; j < used; ++j) mx = fmaxf(mx, head_parts[j * (HD + 2)]);
        split_weight_s[h][sp] = exp2_ftz(head_parts[sp * (HD + 2)] - mx);
    }
    __syncthreads();
    for (int h = threadIdx.x; h < G; h += blockDim.x) {
        const volatile float* head_parts = parts + (long long)h * n_splits * (HD + 2);
        float total = 0.0f;
        for (int j = 0; j < used; ++j) total = fmaf(head_parts[j * (HD + 2) + 1], split_weight_s[h][j], total);
        head_total_s[h] = total;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < G * HD; i += blockDim.x) {
        const int h = i / HD, d = i % HD;
        const volatile float* head_parts = parts + (long long)h * n_splits * (HD + 2) + 2 + d;
        float value = 0.0f;
        for (int j = 0; j < used; ++j) value = fmaf(head_parts[j * (HD + 2)], split_weight_s[h][j], value);
        out_heads[i] = value / head_total_s[h];
        if constexpr (PLANES) out_s[i] = value / head_total_s[h];
    }
    TRACE_MARK(5);
    if constexpr (PLANES) att_dec_write_planes<G, HD>(out_s, column, warp, warps, planes, gsx, group_sq);
    TRACE_MARK(6);
    TRACE_MARKS_END;
    TRACE_CTA_ENDS;
}

#define ATT_DEC_PARAMS                                                                                         \
    const float *__restrict__ qkv, const u32 *__restrict__ pos0_ptr, int max_seq, int n_kv,                    \
        const u32 *__restrict__ block_table, const u16 *__restrict__ k_cache, const u16 *__restrict__ v_cache, \
        float *__restrict__ partial, int n_splits, int min_split_keys, u32 *__restrict__ counters,             \
        float *__restrict__ out
#define ATT_DEC_ARGS \
    qkv, pos0_ptr, max_seq, n_kv, block_table, k_cache, v_cache, partial, n_splits, min_split_keys, counters, out

extern "C" __global__ void __launch_bounds__(ATT_DEC_WARPS * WARP_SIZE) attention_decode_g1_hd64(ATT_DEC_PARAMS) {
    // griddep_wait: in attention_decode_body, after pos0 and the older cache rows.
    attention_decode_body<1, 64, false>(ATT_DEC_ARGS, nullptr, nullptr, nullptr);
}
extern "C" __global__ void __launch_bounds__(ATT_DEC_WARPS * WARP_SIZE) attention_decode_g2_hd64(ATT_DEC_PARAMS) {
    // griddep_wait: in attention_decode_body, after pos0 and the older cache rows.
    attention_decode_body<2, 64, false>(ATT_DEC_ARGS, nullptr, nullptr, nullptr);
}
extern "C" __global__ void __launch_bounds__(ATT_DEC_WARPS * WARP_SIZE) attention_decode_g4_hd64(ATT_DEC_PARAMS) {
    // griddep_wait: in attention_decode_body, after pos0 and the older cache rows.
    attention_decode_body<4, 64, false>(ATT_DEC_ARGS, nullptr, nullptr, nullptr);
}
extern "C" __global__ void __launch_bounds__(ATT_DEC_WARPS * WARP_SIZE) attention_decode_g8_hd64(ATT_DEC_PARAMS) {
    // griddep_wait: in attention_decode_body, after pos0 and the older cache rows.
    attention_decode_body<8, 64, false>(ATT_DEC_ARGS, nullptr, nullptr, nullptr);
}
extern "C" __global__ void __launch_bounds__(ATT_DEC_WARPS * WARP_SIZE) attention_decode_g1_hd128(ATT_DEC_PARAMS) {
    // griddep_wait: in attention_decode_body, after pos0 and the older cache rows.
    attention_decode_body<1, 128, false>(ATT_DEC_ARGS, nullptr, nullptr, nullptr);
}
extern "C" __global__ void __launch_bounds__(ATT_DEC_WARPS * WARP_SIZE) attention_decode_g2_hd128(ATT_DEC_PARAMS) {
    // griddep_wait: in attention_decode_body, after pos0 and the older cache rows.
    attention_decode_body<2, 128, false>(ATT_DEC_ARGS, nullptr, nullptr, nullptr);
}
extern "C" __global__ void __launch_bounds__(ATT_DEC_WARPS * WARP_SIZE) attention_decode_g4_hd128(ATT_DEC_PARAMS) {
    // griddep_wait: in attention_decode_body, after pos0 and the older cache rows.
    attention_decode_body<4, 128, false>(ATT_DEC_ARGS, nullptr, nullptr, nullptr);
}
extern "C" __global__ void __launch_bounds__(ATT_DEC_WARPS * WARP_SIZE) attention_decode_g8_hd128(ATT_DEC_PARAMS) {
    // griddep_wait: in attention_decode_body, after pos0 and the older cache rows.
    attention_decode_body<8, 128, false>(ATT_DEC_ARGS, nullptr, nullptr, nullptr);
}

// The other GQA groups up to 8 (a 40 q / 8 kv head Qwen3-14B is group 5) and head_dim 256 at
// groups 1, 2 and 6 (Bonsai 2's 24 q / 4 kv heads): the same body, so their decode streams the
// cache as the groups above do instead of going through attention_split_keys, whose CTAs stage
// 16 query rows and the keys in shared memory for the G rows one token has.
// G 6 at HD 256 takes the narrow lanes (8 dims, a whole warp per key), 4-key steps and two
// passes of the warps' accumulators through shared memory (attention_decode_body).
// Not instantiated: groups over 8 at any head_dim and groups 3, 4, 5, 7, 8 at head_dim 256:
// those run attention_split_keys. (G 16 at HD 64 and G 4 at HD 256 with wide lanes spill past
// the 255-register cap: q and acc take 2 G D registers per lane.)
extern "C" __global__ void __launch_bounds__(ATT_DEC_WARPS * WARP_SIZE) attention_decode_g3_hd64(ATT_DEC_PARAMS) {
    // griddep_wait: in attention_decode_body, after pos0 and the older cache rows.
    attention_decode_body<3, 64, false>(ATT_DEC_ARGS, nullptr, nullptr, nullptr);
}
extern "C" __global__ void __launch_bounds__(ATT_DEC_WARPS * WARP_SIZE) attention_decode_g5_hd64(ATT_DEC_PARAMS) {
    // griddep_wait: in attention_decode_body, after pos0 and the older cache rows.
    attention_decode_body<5, 64, false>(ATT_DEC_ARGS, nullptr, nullptr, nullptr);
}
extern "C" __global__ void __launch_bounds__(ATT_DEC_WARPS * WARP_SIZE) attention_decode_g6_hd64(ATT_DEC_PARAMS) {
    // griddep_wait: in attention_decode_body, after pos0 and the older cache rows.
    attention_decode_body<6, 64, false>(ATT_DEC_ARGS, nullptr, nullptr, nullptr);
}
extern "C" __global__ void __launch_bounds__(ATT_DEC_WARPS * WARP_SIZE) attention_decode_g7_hd64(ATT_DEC_PARAMS) {
    // griddep_wait: in attention_decode_body, after pos0 and the older cache rows.
    attention_decode_body<7, 64, false>(ATT_DEC_ARGS, nullptr, nullptr, nullptr);
}
extern "C" __global__ void __launch_bounds__(ATT_DEC_WARPS * WARP_SIZE) attention_decode_g3_hd128(ATT_DEC_PARAMS) {
    // griddep_wait: in attention_decode_body, after pos0 and the older cache rows.
    attention_decode_body<3, 128, false>(ATT_DEC_ARGS, nullptr, nullptr, nullptr);
}
extern "C" __global__ void __launch_bounds__(ATT_DEC_WARPS * WARP_SIZE) attention_decode_g5_hd128(ATT_DEC_PARAMS) {
    // griddep_wait: in attention_decode_body, after pos0 and the older cache rows.
    attention_decode_body<5, 128, false>(ATT_DEC_ARGS, nullptr, nullptr, nullptr);
}
extern "C" __global__ void __launch_bounds__(ATT_DEC_WARPS * WARP_SIZE) attention_decode_g6_hd128(ATT_DEC_PARAMS) {
    // griddep_wait: in attention_decode_body, after pos0 and the older cache rows.
    attention_decode_body<6, 128, false>(ATT_DEC_ARGS, nullptr, nullptr, nullptr);
}
extern "C" __global__ void __launch_bounds__(ATT_DEC_WARPS * WARP_SIZE) attention_decode_g7_hd128(ATT_DEC_PARAMS) {
    // griddep_wait: in attention_decode_body, after pos0 and the older cache rows.
    attention_decode_body<7, 128, false>(ATT_DEC_ARGS, nullptr, nullptr, nullptr);
}
extern "C" __global__ void __launch_bounds__(ATT_DEC_WARPS * WARP_SIZE) attention_decode_g1_hd256(ATT_DEC_PARAMS) {
    // griddep_wait: in attention_decode_body, after pos0 and the older cache rows.
    attention_decode_body<1, 256, false>(ATT_DEC_ARGS, nullptr, nullptr, nullptr);
}
extern "C" __global__ void __launch_bounds__(ATT_DEC_WARPS * WARP_SIZE) attention_decode_g2_hd256(ATT_DEC_PARAMS) {
    // griddep_wait: in attention_decode_body, after pos0 and the older cache rows.
    attention_decode_body<2, 256, false>(ATT_DEC_ARGS, nullptr, nullptr, nullptr);
}
extern "C" __global__ void __launch_bounds__(ATT_DEC_WARPS * WARP_SIZE) attention_decode_g6_hd256(ATT_DEC_PARAMS) {
    // griddep_wait: in attention_decode_body, after pos0 and the older cache rows.
    attention_decode_body<6, 256, false>(ATT_DEC_ARGS, nullptr, nullptr, nullptr);
}

// HD 128 with gemv_b1's planes of the output (the attention output projection's x) written too.
#define ATT_DEC_PLANES_PARAMS \
    ATT_DEC_PARAMS, u32 *__restrict__ planes, u32 *__restrict__ gsx, float *__restrict__ group_sq
#define ATT_DEC_PLANES_ARGS ATT_DEC_ARGS, planes, gsx, group_sq
extern "C" __global__ void __launch_bounds__(ATT_DEC_WARPS * WARP_SIZE)
    attention_decode_g1_hd128_planes(ATT_DEC_PLANES_PARAMS) {
    // griddep_wait: in attention_decode_body, after pos0 and the older cache rows.
    attention_decode_body<1, 128, true>(ATT_DEC_PLANES_ARGS);
}
extern "C" __global__ void __launch_bounds__(ATT_DEC_WARPS * WARP_SIZE)
    attention_decode_g2_hd128_planes(ATT_DEC_PLANES_PARAMS) {
    // griddep_wait: in attention_decode_body, after pos0 and the older cache rows.
    attention_decode_body<2, 128, true>(ATT_DEC_PLANES_ARGS);
}
extern "C" __global__ void __launch_bounds__(ATT_DEC_WARPS * WARP_SIZE)
    attention_decode_g4_hd128_planes(ATT_DEC_PLANES_PARAMS) {
    // griddep_wait: in attention_decode_body, after pos0 and the older cache rows.
    attention_decode_body<4, 128, true>(ATT_DEC_PLANES_ARGS);
}
extern "C" __global__ void __launch_bounds__(ATT_DEC_WARPS * WARP_SIZE)
    attention_decode_g8_hd128_planes(ATT_DEC_PLANES_PARAMS) {
    // griddep_wait: in attention_decode_body, after pos0 and the older cache rows.
    attention_decode_body<8, 128, true>(ATT_DEC_PLANES_ARGS);
}
// One q head per CTA, four warps (the column's q head c reads cache head c / GQA): the decode
// graph's attention up to DECODE_HEADS_MAX_LEN tokens of context (BONSAI_ATT_HEADS=auto, the
// default; cuda_decode.rs), where the math per warp and the CTA's size, not the cache bytes, set
// the time. At most 96 registers: 128 x 96 = 12,288, which with a decode GEMV CTA's 512 x 104
// fills the register file exactly, so an output-projection CTA can start beside one of these
// (docs/kernel-notes.md, "Decode attention").
#define ATT_DEC_HEADS_WARPS 4
#define ATT_DEC_HEADS_ENTRY_POINT(GQA)                                                         \
    extern "C" __global__ void __maxnreg__(96)                                                 \
        attention_decode_g##GQA##_hd128_planes_heads(ATT_DEC_PLANES_PARAMS) {                  \
        /* griddep_wait: in attention_decode_body, after pos0 and the older cache rows. */     \
        attention_decode_body<1, 128, true, ATT_DEC_HEADS_WARPS, GQA>(ATT_DEC_PLANES_ARGS);    \
    }
ATT_DEC_HEADS_ENTRY_POINT(2)
ATT_DEC_HEADS_ENTRY_POINT(4)

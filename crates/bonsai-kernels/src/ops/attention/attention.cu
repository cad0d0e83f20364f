// Causal GQA attention over an f16 KV cache, flash-decoding style, for decode and prefill.
// Query head h of token i (position p = pos[0] + i) attends to cache positions 0..=p of kv head
// h / G (G = n_q / n_kv, any G >= 1), scores scaled by 1/sqrt(hd). The cache is paged
// (prelude.cuh): pools [blocks][n_kv][KV_BLOCK][hd], position j in block block_table[j / KV_BLOCK];
// each staged chunk of ATT_CHUNK keys lies in one block, so a chunk costs one table read (a
// broadcast load per thread), on top of the unchanged cache traffic.
//
// Pass 1, `attention_split_keys`: grid (n_kv * chunks, n_splits, ceil(m / tokens_per_cta)), 4
// warps. A CTA takes up to ATT_ROWS query rows: `heads` of the G q heads sharing one kv head (all
// G when G <= ATT_ROWS; else the group is cut into chunks = ceil(G / ATT_ROWS) near-equal runs of
// heads = ceil(G / chunks), one per CTA) for tokens_per_cta = ATT_ROWS / heads tokens, so K/V are
// read once for all of them. Row r is (token r / heads, head r % heads); rows past
// tokens_per_cta * heads (G not dividing ATT_ROWS), past the chunk's heads or past the last
// token are idle. The CTA takes the keys of one split [split * split_keys, +split_keys). Keys
// stream through shared memory ATT_CHUNK at a time; each warp keeps an online softmax (running
// max, sum, unnormalised output) per row. It writes [max, sum, acc[hd]] per (row, split) to the
// scratch buffer.
// Then the last CTA to finish for its (token group, kv head, chunk) merges the splits each of its
// rows used (attention_combine_one), counted in a caller-owned, zero-initialised u32 per
// (z, x) that it resets.
// A position >= max_seq, or one needing more splits than were launched, yields NaN output.
//
// Three entry points share the body. `attention_split_keys`: G dividing ATT_ROWS (every row of a
// full token block in use, one CTA per kv head and block) and head_dim a multiple of 4 up to
// ATT_MAX_HD, in static shared memory (41 KB, several CTAs per SM); it compiles without the
// general layout's bookkeeping, exactly as before that layout existed, so the models' shapes keep
// its code. `attention_split_keys_any_group`: the same for any other G. `attention_split_keys_hd256`:
// any G and any even head_dim up to ATT_WIDE_MAX_HD, whose q/K/V staging (80.5 KB at 256) only
// fits in opt-in dynamic shared memory (sm_80+ allow at least 99 KB per CTA).
#define ATT_MAX_HD 128
#define ATT_WIDE_MAX_HD 256
#define ATT_ROWS 16
#define ATT_WARPS 4
#define ATT_ROWS_PER_WARP (ATT_ROWS / ATT_WARPS)
#define ATT_CHUNK 32
// Keys per split, chosen by the launcher: long splits for prefill batches (a small scratch
// buffer), short ones for decode so that even a short context spreads over many CTAs (one
// 128-key split per kv head left a 512-token decode on 8 CTAs: docs/kernel-notes.md, "Decode
// attention").
// Both are multiples of ATT_CHUNK.
#define ATT_SPLIT_KEYS 128
#define ATT_DECODE_SPLIT_KEYS 32
// Row padding of the staged keys (floats): float4 reads of row j by lane j fall in distinct banks
// per quarter-warp, and rows stay 16-byte aligned.
#define ATT_K_PAD 4
static_assert(KV_BLOCK % ATT_CHUNK == 0, "a staged chunk must lie in one cache block");

// Output dimension d of (token, head): merges the splits the row used. `partial` is read through
// a volatile pointer: other CTAs wrote it during this launch (made visible by their fences).
__device__ __forceinline__ void attention_combine_one(const float* partial, int n_q, int hd, u32 pos0, int max_seq,
                                                      int n_splits, int split_keys, int token, int head, int d,
                                                      float* __restrict__ out) {
    const long long pos = (long long)pos0 + token;
    float* dst = out + ((long long)token * n_q + head) * hd + d;
    const long long used = pos / split_keys + 1;
    if (pos >= max_seq || used > n_splits) {
        *dst = __int_as_float(0x7fc00000);
        return;
    }
    const volatile float* src = partial + ((long long)token * n_q + head) * n_splits * (hd + 2);
    float mx = neg_inf();
    for (int s = 0; s < used; ++s) mx = fmaxf(mx, src[s * (hd + 2)]);
    float total = 0.0f, value = 0.0f;
    for (int s = 0; s < used; ++s) {
        const volatile float* part = src + s * (hd + 2);
        const float pm = part[0];
        const float w = pm == neg_inf() ? 0.0f : expf(pm - mx);
        total += part[1] * w;
        value += part[2 + d] * w;
    }
    *dst = value / total;
}

// The kernel body for head_dim <= MAX_HD in the caller's shared memory: q_s [ATT_ROWS][MAX_HD],
// k_s [ATT_CHUNK][MAX_HD + ATT_K_PAD], v_s [ATT_CHUNK][MAX_HD], and one u32 flag. The caller ran
// griddep_wait(). GENERAL: any G (head chunks, idle rows); else G divides ATT_ROWS.
template <int MAX_HD, bool GENERAL>
__device__ __forceinline__ void attention_split_keys_body(const float* __restrict__ qkv, int m, int n_q, int n_kv, int hd,
                                                          const u32* __restrict__ pos0_ptr, int max_seq,
                                                          const u32* __restrict__ block_table,
                                                          const u16* __restrict__ k_cache,
                                                          const u16* __restrict__ v_cache, float* __restrict__ partial,
                                                          int n_splits, int split_keys, u32* __restrict__ counters,
                                                          float* __restrict__ out, float (*q_s)[MAX_HD],
                                                          float (*k_s)[MAX_HD + ATT_K_PAD], float (*v_s)[MAX_HD],
                                                          u32& att_is_last) {
    constexpr int DIMS_PER_LANE = MAX_HD / WARP_SIZE;
    // Only the wide entry point takes head_dims of 2 mod 4, whose cache rows start on 4-byte
    // boundaries: it loads them a pair of halves at a time.
    constexpr bool PAIRS = MAX_HD > ATT_MAX_HD;
    const int group = n_q / n_kv;
    // GENERAL: `heads` q heads per CTA from head0 (chunks CTAs per kv head), rows past used_rows
    // or head_end idle. Else heads = group, chunks = 1 and every row of a block is in use.
    const int chunks = GENERAL ? (group + ATT_ROWS - 1) / ATT_ROWS : 1;
    const int heads = GENERAL ? (group + chunks - 1) / chunks : group;
    const int tokens_per_cta = ATT_ROWS / heads;
    const int used_rows = tokens_per_cta * heads;
    const int kv_head = GENERAL ? blockIdx.x / chunks : blockIdx.x;
    const int head0 = GENERAL ? kv_head * group + (blockIdx.x % chunks) * heads : kv_head * group;
    const int head_end = (kv_head + 1) * group;  // past the group's last q head
    const int split = blockIdx.y;
    const int token0 = blockIdx.z * tokens_per_cta;
    const int lane = threadIdx.x % WARP_SIZE;
    const int warp = threadIdx.x / WARP_SIZE;
    const u32 pos0 = pos0_ptr[0];
    const int qkv_row = (n_q + 2 * n_kv) * hd;

    const int last_token = min(m, token0 + tokens_per_cta) - 1;
    const long long cta_max_pos = (long long)pos0 + last_token;  // highest position in this CTA
    const int key_begin = split * split_keys;
    if (key_begin > cta_max_pos) return;  // no row of this CTA reaches this split
    const int key_end = (int)min((long long)min(key_begin + split_keys, max_seq), cta_max_pos + 1);

    const float scale = rsqrtf((float)hd);
    for (int i = threadIdx.x; i < ATT_ROWS * MAX_HD; i += blockDim.x) {
        const int r = i / MAX_HD, d = i % MAX_HD;
        const int token = token0 + r / heads;
        const int head = GENERAL ? head0 + r % heads : kv_head * group + r % group;
        const bool live = (!GENERAL || (r < used_rows && head < head_end)) && token < m && d < hd;
        q_s[r][d] = live ? qkv[(long long)token * qkv_row + (long long)head * hd + d] * scale : 0.0f;
    }

    float row_max[ATT_ROWS_PER_WARP], row_sum[ATT_ROWS_PER_WARP];
    float acc[ATT_ROWS_PER_WARP][DIMS_PER_LANE];
    long long row_pos[ATT_ROWS_PER_WARP];
#pragma unroll
    for (int j = 0; j < ATT_ROWS_PER_WARP; ++j) {
        const int r = warp + ATT_WARPS * j;
        const int token = token0 + r / heads;
        const bool live = (!GENERAL || (r < used_rows && head0 + r % heads < head_end)) && token < m;
        row_pos[j] = live ? (long long)pos0 + token : -1;  // -1: idle row
        row_max[j] = neg_inf();
        row_sum[j] = 0.0f;
#pragma unroll
        for (int dd = 0; dd < DIMS_PER_LANE; ++dd) acc[j][dd] = 0.0f;
    }

    for (int c0 = key_begin; c0 < key_end; c0 += ATT_CHUNK) {
        __syncthreads();  // previous chunk fully consumed (and q_s written, first time)
        // The chunk starts at a multiple of ATT_CHUNK (split_keys is one): its keys are
        // consecutive rows of one block, and c0 < key_end is a live position (table entry valid).
        const long long chunk_base = kv_row(block_table, n_kv, kv_head, c0, hd);
        // 4 halves of a row per load: dims d..d+3 (past hd: zeros, so the dot's last float4
        // adds 0).
        const int quads = PAIRS ? (hd + 3) / 4 : hd / 4;
        for (int i = threadIdx.x; i < ATT_CHUNK * quads; i += blockDim.x) {
            const int j = i / quads, d = (i % quads) * 4;
            const int key = c0 + j;
            uint2 kq = make_uint2(0u, 0u), vq = make_uint2(0u, 0u);
            if (key < key_end) {
                const long long at = chunk_base + (long long)j * hd + d;
                if (!PAIRS || hd % 4 == 0) {
                    // hd a multiple of 4: 8-byte loads that never straddle rows.
                    kq = *reinterpret_cast<const uint2*>(k_cache + at);
                    vq = *reinterpret_cast<const uint2*>(v_cache + at);
                } else {
                    kq.x = *reinterpret_cast<const u32*>(k_cache + at);
                    vq.x = *reinterpret_cast<const u32*>(v_cache + at);
                    if (d + 2 < hd) {
                        kq.y = *reinterpret_cast<const u32*>(k_cache + at + 2);
                        vq.y = *reinterpret_cast<const u32*>(v_cache + at + 2);
                    }
                }
            }
            k_s[j][d] = f16_to_f32((u16)(kq.x & 0xffffu));
            k_s[j][d + 1] = f16_to_f32((u16)(kq.x >> 16));
            k_s[j][d + 2] = f16_to_f32((u16)(kq.y & 0xffffu));
            k_s[j][d + 3] = f16_to_f32((u16)(kq.y >> 16));
            v_s[j][d] = f16_to_f32((u16)(vq.x & 0xffffu));
            v_s[j][d + 1] = f16_to_f32((u16)(vq.x >> 16));
            v_s[j][d + 2] = f16_to_f32((u16)(vq.y & 0xffffu));
            v_s[j][d + 3] = f16_to_f32((u16)(vq.y >> 16));
        }
        __syncthreads();
#pragma unroll
        for (int j = 0; j < ATT_ROWS_PER_WARP; ++j) {
            // An idle row (warp-uniform) skips its dots: G not dividing ATT_ROWS, a partial chunk
            // of heads, or a token block past m.
            if (GENERAL && row_pos[j] < 0) continue;
            const int r = warp + ATT_WARPS * j;
            const int key = c0 + lane;
            const bool valid = key < key_end && (long long)key <= row_pos[j];
            float s = 0.0f;
            for (int d = 0; d < hd; d += 4) {
                const float4 qv = *reinterpret_cast<const float4*>(&q_s[r][d]);
                const float4 kv = *reinterpret_cast<const float4*>(&k_s[lane][d]);
                s = fmaf(qv.x, kv.x, s);
                s = fmaf(qv.y, kv.y, s);
                s = fmaf(qv.z, kv.z, s);
                s = fmaf(qv.w, kv.w, s);
            }
            s = valid ? s : neg_inf();
            const float new_max = fmaxf(row_max[j], warp_max(s));
            if (new_max == neg_inf()) continue;  // no visible key yet (warp-uniform)
            const float p = valid ? expf(s - new_max) : 0.0f;
            const float correction = expf(row_max[j] - new_max);
            row_sum[j] = row_sum[j] * correction + warp_sum(p);
            row_max[j] = new_max;
#pragma unroll
            for (int dd = 0; dd < DIMS_PER_LANE; ++dd) acc[j][dd] *= correction;
            for (int kk = 0; kk < ATT_CHUNK; ++kk) {
                const float pk = __shfl_sync(FULL_MASK, p, kk);
#pragma unroll
                for (int dd = 0; dd < DIMS_PER_LANE; ++dd) {
                    const int d = lane + WARP_SIZE * dd;
                    if (d < hd) acc[j][dd] = fmaf(pk, v_s[kk][d], acc[j][dd]);
                }
            }
        }
    }

#pragma unroll
    for (int j = 0; j < ATT_ROWS_PER_WARP; ++j) {
        if (row_pos[j] < 0) continue;
        const int r = warp + ATT_WARPS * j;
        const int token = token0 + r / heads;
        const int head = GENERAL ? head0 + r % heads : kv_head * group + r % group;
        float* dst = partial + (((long long)token * n_q + head) * n_splits + split) * (hd + 2);
        if (lane == 0) { dst[0] = row_max[j]; dst[1] = row_sum[j]; }
#pragma unroll
        for (int dd = 0; dd < DIMS_PER_LANE; ++dd) {
            const int d = lane + WARP_SIZE * dd;
            if (d < hd) dst[2 + d] = acc[j][dd];
        }
    }

    // The last CTA of this (token group, kv head, chunk) to finish merges every split's partial
    // (one launch instead of a separate combine pass). `counters` is zero before the launch and
    // the last CTA puts its slot back to zero, so graph replays find it clean.
    __threadfence();  // this CTA's partials are visible before it counts itself done
    __syncthreads();
    if (threadIdx.x == 0) {
        const int working = (int)min((long long)n_splits, cta_max_pos / split_keys + 1);
        u32* counter = GENERAL ? counters + (long long)blockIdx.z * gridDim.x + blockIdx.x
                               : counters + (long long)blockIdx.z * n_kv + kv_head;
        const u32 arrived = atomicAdd(counter, 1u);
        att_is_last = arrived == (u32)(working - 1) ? 1u : 0u;
        if (att_is_last) atomicExch(counter, 0u);
    }
    __syncthreads();
    if (!att_is_last) return;
    __threadfence();
    for (int i = threadIdx.x; i < (GENERAL ? used_rows : ATT_ROWS) * hd; i += blockDim.x) {
        const int r = i / hd, d = i % hd;
        const int token = token0 + r / heads;
        if (GENERAL) {
            const int head = head0 + r % heads;
            if (token >= m || head >= head_end) continue;
            attention_combine_one(partial, n_q, hd, pos0, max_seq, n_splits, split_keys, token, head, d, out);
        } else {
            if (token >= m) continue;
            attention_combine_one(partial, n_q, hd, pos0, max_seq, n_splits, split_keys, token, kv_head * group + r % group,
                                  d, out);
        }
    }
}

#define ATT_SPLIT_PARAMS                                                                                     \
    const float *__restrict__ qkv, int m, int n_q, int n_kv, int hd, const u32 *__restrict__ pos0_ptr,        \
        int max_seq, const u32 *__restrict__ block_table, const u16 *__restrict__ k_cache,                    \
        const u16 *__restrict__ v_cache, float *__restrict__ partial, int n_splits, int split_keys,           \
        u32 *__restrict__ counters, float *__restrict__ out
#define ATT_SPLIT_ARGS                                                                                    \
    qkv, m, n_q, n_kv, hd, pos0_ptr, max_seq, block_table, k_cache, v_cache, partial, n_splits, split_keys, \
        counters, out

// The body with its staging in static shared memory (head_dim up to ATT_MAX_HD).
template <bool GENERAL>
__device__ __forceinline__ void attention_split_keys_static_smem(ATT_SPLIT_PARAMS) {
    __shared__ __align__(16) float q_s[ATT_ROWS][ATT_MAX_HD];
    __shared__ __align__(16) float k_s[ATT_CHUNK][ATT_MAX_HD + ATT_K_PAD];
    __shared__ float v_s[ATT_CHUNK][ATT_MAX_HD];
    __shared__ u32 att_is_last;
    attention_split_keys_body<ATT_MAX_HD, GENERAL>(ATT_SPLIT_ARGS, q_s, k_s, v_s, att_is_last);
}

// G dividing ATT_ROWS, head_dim a multiple of 4 up to ATT_MAX_HD; pools 8-byte aligned.
extern "C" __global__ void __launch_bounds__(ATT_WARPS * WARP_SIZE) attention_split_keys(ATT_SPLIT_PARAMS) {
    griddep_wait();
    // No early griddep_launch_dependents(): this kernel now serves prefill batches (many waves of
    // CTAs), whose SMs the next kernel's waiting CTAs must not take (see matmul_q1.cu).
    attention_split_keys_static_smem<false>(ATT_SPLIT_ARGS);
}

// Any other G (not dividing ATT_ROWS, or above it), head_dim a multiple of 4 up to ATT_MAX_HD;
// pools 8-byte aligned.
extern "C" __global__ void __launch_bounds__(ATT_WARPS * WARP_SIZE) attention_split_keys_any_group(ATT_SPLIT_PARAMS) {
    griddep_wait();
    attention_split_keys_static_smem<true>(ATT_SPLIT_ARGS);
}

// Any G, any even head_dim <= ATT_WIDE_MAX_HD; pools 4-byte aligned (8-byte where hd is a
// multiple of 4). Dynamic shared memory: (ATT_ROWS + ATT_CHUNK) * ATT_WIDE_MAX_HD + ATT_CHUNK *
// (ATT_WIDE_MAX_HD + ATT_K_PAD) floats (82,432 bytes), opted in by the launcher. That staging
// admits at most 2 CTAs per SM, which the launch bounds say: without the 2, ptxas for sm_90 holds
// the kernel to 96 registers and spills the doubled acc rows (125 registers, no spill, with it).
extern "C" __global__ void __launch_bounds__(ATT_WARPS * WARP_SIZE, 2) attention_split_keys_hd256(ATT_SPLIT_PARAMS) {
    griddep_wait();
    extern __shared__ __align__(16) float att_wide_smem[];
    __shared__ u32 att_is_last;
    float(*q_s)[ATT_WIDE_MAX_HD] = reinterpret_cast<float(*)[ATT_WIDE_MAX_HD]>(att_wide_smem);
    float(*k_s)[ATT_WIDE_MAX_HD + ATT_K_PAD] =
        reinterpret_cast<float(*)[ATT_WIDE_MAX_HD + ATT_K_PAD]>(att_wide_smem + ATT_ROWS * ATT_WIDE_MAX_HD);
    float(*v_s)[ATT_WIDE_MAX_HD] = reinterpret_cast<float(*)[ATT_WIDE_MAX_HD]>(
        att_wide_smem + ATT_ROWS * ATT_WIDE_MAX_HD + ATT_CHUNK * (ATT_WIDE_MAX_HD + ATT_K_PAD));
    attention_split_keys_body<ATT_WIDE_MAX_HD, true>(ATT_SPLIT_ARGS, q_s, k_s, v_s, att_is_last);
}

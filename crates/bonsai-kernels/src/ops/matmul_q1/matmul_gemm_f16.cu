// Prefill / image GEMM on tensor cores with f16 operands: `gemm_f16_mma` (every quantized matmul
// at m >= the launcher's F16_GEMM_MIN_TOKENS; entry points in matmul_q1.cu etc.).
//
// Two launches:
//  1. x_to_f16_rows_q1 / _q2 (one CTA per token row): e = 14 - floor(log2 max|x_row|), clamped
//     to [QG_EXP_MIN, QG_EXP_MAX], so the row's largest |x| * 2^e lies in [2^14, 2^15) (no f16
//     overflow, small values keep 11 significant bits down to 2^-28 of the max). Writes
//     xh = f16_rn(x * 2^e) in pair-slot order (weight_layout.cu, mma_slot_k) and 2^-e per row.
//  2. gemm_f16_mma: CTA = 128 tokens x (64 * WARPS_N) weight rows, 2 x WARPS_N warps of 64 x 64.
//     K advances one 128-weight group per stage through a QG_STAGES cp.async ring holding the
//     group's xh tile (16-byte chunks XOR-swizzled by row % 8, so ldmatrix is conflict free) and
//     its lane words (weight_layout.cu; stored [row][lane][plane], so the 8 rows x 4 lanes of a
//     B fragment read distinct banks); the group scales travel through registers (one per
//     thread, loaded one stage ahead). A fragments come from ldmatrix, B fragments are decoded
//     straight into registers (mma_pair_f16x2: (code value) * d, exact in f16), so the per-group
//     scale is inside the operand and one f32 accumulator chain runs over all of K.
//     Split-K (SPLIT = true, the `_split` entry points; blockIdx.z = split of gridDim.z): split z
//     runs groups [z P, min((z + 1) P, G)), P = split_groups; every split writes its raw f32
//     tile to `partials`, and the CTA that arrives last at the tile's counter sums the S tiles
//     in split order (fixed: the result does not depend on the arrival order) before the
//     epilogue (qg_split_k_merge). SPLIT = false compiles to the unsplit kernel unchanged.
//     Epilogue: acc * 2^-e (exact), then store / add / SwiGLU. SwiGLU tiles interleave gate and
//     up rows (local column 2f gate, 2f + 1 up of feature f), so a thread's c0/c1 (and c2/c3)
//     are the gate and up of one feature.

#define QG_TILE_TOKENS 128
#define QG_WARP_TOKENS 64
#define QG_WARP_ROWS 64
#define QG_WARPS_M 2
#define QG_STAGES 3
#define QG_PREP_THREADS 256
// Loop iterations of the pre-pass whose loads are issued together.
#define QG_PREP_BATCH 4
// f16 chunks (8 values, 16 bytes) per 128-wide row of the activation tile.
#define QG_X_CHUNKS 16
// 2^QG_EXP_MAX and 2^-QG_EXP_MIN must stay normal f32 (|e| <= 126).
#define QG_EXP_MIN (-113)
#define QG_EXP_MAX 126
// The exponent that maps a row's max |x| into [2^QG_TARGET_EXP, 2^(QG_TARGET_EXP + 1)).
#define QG_TARGET_EXP 14

// Power-of-two row exponent e for max |x| = `amax` (0, subnormal and non-finite rows included).
__device__ __forceinline__ int qg_row_exponent(float amax) {
    const int biased = (__float_as_int(amax) >> 23) & 0xff;
    if (biased == 0xff) return 0;  // inf / NaN: scale 1, the non-finite value propagates
    const int e = QG_TARGET_EXP - (biased - 127);
    return e < QG_EXP_MIN ? QG_EXP_MIN : (e > QG_EXP_MAX ? QG_EXP_MAX : e);
}
__device__ __forceinline__ float qg_pow2(int e) { return __int_as_float((127 + e) << 23); }

// The second pass of both pre-passes: row xr (global or shared memory) times 2^e, rounded to
// f16 in pair-slot order into `out` (k / 2 words), QG_PREP_BATCH iterations' loads in flight.
template <int BITS>
__device__ __forceinline__ void f16_row_store(const float* __restrict__ xr, int k, float up, u32* __restrict__ out) {
    for (int s0 = threadIdx.x * 2; s0 < k; s0 += QG_PREP_BATCH * QG_PREP_THREADS * 2) {
        float lo[QG_PREP_BATCH], hi[QG_PREP_BATCH];
#pragma unroll
        for (int j = 0; j < QG_PREP_BATCH; ++j) {
            const int s = s0 + j * QG_PREP_THREADS * 2;
            const int base = s & ~(GROUP_SIZE - 1), slot = s & (GROUP_SIZE - 1);
            lo[j] = s < k ? xr[base + mma_slot_k<BITS>(slot)] : 0.0f;
            hi[j] = s < k ? xr[base + mma_slot_k<BITS>(slot + 1)] : 0.0f;
        }
#pragma unroll
        for (int j = 0; j < QG_PREP_BATCH; ++j) {
            const int s = s0 + j * QG_PREP_THREADS * 2;
            if (s < k) out[s / 2] = pack_b16(f32_to_f16(lo[j] * up), f32_to_f16(hi[j] * up));
        }
    }
}

// The QG_PREP_BATCH float4s i0, i0 + QG_PREP_THREADS, ... of `src` (zeros past k4), all loads
// issued before any use.
__device__ __forceinline__ void prep_load_batch(const float4* __restrict__ src, int i0, int k4, float4 (&v)[QG_PREP_BATCH]) {
#pragma unroll
    for (int j = 0; j < QG_PREP_BATCH; ++j) {
        const int i = i0 + j * QG_PREP_THREADS;
        v[j] = i < k4 ? src[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
}

__device__ __forceinline__ float abs_max4(float amax, float4 v) {
    return fmaxf(amax, fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w))));
}

// One CTA per token row; k % 128 == 0, x rows 16-byte aligned.
template <int BITS>
__device__ __forceinline__ void x_to_f16_rows(const float* __restrict__ x, int k,
                                              u16* __restrict__ xh, float* __restrict__ row_unscale) {
    __shared__ float scratch[WARP_SIZE];
    const long long row = blockIdx.x;
    const float* xr = x + row * k;
    // Both passes keep QG_PREP_BATCH iterations' loads in flight before the first use: one
    // round trip per batch instead of one per iteration (the row is k / 1024 float4 iterations
    // a thread, then k / 512 pair iterations).
    float amax = 0.0f;
    const int k4 = k / 4;
    for (int i0 = threadIdx.x; i0 < k4; i0 += QG_PREP_BATCH * QG_PREP_THREADS) {
        float4 v[QG_PREP_BATCH];
        prep_load_batch(reinterpret_cast<const float4*>(xr), i0, k4, v);
#pragma unroll
        for (int j = 0; j < QG_PREP_BATCH; ++j) amax = abs_max4(amax, v[j]);
    }
    amax = block_max(amax, scratch);
    const int e = qg_row_exponent(amax);
    f16_row_store<BITS>(xr, k, qg_pow2(e), reinterpret_cast<u32*>(xh + row * k));
    if (threadIdx.x == 0) row_unscale[row] = qg_pow2(-e);
}

// x_to_f16_rows of RMSNorm(x; norm_w, eps), bit for bit rms_norm_row_per_block (rms_norm.cu; its
// QG_PREP_THREADS = RMS_NORM_THREADS threads' fmaf chains of squares in the same float4 order,
// the same block_sum, x * inv * w) followed by x_to_f16_rows on the stored result, in one launch:
// the normed row stays in shared memory (k floats of dynamic shared memory) instead of a round
// trip through global memory and a launch.
template <int BITS>
__device__ __forceinline__ void x_to_f16_rows_norm(const float* __restrict__ x, int k, const float* __restrict__ norm_w,
                                                   float eps, u16* __restrict__ xh, float* __restrict__ row_unscale) {
    extern __shared__ float4 prep_row4[];
    __shared__ float scratch[WARP_SIZE];
    const long long row = blockIdx.x;
    const float4* x4 = reinterpret_cast<const float4*>(x + row * k);
    const float4* w4 = reinterpret_cast<const float4*>(norm_w);
    const int k4 = k / 4;
    constexpr int STRIDE = QG_PREP_BATCH * QG_PREP_THREADS;
    float ss = 0.0f;
    for (int i0 = threadIdx.x; i0 < k4; i0 += STRIDE) {
        float4 v[QG_PREP_BATCH];
        prep_load_batch(x4, i0, k4, v);
#pragma unroll
        for (int j = 0; j < QG_PREP_BATCH; ++j) {
            const int i = i0 + j * QG_PREP_THREADS;
            if (i >= k4) break;
            prep_row4[i] = v[j];
            ss = fmaf(v[j].x, v[j].x, ss);
            ss = fmaf(v[j].y, v[j].y, ss);
            ss = fmaf(v[j].z, v[j].z, ss);
            ss = fmaf(v[j].w, v[j].w, ss);
        }
    }
    ss = block_sum(ss, scratch);
    const float inv = rsqrtf(ss / (float)k + eps);
    // Each thread rewrites only the float4s it stored itself: no barrier before this pass.
    float amax = 0.0f;
    for (int i0 = threadIdx.x; i0 < k4; i0 += STRIDE) {
        float4 g[QG_PREP_BATCH];
        prep_load_batch(w4, i0, k4, g);
#pragma unroll
        for (int j = 0; j < QG_PREP_BATCH; ++j) {
            const int i = i0 + j * QG_PREP_THREADS;
            if (i >= k4) break;
            const float4 v = prep_row4[i];
            const float4 n = make_float4(v.x * inv * g[j].x, v.y * inv * g[j].y, v.z * inv * g[j].z, v.w * inv * g[j].w);
            prep_row4[i] = n;
            amax = abs_max4(amax, n);
        }
    }
    // block_max ends with a barrier: every thread's normed values are in shared memory after it.
    amax = block_max(amax, scratch);
    const int e = qg_row_exponent(amax);
    f16_row_store<BITS>(reinterpret_cast<const float*>(prep_row4), k, qg_pow2(e), reinterpret_cast<u32*>(xh + row * k));
    if (threadIdx.x == 0) row_unscale[row] = qg_pow2(-e);
}

// Shared-memory layout of one pipeline stage.
template <int BITS, int WARPS_N>
struct QgStage {
    static constexpr int ROWS = QG_WARP_ROWS * WARPS_N;
    static constexpr int WORDS = LAYOUT_LANES * BITS;  // lane words per row and group
    static constexpr int X_BYTES = QG_TILE_TOKENS * GROUP_SIZE * 2;
    static constexpr int W_BYTES = ROWS * WORDS * 4;
    static constexpr int D_BYTES = ROWS * 2;
    static constexpr int BYTES = X_BYTES + W_BYTES + D_BYTES;
};

// Tile-local column lc (0 .. ROWS-1) -> weight row, or -1 outside the matrix.
template <int MODE, int ROWS>
__device__ __forceinline__ int qg_weight_row(int tile, int lc, int n_out) {
    if (MODE == MATMUL_SWIGLU) {
        const int f = tile * (ROWS / 2) + lc / 2;
        if (f >= n_out) return -1;
        return (lc & 1) ? n_out + f : f;
    }
    const int r = tile * ROWS + lc;
    return r < n_out ? r : -1;
}

// Split-K merge, after a split's main loop. Every split stores its accumulators (one float4 per
// (m tile, n tile) and thread, laid out [split][tile][chunk][thread] so each store instruction is
// coalesced), then counts itself in at the tile's counter (zeroed by the launcher). Returns true
// in the CTA that arrived last, whose `acc` then holds ((p0 + p1) + p2) + ... in split order, all
// S partials read back from memory, its own too (so the sum never depends on which split arrived
// last); the other CTAs are done.
template <int M_TILES, int N_TILES, int THREADS>
__device__ __forceinline__ bool qg_split_k_merge(float (&acc)[M_TILES][N_TILES][4],
                                                 float* __restrict__ partials,
                                                 unsigned* __restrict__ tile_counters) {
    constexpr int CHUNKS = M_TILES * N_TILES;
    const int splits = gridDim.z;
    const long long tiles = (long long)gridDim.x * gridDim.y;
    const long long tile_id = (long long)blockIdx.y * gridDim.x + blockIdx.x;
    float4* part = reinterpret_cast<float4*>(partials);
    auto chunk = [&](int split, int c) -> long long {
        return ((split * tiles + tile_id) * CHUNKS + c) * THREADS + threadIdx.x;
    };
#pragma unroll
    for (int i = 0; i < M_TILES; ++i)
#pragma unroll
        for (int j = 0; j < N_TILES; ++j)
            part[chunk(blockIdx.z, i * N_TILES + j)] = make_float4(acc[i][j][0], acc[i][j][1], acc[i][j][2], acc[i][j][3]);
    if (!split_k_arrived_last(tile_counters + tile_id, splits)) return false;
    // As in gemm_wgmma: a split's loads of a batch of chunks are in flight together (not one
    // dependent chain per chunk); the sum order per accumulator stays split 0, 1, 2, ...
    constexpr int BATCH = CHUNKS < 4 ? CHUNKS : 4;
#pragma unroll
    for (int c0 = 0; c0 < CHUNKS; c0 += BATCH) {
#pragma unroll
        for (int c = c0; c < c0 + BATCH; ++c) {
            const float4 p = __ldcg(part + chunk(0, c));
            float* a = acc[c / N_TILES][c % N_TILES];
            a[0] = p.x;
            a[1] = p.y;
            a[2] = p.z;
            a[3] = p.w;
        }
#pragma unroll 1
        for (int split = 1; split < splits; ++split) {
            float4 p[BATCH];
#pragma unroll
            for (int c = 0; c < BATCH; ++c) p[c] = __ldcg(part + chunk(split, c0 + c));
#pragma unroll
            for (int c = 0; c < BATCH; ++c) {
                float* a = acc[(c0 + c) / N_TILES][(c0 + c) % N_TILES];
                a[0] += p[c].x;
                a[1] += p[c].y;
                a[2] += p[c].z;
                a[3] += p[c].w;
            }
        }
    }
    return true;
}

// SPLIT = false: `partials`, `tile_counters` and `split_groups` are unused (the whole K range).
template <int BITS, int MODE, int WARPS_N, bool SPLIT>
__device__ __forceinline__ void gemm_f16_mma(const u16* __restrict__ scales,
                                             const u32* __restrict__ payload,
                                             const u16* __restrict__ xh,
                                             const float* __restrict__ row_unscale, int m,
                                             float* __restrict__ y, int n_out, int k,
                                             float* __restrict__ partials,
                                             unsigned* __restrict__ tile_counters, int split_groups) {
    using S = QgStage<BITS, WARPS_N>;
    constexpr int THREADS = QG_WARPS_M * WARPS_N * WARP_SIZE;
    constexpr int M_TILES = QG_WARP_TOKENS / 16;
    constexpr int N_TILES = QG_WARP_ROWS / 8;
    static_assert(S::ROWS == THREADS, "one group scale per thread and stage");
    extern __shared__ float4 qgemm_smem[];
    unsigned char* smem = reinterpret_cast<unsigned char*>(qgemm_smem);

    const int tile = blockIdx.x;
    const int tok0 = blockIdx.y * QG_TILE_TOKENS;
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const int warp_n = warp % WARPS_N, warp_m = warp / WARPS_N;
    const int g = lane / 4, t = lane % 4;
    const int groups = k / GROUP_SIZE;
    // This CTA's groups group0 .. group0 + split_len - 1: 0 and G without a split, else split z's
    // share (the launcher leaves no split empty). The loop counts iterations from 0 and the ring
    // slot is iteration % STAGES, as without a split, so only the group index adds group0.
    const int group0 = SPLIT ? (int)blockIdx.z * split_groups : 0;
    const int split_len = SPLIT ? min(split_groups, groups - group0) : groups;
    // The weight row whose scale this thread carries through the pipeline.
    const int my_row = qg_weight_row<MODE, S::ROWS>(tile, threadIdx.x, n_out);

    auto x_tile = [&](int slot) { return reinterpret_cast<u16*>(smem + slot * S::BYTES); };
    auto w_tile = [&](int slot) { return reinterpret_cast<u32*>(smem + slot * S::BYTES + S::X_BYTES); };
    auto d_tile = [&](int slot) {
        return reinterpret_cast<u16*>(smem + slot * S::BYTES + S::X_BYTES + S::W_BYTES);
    };
    auto load_scale = [&](int kb) -> u16 {
        return my_row >= 0 ? __ldg(scales + (long long)my_row * groups + kb) : (u16)0;
    };
    // Issues the cp.async copies of group kb into ring slot `slot`; rows past m / N read zeros.
    // A group's lane words are not contiguous in blocked rows (layout_word), hence 4-byte copies.
    auto load_group = [&](int kb, int slot) {
        u16* xs = x_tile(slot);
#pragma unroll 1
        for (int i = threadIdx.x; i < QG_TILE_TOKENS * QG_X_CHUNKS; i += THREADS) {
            const int r = i / QG_X_CHUNKS, c = i % QG_X_CHUNKS;
            const bool valid = tok0 + r < m;
            const u16* src = valid ? xh + (long long)(tok0 + r) * k + kb * GROUP_SIZE + c * 8 : xh;
            cp_async16_zfill(xs + r * GROUP_SIZE + ((c ^ (r & 7)) * 8), src, valid);
        }
        u32* ws = w_tile(slot);
#pragma unroll 1
        for (int i = threadIdx.x; i < S::ROWS * S::WORDS; i += THREADS) {
            const int lc = i / S::WORDS, w = i % S::WORDS;  // w = lane * BITS + plane
            const int row = qg_weight_row<MODE, S::ROWS>(tile, lc, n_out);
            if (row >= 0) {
                const u32* row_words = layout_row<BITS>(payload, row, groups);
                cp_async4(ws + i, row_words + layout_word<BITS>(groups, kb, w / BITS, w % BITS));
            } else {
                ws[i] = 0u;  // a zero payload decodes to -d = -0 with the zero scale below
            }
        }
    };

    float acc[M_TILES][N_TILES][4];
    zero_fill(acc);

#pragma unroll
    for (int s = 0; s < QG_STAGES - 1; ++s) {
        if (s < split_len) {
            load_group(group0 + s, s);
            d_tile(s)[threadIdx.x] = load_scale(group0 + s);
        }
        cp_async_commit();
    }

    for (int it = 0; it < split_len; ++it) {
        cp_async_wait<QG_STAGES - 2>();
        __syncthreads();  // iteration it's group landed for every thread; slot (it - 1) % STAGES is free
        const int next = it + QG_STAGES - 1;
        u16 d_next = 0;
        if (next < split_len) {
            load_group(group0 + next, next % QG_STAGES);
            d_next = load_scale(group0 + next);
        }
        cp_async_commit();

        const int slot = it % QG_STAGES;
        // Lanes 8h..8h+7 give the rows of ldmatrix matrix h: +8 rows for odd h, the upper 8 k
        // (chunk + 1) for h >= 2; m tile i adds 16 rows.
        const unsigned char* x_rows = reinterpret_cast<const unsigned char*>(x_tile(slot)) +
            (warp_m * QG_WARP_TOKENS + (lane & 7) + ((lane >> 3) & 1) * 8) * GROUP_SIZE * 2;
        const u32* ws = w_tile(slot);
        const u16* ds = d_tile(slot);
        // This lane's words and scale table for each of its 8 weight rows (row g of each n8 tile).
        MmaGroupScale scale[N_TILES];
        MmaLaneWords lane_words[N_TILES];
#pragma unroll
        for (int j = 0; j < N_TILES; ++j) {
            const int lc = warp_n * QG_WARP_ROWS + j * 8 + g;
            scale[j] = mma_group_scale<BITS>(ds[lc]);
            lane_words[j] = mma_lane_words<BITS>(ws + lc * S::WORDS + t * BITS);
        }
#pragma unroll
        for (int step = 0; step < GROUP_SIZE / 16; ++step) {
            // This step's 16-byte chunk of the lane's ldmatrix row, swizzled by row % 8 (the
            // tile rows below are multiples of 8 apart, so one offset serves every m tile).
            const u32 chunk_offset = (u32)(((2 * step + (lane >> 4)) ^ (lane & 7)) * 16);
            u32 a[M_TILES][4];
#pragma unroll
            for (int i = 0; i < M_TILES; ++i)
                ldmatrix_x4(a[i], x_rows + chunk_offset + (u32)(i * 16 * GROUP_SIZE * 2));
#pragma unroll
            for (int j = 0; j < N_TILES; ++j) {
                const u32 b0 = mma_pair_f16x2<BITS>(lane_words[j], 2 * step, scale[j]);
                const u32 b1 = mma_pair_f16x2<BITS>(lane_words[j], 2 * step + 1, scale[j]);
#pragma unroll
                for (int i = 0; i < M_TILES; ++i) mma_f16_16x8x16(acc[i][j], a[i], b0, b1);
            }
        }
        // Slot next % STAGES was last read in iteration it - 1, before this iteration's barrier.
        if (next < split_len) d_tile(next % QG_STAGES)[threadIdx.x] = d_next;
    }
    cp_async_wait<0>();
    if constexpr (SPLIT) {
        if (!qg_split_k_merge<M_TILES, N_TILES, THREADS>(acc, partials, tile_counters)) return;
    }

    // Epilogue: thread holds tokens (g, g + 8) x local columns (2t, 2t + 1) of every 16 x 8 tile.
    // float2 stores need every (token, even column) address 8-byte aligned: even rows and base.
    // Add: the old values of a token's outputs are loaded before any of them is stored (the
    // compiler cannot prove that a store to y misses the next load from y: a read-add-store per
    // output pair ran as one dependent round trip after another).
    const bool pairs_aligned = (n_out % 2) == 0 && (reinterpret_cast<unsigned long long>(y) & 7) == 0;
#pragma unroll
    for (int i = 0; i < M_TILES; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int tok = tok0 + warp_m * QG_WARP_TOKENS + i * 16 + g + 8 * h;
            if (tok >= m) continue;
            const float unscale = row_unscale[tok];
            float* yrow = y + (long long)tok * n_out;
            float2 old[N_TILES];
            if constexpr (MODE == MATMUL_ADD) {
#pragma unroll
                for (int j = 0; j < N_TILES; ++j) {
                    const int col = tile * S::ROWS + warp_n * QG_WARP_ROWS + j * 8 + 2 * t;
                    old[j] = make_float2(0.0f, 0.0f);
                    if (pairs_aligned && col + 1 < n_out) {
                        old[j] = *reinterpret_cast<const float2*>(yrow + col);
                    } else {
                        if (col < n_out) old[j].x = yrow[col];
                        if (col + 1 < n_out) old[j].y = yrow[col + 1];
                    }
                }
            }
#pragma unroll
            for (int j = 0; j < N_TILES; ++j) {
                const int lc = warp_n * QG_WARP_ROWS + j * 8 + 2 * t;
                const float v0 = acc[i][j][2 * h] * unscale, v1 = acc[i][j][2 * h + 1] * unscale;
                if (MODE == MATMUL_SWIGLU) {
                    const int f = tile * (S::ROWS / 2) + lc / 2;
                    if (f < n_out) yrow[f] = silu_mul(v0, v1);
                    continue;
                }
                const int col = tile * S::ROWS + lc;
                const float w0 = MODE == MATMUL_ADD ? old[j].x + v0 : v0;
                const float w1 = MODE == MATMUL_ADD ? old[j].y + v1 : v1;
                if (pairs_aligned && col + 1 < n_out) {
                    *reinterpret_cast<float2*>(yrow + col) = make_float2(w0, w1);
                } else {
                    if (col < n_out) yrow[col] = w0;
                    if (col + 1 < n_out) yrow[col + 1] = w1;
                }
            }
        }
}

extern "C" __global__ void __launch_bounds__(QG_PREP_THREADS)
    x_to_f16_rows_q1(const float* x, int k, u16* xh, float* row_unscale) {
    griddep_wait();
    griddep_launch_dependents();
    x_to_f16_rows<1>(x, k, xh, row_unscale);
}
extern "C" __global__ void __launch_bounds__(QG_PREP_THREADS)
    x_to_f16_rows_q2(const float* x, int k, u16* xh, float* row_unscale) {
    griddep_wait();
    griddep_launch_dependents();
    x_to_f16_rows<2>(x, k, xh, row_unscale);
}
extern "C" __global__ void __launch_bounds__(QG_PREP_THREADS)
    x_to_f16_rows_norm_q1(const float* x, int k, const float* norm_w, float eps, u16* xh, float* row_unscale) {
    griddep_wait();
    griddep_launch_dependents();
    x_to_f16_rows_norm<1>(x, k, norm_w, eps, xh, row_unscale);
}
extern "C" __global__ void __launch_bounds__(QG_PREP_THREADS)
    x_to_f16_rows_norm_q2(const float* x, int k, const float* norm_w, float eps, u16* xh, float* row_unscale) {
    griddep_wait();
    griddep_launch_dependents();
    x_to_f16_rows_norm<2>(x, k, norm_w, eps, xh, row_unscale);
}

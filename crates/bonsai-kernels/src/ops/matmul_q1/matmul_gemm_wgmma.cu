// Prefill / image GEMM on Hopper's warpgroup MMA (wgmma, sm_90a): `gemm_wgmma`, the
// `*_gemm_wgmma` entry points (matmul_q1.cu's entry macro). Same inputs, numerics and pre-pass
// as gemm_f16_mma (matmul_gemm_f16.cu: x rows scaled by 2^e and rounded to f16 in pair-slot
// order, weights decoded exactly to (code value) * d in f16, f32 accumulation over all of K,
// 2^-e applied in the epilogue), so the error bound is the same.
//
// Roles are swapped against gemm_f16_mma: the WEIGHTS are wgmma's A operand (M = 64 weight rows
// per warpgroup), decoded from the lane words straight into registers (A may come from
// registers: the m16n8k16 A layout per warp, i.e. rows g and g + 8 of the warp's 16 are two
// B-fragment decodes of gemm_f16_mma), and the f16 ACTIVATIONS are B (N = 128 tokens), read by
// the tensor cores from shared memory in the 128-byte swizzle. So no decoded weight ever goes
// through shared memory.
//
// CTA = 4 warpgroups (512 threads) = 256 weight rows x BN tokens (BN 128: `_gemm_wgmma`; 64:
// `_gemm_wgmma_n64`, twice the CTAs, for the N = 4096 shapes whose 128-token grid leaves SMs
// idle). 256 rows halve the activation traffic per FLOP of a 128-row CTA. The wide tile
// (`_gemm_wgmma_n256`) is 2 warpgroups (256 threads) = 128 weight rows x 256 tokens: a warpgroup's
// decode of its 64 rows feeds wgmmas of 256 tokens, so per tensor clock it issues a quarter of
// what a 64-token warpgroup does (the 64- and 128-token tiles are issue-bound: the decode, the
// copies and the chain's bookkeeping take most of each SM sub-partition's issue slots; 128
// accumulators per thread leave room for only two warpgroups' registers). K advances through a
// STAGES-deep cp.async ring of 128-group stages: the group's activation tile (two 64-k halves of
// BN rows x 128 B, 16-byte chunk c of token row r at chunk position c ^ (r % 8): the wgmma
// 128-byte swizzle), the rows' lane words, their scales (through registers, one group ahead,
// as in gemm_f16_mma).
//
// The chain: the decode of A must not leave the tensor cores idle. Each warpgroup keeps its
// wgmmas in flight without end: every wgmma m64nBNk16 (one k16 step) is its own commit group,
// and before decoding step s of group g the warpgroup waits only until at most 7 are pending,
// which retires step s of group g - 1, the last reader of step s's A registers (a[s]: 8 distinct
// register sets, one per step, so the wait is the only ordering the decode needs). So a step's
// decode (Q1 2, Q2 ~4 instructions per register) runs while the warpgroup's previous 7 wgmmas
// execute, and one CTA barrier per group (the ring slot's copies landed) holds back only issue:
// the warpgroups' queued wgmmas keep the tensor cores busy while they wait there. The barrier of
// group g refills the slot of group g - 2, whose wgmmas every warpgroup retired before reaching
// it (group g - 1's may still be reading theirs), so AHEAD = STAGES - 2 groups are in flight.
// ptxas keeps such a chain asynchronous only if no non-wgmma instruction defines an accumulator
// or A register between a wgmma and the wait that retires it (else it serializes every wgmma of
// the kernel: infos C7513 / C7515, which scripts/compile-kernels.sh fails on); the main loop is
// therefore entered unconditionally (a zero-trip path's accumulator zeroing was laid out inside
// the chain).
// Before: per group decode all 8 steps, 8 wgmma, wait for all of them, two groups per CTA
// barrier; the barrier re-aligned the warpgroups, so they decoded at the same time while the
// tensor cores idled (docs/kernel-notes.md, "Prefill GEMMs (f16 mma.sync, wgmma)").
// Tried and dropped: 128-row CTAs (2 per SM), one group per barrier without the chain (both
// slower on every shape).
//
// Split K (SPLIT = true, `_gemm_wgmma_n64_split`, `_n256_split`): for grids that leave most SMs
// idle (a batched decode step: one 64-token tile, 16 to 24 weight tiles), a 1-D grid in which CTA
// c runs split z = c % S of output tile c / S (token tile / row_tiles, row tile tile0 + (c / S) %
// row_tiles, as the unsplit grid's (x, y); S = ceil(G / P) splits of P = split_groups groups, so
// a tile's splits are neighbours in the grid). Split z runs groups [z P, min((z + 1) P, G)),
// stores its raw f32 accumulators to `partials`, and the CTA that arrives last at the tile's
// counter adds the splits' partials in split order (so the result does not depend on the arrival
// order) before the epilogue. `tile0`: the row tiles from there on (a grid's tail, below).
// The tail of a grid of whole waves and part of one more: the unsplit launch runs the row tiles
// that fill the whole waves, and a split launch the last row tiles (tile0 the first of them),
// spreading the part-wave's chains over the SMs.
// Where a CTA's time is its chain of K groups (about 1.5 us per group whatever the token count:
// docs/kernel-notes.md, "Batched decode"), S splits cut it S-fold for one extra partial round trip.
//
// SwiGLU: local row lr = 16 b + r holds the gate (r < 8) or up (r >= 8) row of feature
// 8 b + r % 8 of the tile, so a thread's accumulators of rows g and g + 8 are the gate and up
// of one feature (128 features per CTA).
//
// Speed of light (H200): dense f16 tensor rate ~990 TFLOP/s on paper (what cuBLAS and the
// mma.sync kernel reach: docs/kernel-notes.md, "Prefill GEMMs (f16 mma.sync, wgmma)").

#define QW_WARPGROUPS 4
#define QW_ROWS (64 * QW_WARPGROUPS)
#define QW_THREADS (128 * QW_WARPGROUPS)
// The 256-token tile's warpgroups (its accumulators fill a thread's registers).
#define QW_WIDE_WARPGROUPS 2
#define QW_WIDE_THREADS (128 * QW_WIDE_WARPGROUPS)
// The wgmma B tile's alignment (the 128-byte swizzle repeats every 8 rows = 1024 bytes).
#define QW_ALIGN 1024

// Shared-memory layout of one ring stage: the activation tile (two 64-k halves of BN rows x
// 128 B), the rows' lane words, their scales; BYTES keeps every stage 1024-byte aligned.
template <int BITS, int BN, int ROWS_>
struct QwStage {
    static constexpr int ROWS = ROWS_;
    static constexpr int WORDS = LAYOUT_LANES * BITS;  // lane words per row and group
    static constexpr int X_HALF_BYTES = BN * 128;
    static constexpr int X_BYTES = 2 * X_HALF_BYTES;
    static constexpr int W_BYTES = ROWS * WORDS * 4;
    static constexpr int D_BYTES = ROWS * 2;
    static constexpr int BYTES = (X_BYTES + W_BYTES + D_BYTES + QW_ALIGN - 1) / QW_ALIGN * QW_ALIGN;
};

template <int BITS, int MODE, int BN, int STAGES, bool SPLIT = false, int WARPGROUPS = QW_WARPGROUPS>
__device__ __forceinline__ void gemm_wgmma(const u16* __restrict__ scales, const u32* __restrict__ payload,
                                           const u16* __restrict__ xh, const float* __restrict__ row_unscale,
                                           int m, float* __restrict__ y, int n_out, int k,
                                           float* __restrict__ partials = nullptr,
                                           unsigned* __restrict__ tile_counters = nullptr, int split_groups = 0,
                                           int row_tiles = 0, int pair_tile = -1, int tile0 = 0) {
    constexpr int ROWS = 64 * WARPGROUPS, THREADS = 128 * WARPGROUPS, ACC = BN / 2, STEPS = GROUP_SIZE / 16;
    using S = QwStage<BITS, BN, ROWS>;
    // Group it's barrier refills the slot of group it - 2: each warpgroup reaches that barrier
    // having retired every wgmma up to the last of group it - 2 (the wait before each step's
    // decode), while up to STEPS - 1 of group it - 1 may still read theirs. So AHEAD = STAGES - 2
    // groups are in flight ahead of the one consumed.
    constexpr int AHEAD = STAGES - 2;
    static_assert(AHEAD >= 1, "the ring needs a group in flight beyond the two being retired");
    extern __shared__ float4 qwgmma_smem[];
    // The dynamic window's base is only 16-byte aligned by contract: round up (the launcher
    // allocates QW_ALIGN extra bytes). Offsetting the window's own pointer (not rebuilding one from
    // an integer) keeps it a shared-memory pointer for the compiler: shared loads and stores, not
    // generic ones with 64-bit address arithmetic.
    unsigned char* smem = reinterpret_cast<unsigned char*>(qwgmma_smem) +
                          (QW_ALIGN - smem_addr(qwgmma_smem) % QW_ALIGN) % QW_ALIGN;

    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const int g = lane / 4, t = lane % 4;
    const int groups = k / GROUP_SIZE;
    // The output tile (row tile `tile`, tokens from tok0), the split and the groups this CTA runs:
    // [g_begin, g_begin + n_groups).
    // An unsplit CTA's row tile is blockIdx.x, or `pair_tile` where a pair entry point maps the
    // grid's x onto one of its two matrices.
    int tile = pair_tile >= 0 ? pair_tile : (int)blockIdx.x, tok0 = blockIdx.y * BN, split_id = 0, g_begin = 0,
        n_groups = groups;
    const int splits = SPLIT ? (groups + split_groups - 1) / split_groups : 1;
    if constexpr (SPLIT) {
        const int output_tile = blockIdx.x / splits;
        tile = tile0 + output_tile % row_tiles;
        tok0 = output_tile / row_tiles * BN;
        split_id = blockIdx.x % splits;
        g_begin = split_id * split_groups;
        n_groups = min(split_groups, groups - g_begin);
    }
    // This thread's A rows: warpgroup warp / 4 has local rows 64 (warp / 4) .. +63, warp w % 4 of
    // it rows 16 (w % 4) .. +15, and the lane rows g and g + 8 of those.
    const int lr0 = (warp / 4) * 64 + (warp % 4) * 16 + g, lr1 = lr0 + 8;
    // Threads 0 .. ROWS-1 carry the scale of local row threadIdx.x through the pipeline.
    const bool carries_scale = threadIdx.x < ROWS;
    const int my_row = carries_scale ? gemm_weight_row<MODE, ROWS>(tile, threadIdx.x, n_out) : -1;

    auto x_tile = [&](int slot) { return smem + slot * S::BYTES; };
    auto w_tile = [&](int slot) { return reinterpret_cast<u32*>(smem + slot * S::BYTES + S::X_BYTES); };
    auto d_tile = [&](int slot) { return reinterpret_cast<u16*>(smem + slot * S::BYTES + S::X_BYTES + S::W_BYTES); };
    auto load_scale = [&](int kb) -> u16 {
        return my_row >= 0 ? __ldg(scales + (long long)my_row * groups + kb) : (u16)0;
    };
    // cp.async copies of group kb into ring slot `slot`; tokens past m read zeros. Copy j of a
    // thread (index i = threadIdx.x + j THREADS) takes the same activation chunk (token row r = i /
    // 16, 16-byte chunk c = i % 16, 8 per 64-k half) and the same lane word (local row lr = i /
    // WORDS, word w = i % WORDS = lane * BITS + plane) in every group; only the group's offsets
    // move: kb * GROUP_SIZE for the activations, layout_word(G, kb, 0, 0) for the lane words
    // (layout_word(G, kb, t, p) = layout_word(G, kb, 0, 0) + layout_word(G, 0, t, p); the first
    // holds the layout block's runtime modulo, once per group). How a thread finds its copies:
    // - BN 64 holds each copy's source and stage offset in registers from before the loop, so a
    //   group's copy costs an add (its tensor work per group is half of BN 128's for the same
    //   copy and decode issue);
    // - BN 128 and 256 (4 and 16 activation chunks a thread) use that chunk j's token row is r0 +
    //   j THREADS / 16, a multiple of 8 rows past r0 (so the same swizzle) in the same column c:
    //   one base source and stage offset, and a constant stride per chunk; in a full token tile
    //   a chunk then costs a pointer step and the copy. BN 256 holds its few lane-word copies;
    //   BN 128 (held beside its 64 accumulators, they spill) steps one pointer by a fixed row
    //   stride in a full row tile (w_base below) and recomputes them in a rolled loop in the last.
    constexpr int X_CHUNKS = BN * 16 / THREADS, W_COPIES = ROWS * S::WORDS / THREADS;
    static_assert(X_CHUNKS * THREADS == BN * 16 && W_COPIES * THREADS == ROWS * S::WORDS,
                  "every thread copies the same number of chunks and words");
    constexpr bool HOLD_X = BN == 64, HOLD_W = BN != 128;
    constexpr int X_HELD = HOLD_X ? X_CHUNKS : 1, W_HELD = HOLD_W ? W_COPIES : 1;
    constexpr int X_ROW_STEP = THREADS / 16;
    static_assert(HOLD_X || X_ROW_STEP % 8 == 0, "strided chunks keep their row's swizzle");
    // Group 0's sources (nullptr past m / n_out) and the chunks' stage offsets (128-byte swizzle).
    const u16* x_source_held[X_HELD];
    int x_offset_held[X_HELD];
    const u32* w_source_held[W_HELD];
    // The strided chunks' first token row, base source (meaningful only while r0 < m - tok0) and
    // stage offset.
    const int x_r0 = threadIdx.x / 16, x_c = threadIdx.x % 16;
    const int x_rows_left = m - tok0 - x_r0;
    const long long x_row_stride = (long long)X_ROW_STEP * k;
    const u16* x_base = xh + (x_rows_left > 0 ? (long long)(tok0 + x_r0) * k + x_c * 8 : 0);
    const int x_base_offset = (x_c / 8) * S::X_HALF_BYTES + x_r0 * 128 + (((x_c % 8) ^ (x_r0 & 7)) * 16);
    // Every token row of the tile exists (all but a prompt's last tile): no copy needs a predicate.
    const bool x_tile_full = tok0 + BN <= m;
    if constexpr (HOLD_X) {
#pragma unroll
        for (int j = 0; j < X_CHUNKS; ++j) {
            const int i = threadIdx.x + j * THREADS, r = i / 16, c = i % 16;
            x_source_held[j] = tok0 + r < m ? xh + (long long)(tok0 + r) * k + c * 8 : nullptr;
            x_offset_held[j] = (c / 8) * S::X_HALF_BYTES + r * 128 + (((c % 8) ^ (r & 7)) * 16);
        }
    }
    if constexpr (HOLD_W) {
#pragma unroll
        for (int j = 0; j < W_COPIES; ++j) {
            const int i = threadIdx.x + j * THREADS, lr = i / S::WORDS, w = i % S::WORDS;
            const int row = gemm_weight_row<MODE, ROWS>(tile, lr, n_out);
            w_source_held[j] =
                row >= 0 ? layout_row<BITS>(payload, row, groups) + layout_word<BITS>(groups, 0, w / BITS, w % BITS)
                         : nullptr;
        }
    }
    // BN 128's lane-word copies: copy j's local row is copy 0's plus j THREADS / WORDS (its word
    // the same), which is a fixed number of weight rows further in every mode (SwiGLU: of
    // features, so as many rows in each of the gate and up halves). In a full row tile a copy is
    // then a pointer step and the copy instead of the row mapping's ~25 instructions.
    constexpr int W_LR_STEP = THREADS / S::WORDS;
    constexpr int W_ROW_STEP = MODE == MATMUL_SWIGLU ? W_LR_STEP / 2 : W_LR_STEP;
    static_assert(MODE != MATMUL_SWIGLU || W_LR_STEP % 16 == 0, "a SwiGLU row step keeps the gate / up pattern");
    const bool w_tile_strided = (MODE == MATMUL_SWIGLU ? (tile + 1) * (ROWS / 2) : (tile + 1) * ROWS) <= n_out;
    const long long w_row_stride = (long long)W_ROW_STEP * groups * (LAYOUT_LANES * BITS);
    const u32* w_base = nullptr;
    if (!HOLD_W && w_tile_strided) {
        const int w = threadIdx.x % S::WORDS;
        w_base = layout_row<BITS>(payload, gemm_weight_row<MODE, ROWS>(tile, threadIdx.x / S::WORDS, n_out), groups) +
                 layout_word<BITS>(groups, 0, w / BITS, w % BITS);
    }
    // Every lane word this thread copies belongs to an existing row (all but the last row tile).
    bool w_rows_full = HOLD_W;
    if constexpr (HOLD_W) {
#pragma unroll
        for (int j = 0; j < W_COPIES; ++j) w_rows_full = w_rows_full && w_source_held[j] != nullptr;
    }
    auto load_group = [&](int kb, int slot) {
        unsigned char* xs = x_tile(slot);
        u32* ws = w_tile(slot);
        const int group_word = layout_word<BITS>(groups, kb, 0, 0);
        if constexpr (HOLD_X) {
#pragma unroll
            for (int j = 0; j < X_CHUNKS; ++j) {
                const bool valid = x_source_held[j] != nullptr;
                cp_async16_zfill(xs + x_offset_held[j], valid ? x_source_held[j] + kb * GROUP_SIZE : xh, valid);
            }
        } else {  // BN 128 and 256: strided chunks
            const u16* src = x_base + kb * GROUP_SIZE;
            if (x_tile_full) {
                // One pointer stepped by the row stride: an add and the copy per chunk (the
                // zero-filling form below spends ~10 instructions a chunk on its predicate, the
                // fallback source and the reloaded k, most of the loop's issue slots).
#pragma unroll
                for (int j = 0; j < X_CHUNKS; ++j) {
                    cp_async16(xs + x_base_offset + j * X_ROW_STEP * 128, src);
                    src += x_row_stride;
                }
            } else {
#pragma unroll
                for (int j = 0; j < X_CHUNKS; ++j) {
                    const bool valid = j * X_ROW_STEP < x_rows_left;
                    cp_async16_zfill(xs + x_base_offset + j * X_ROW_STEP * 128, valid ? src + j * x_row_stride : xh, valid);
                }
            }
        }
        if constexpr (HOLD_W) {
            if (w_rows_full) {
#pragma unroll
                for (int j = 0; j < W_COPIES; ++j) cp_async4(ws + threadIdx.x + j * THREADS, w_source_held[j] + group_word);
            } else {
#pragma unroll
                for (int j = 0; j < W_COPIES; ++j) {
                    u32* dst = ws + threadIdx.x + j * THREADS;
                    if (w_source_held[j] != nullptr) {
                        cp_async4(dst, w_source_held[j] + group_word);
                    } else {
                        *dst = 0u;  // decodes to -0 with the zero scale
                    }
                }
            }
        } else if (w_tile_strided) {
            const u32* src = w_base + group_word;
#pragma unroll
            for (int j = 0; j < W_COPIES; ++j) {
                cp_async4(ws + threadIdx.x + j * THREADS, src);
                src += w_row_stride;
            }
        } else {
#pragma unroll 1
            for (int j = 0; j < W_COPIES; ++j) {
                const int i = threadIdx.x + j * THREADS, lr = i / S::WORDS, w = i % S::WORDS;
                const int row = gemm_weight_row<MODE, ROWS>(tile, lr, n_out);
                if (row >= 0) {
                    cp_async4(ws + i, layout_row<BITS>(payload, row, groups) + group_word +
                                          layout_word<BITS>(groups, 0, w / BITS, w % BITS));
                } else {
                    ws[i] = 0u;  // decodes to -0 with the zero scale
                }
            }
        }
    };

    float acc[ACC];
#pragma unroll
    for (int i = 0; i < ACC; ++i) acc[i] = 0.0f;

#pragma unroll
    for (int s = 0; s < AHEAD; ++s) {
        if (s < n_groups) {
            load_group(g_begin + s, s);
            if (carries_scale) d_tile(s)[threadIdx.x] = load_scale(g_begin + s);
        }
        cp_async_commit();
    }

    // The A fragments of the 8 k16 steps of a group; step s's registers are rewritten for the next
    // group once that group's wait has retired this group's step-s wgmma.
    u32 a[STEPS][4];
    // At least one group: K is a positive multiple of 128 (checked with the weights) and every
    // split is non-empty (the launcher's grid). The loop is entered unconditionally because a
    // zero-trip path's own accumulator zeroing, laid out between the loop's wgmmas and the final
    // wait, makes ptxas serialize every wgmma of the kernel (C7515).
#pragma unroll 1
    for (int it = 0;; ++it) {
        // Group it landed: one commit per group, the newest AHEAD - 1 may still be in flight.
        cp_async_wait<AHEAD - 1>();
        // This thread's copies (and scale stores) of the group are done; the proxy fence makes its
        // activation chunks visible to the tensor cores' reads after the barrier.
        fence_proxy_async_smem();
        // The barrier only holds back issue: each warpgroup's wgmmas of group it - 1 keep the
        // tensor cores busy while it waits here.
        __syncthreads();
        const int next = it + AHEAD;
        u16 d_next = 0;
        if (next < n_groups) {
            load_group(g_begin + next, next % STAGES);
            if (carries_scale) d_next = load_scale(g_begin + next);
        }
        cp_async_commit();
        const int slot = it % STAGES;
        const u32* ws = w_tile(slot);
        const u16* ds = d_tile(slot);
        const MmaGroupScale sc0 = mma_group_scale<BITS>(ds[lr0]), sc1 = mma_group_scale<BITS>(ds[lr1]);
        const MmaLaneWords w0 = mma_lane_words<BITS>(ws + lr0 * S::WORDS + t * BITS);
        const MmaLaneWords w1 = mma_lane_words<BITS>(ws + lr1 * S::WORDS + t * BITS);
        const unsigned char* xs = x_tile(slot);
        // The descriptors' low word once per group: each step's is a constant past it.
        const u32 xs_lo = wgmma_desc_lo(xs);
#pragma unroll
        for (int s = 0; s < STEPS; ++s) {
            // One commit group per wgmma: at most STEPS - 1 pending retires the previous group's
            // step s, the last reader of a[s]. The decode below then runs while the STEPS - 1
            // wgmmas issued before it keep the tensor cores busy.
            wgmma_wait<STEPS - 1>();
            a[s][0] = mma_pair_f16x2<BITS>(w0, 2 * s, sc0);
            a[s][1] = mma_pair_f16x2<BITS>(w1, 2 * s, sc1);
            a[s][2] = mma_pair_f16x2<BITS>(w0, 2 * s + 1, sc0);
            a[s][3] = mma_pair_f16x2<BITS>(w1, 2 * s + 1, sc1);
            wgmma_fence();
            wgmma_f16_m64k16_rs<BN>(acc, a[s], xs + (s / 4) * S::X_HALF_BYTES, 2 * (s % 4),
                                    xs_lo + (s / 4) * (S::X_HALF_BYTES / 16));
            wgmma_commit();
        }
        // The scales of the refilled slot (group it - 2's) were last read before group it - 1's
        // barrier.
        if (next < n_groups && carries_scale) d_tile(next % STAGES)[threadIdx.x] = d_next;
        if (it + 1 == n_groups) break;
    }

    wgmma_wait<0>();
    cp_async_wait<0>();

    if constexpr (SPLIT) {
        // Partial layout [split][tile][accumulator][thread]: each store and load is coalesced.
        const long long tiles = gridDim.x / splits;
        const long long tile_id = blockIdx.x / splits;
        auto at = [&](int split, int i) { return ((split * tiles + tile_id) * ACC + i) * THREADS + threadIdx.x; };
#pragma unroll
        for (int i = 0; i < ACC; ++i) partials[at(split_id, i)] = acc[i];
        if (!split_k_arrived_last(tile_counters + tile_id, splits)) return;
        // Each split's loads of a batch of accumulators are independent and in flight together,
        // so the merge waits for about (ACC / batch) x splits load latencies, not ACC x splits
        // (one dependent chain per accumulator cost more than the splits' main loops).
        // The batch bounds the extra registers. The sum order stays split 0, 1, 2, ...
        constexpr int BATCH = ACC < 16 ? ACC : 16;
#pragma unroll
        for (int i0 = 0; i0 < ACC; i0 += BATCH) {
#pragma unroll
            for (int i = i0; i < i0 + BATCH; ++i) acc[i] = __ldcg(partials + at(0, i));
#pragma unroll 1
            for (int z = 1; z < splits; ++z) {
                float p[BATCH];
#pragma unroll
                for (int i = 0; i < BATCH; ++i) p[i] = __ldcg(partials + at(z, i0 + i));
#pragma unroll
                for (int i = 0; i < BATCH; ++i) acc[i0 + i] += p[i];
            }
        }
    }

    // Epilogue: acc[4j + e] is (row lr0, token 8j + 2t + e), acc[4j + 2 + e] (row lr1, same token).
    // SwiGLU: row lr0 is the gate of feature row0 (gemm_weight_row returns the feature index for a
    // gate row), lr1 its up.
    // Add: a batch of EPI_J token pairs' old values is loaded before any of them is stored. The
    // compiler cannot prove that a store to y misses the next load from y, so a read-add-store per
    // output ran as BN / 2 dependent round trips a thread (the residual is in L2 or DRAM); loaded
    // first, a batch costs one.
    const int row0 = gemm_weight_row<MODE, ROWS>(tile, lr0, n_out);
    const int row1 = gemm_weight_row<MODE, ROWS>(tile, lr1, n_out);
    constexpr int EPI_J = BN / 8 < 4 ? BN / 8 : 4;
#pragma unroll
    for (int j0 = 0; j0 < BN / 8; j0 += EPI_J) {
        float old[EPI_J][2][2], unscale[EPI_J][2];
#pragma unroll
        for (int j = 0; j < EPI_J; ++j)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int tok = tok0 + 8 * (j0 + j) + 2 * t + e;
                const float* yrow = y + (long long)tok * n_out;
                unscale[j][e] = tok < m ? row_unscale[tok] : 0.0f;
                if constexpr (MODE == MATMUL_ADD) {
                    old[j][e][0] = tok < m && row0 >= 0 ? yrow[row0] : 0.0f;
                    old[j][e][1] = tok < m && row1 >= 0 ? yrow[row1] : 0.0f;
                }
            }
#pragma unroll
        for (int j = 0; j < EPI_J; ++j)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int tok = tok0 + 8 * (j0 + j) + 2 * t + e;
                if (tok >= m) continue;
                float* yrow = y + (long long)tok * n_out;
                const float v0 = acc[4 * (j0 + j) + e] * unscale[j][e], v1 = acc[4 * (j0 + j) + 2 + e] * unscale[j][e];
                if (MODE == MATMUL_SWIGLU) {
                    if (row0 >= 0) yrow[row0] = silu_mul(v0, v1);
                    continue;
                }
                if (row0 >= 0) yrow[row0] = MODE == MATMUL_ADD ? old[j][e][0] + v0 : v0;
                if (row1 >= 0) yrow[row1] = MODE == MATMUL_ADD ? old[j][e][1] + v1 : v1;
            }
    }
}

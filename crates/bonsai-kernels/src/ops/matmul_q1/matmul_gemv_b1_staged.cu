// Decode GEMV on the binary tensor core with the CTA's weights staged in shared memory:
// `gemv_b1s` (templates; matmul_q1.cu instantiates). Same arithmetic, planes and epilogues as
// gemv_b1 (matmul_gemv_b1.cu); what differs is where the weights wait.
//
// Why (docs/kernel-notes.md, round 11): in the decode graph a GEMV's weights do not depend on the
// previous kernel, but gemv_b1 streams them through a register ring of 512-thread CTAs that fill
// an SM's register file, so the next GEMV's CTAs cannot start beside it (programmatic dependent
// launch) and every launch pays the first DRAM round trip and the stream after the previous
// kernel ends. Here a CTA of 256 threads (<= 128 registers) and <= ~110 KB of shared memory
// leaves room for the next GEMV's CTA on the same SM, which cp.asyncs its whole weight slice (or
// the first `stages` chunks of it) into shared memory BEFORE griddep_wait: by the time x's planes
// are ready, the weights mostly are too, and the loop reads them at shared-memory speed.
//
// Work: a CTA owns tiles_per_cta (T) tiles of 16 rows (gemv_tc's rows: SwiGLU tiles are 8 gate +
// their 8 up rows). The slice is cut into chunks of slot_tiles (TS) tiles x slot_groups (KC)
// groups, tile sets outer, K ranges inner; chunks pass through a ring of `stages` (R) slots. Warp
// w works on tile w / S of the chunk's set, on units (4-group blocks) u = first + (w % S),
// step S (S = splits = warps / TS); its accumulator lives across the K ranges of one tile set.
// The partials of a tile's S warps meet in gemv_store_outputs in split order.
//
// Slot layout (u32 words): TS * 16 payload rows of row_words (the chunk's KC * 4 * BITS words of
// that row, padded so rows start 16 bytes apart modulo 128: the 8 rows g of a fragment read
// conflict-free), then TS * 16 scale rows of scale_row u16 (KC f16 scales, padded by 4).
// Dynamic shared memory: R slots | planes [groups][B1_GROUP_WORDS] | (s, X) [groups][2] |
// partials [T * S][16][2] f32 (geometry in tc_geometry.rs: b1s_geometry, same formulas).

#define B1S_THREADS 256
// Rows of x's planes are whole K here: the GEMV's K (<= 12288 at every Bonsai shape) fits.

// Payload words per slot row for KC groups: KC * 4 * BITS rounded up to 32 words (128 bytes),
// plus 4 words (16 bytes).
template <int BITS>
__device__ __forceinline__ int b1s_row_words(int kc) {
    return (kc * LAYOUT_LANES * BITS + 31) / 32 * 32 + 4;
}
__device__ __forceinline__ int b1s_scale_row(int kc) { return kc + 4; }
template <int BITS>
__device__ __forceinline__ int b1s_slot_words(int ts, int kc) {
    return ts * TC_TILE_ROWS * (b1s_row_words<BITS>(kc) + b1s_scale_row(kc) / 2);
}

// cp.async of chunk c (tile set c / n_kc, groups [(c % n_kc) KC, + KC)) into `slot`: 16-byte
// payload pieces, 8-byte scale quads, spread over the CTA's threads; rows past the CTA's T tiles
// are skipped (no warp reads them). One commit group per chunk, issued by the caller.
template <int BITS, int MODE>
__device__ __forceinline__ void b1s_issue_chunk(u32* slot, const u16* __restrict__ scales,
                                                const u32* __restrict__ payload, int c, int n_kc, int groups,
                                                int n_out, int cta, int tiles_per_cta, int ts_tiles, int kc) {
    const int set = c / n_kc, g0 = (c % n_kc) * kc;
    const int cg = min(kc, groups - g0);
    const int rows = min(ts_tiles, tiles_per_cta - set * ts_tiles) * TC_TILE_ROWS;
    const int row_words = b1s_row_words<BITS>(kc), scale_row = b1s_scale_row(kc);
    u16* slot_scales = reinterpret_cast<u16*>(slot + ts_tiles * TC_TILE_ROWS * row_words);
    const int payload_pieces = cg * BITS, per_row = payload_pieces + cg / LAYOUT_BLOCK_GROUPS;
    for (int i = threadIdx.x; i < rows * per_row; i += blockDim.x) {
        const int r = i / per_row, p = i - r * per_row;
        const int tile = cta * tiles_per_cta + set * ts_tiles + r / TC_TILE_ROWS;
        const long long wrow = tc_weight_row<MODE>(tile, r % TC_TILE_ROWS, n_out);
        if (p < payload_pieces) {
            const u32* src = layout_row<BITS>(payload, wrow, groups) + g0 * LAYOUT_LANES * BITS + 4 * p;
            cp_async16(slot + r * row_words + 4 * p, src);
        } else {
            const int q = p - payload_pieces;
            cp_async8(slot_scales + r * scale_row + LAYOUT_BLOCK_GROUPS * q,
                      scales + wrow * groups + g0 + LAYOUT_BLOCK_GROUPS * q);
        }
    }
}

// The GEMV (one token), groups % 4 == 0 (4-group layout blocks). Geometry arguments as above;
// blockDim.x = slot_tiles * splits * 32 <= B1S_THREADS.
template <int BITS, int MODE, bool GROUP_OUT>
__device__ __forceinline__ void gemv_b1s_body(const u16* __restrict__ scales, const u32* __restrict__ payload,
                                              const u32* planes, const u32* gsx_all, const float* group_sq,
                                              float* __restrict__ y, int n_out, int k, int tiles_per_cta,
                                              int splits, int ts_tiles, int kc, int stages, int norm, float norm_eps,
                                              const B1PlanesOut& planes_out) {
    constexpr int NB = LAYOUT_BLOCK_GROUPS;
    extern __shared__ uint4 b1s_smem[];
    const int cta = blockIdx.x;
    const int groups = k / GROUP_SIZE;
    const int n_kc = (groups + kc - 1) / kc;
    const int n_chunks = (tiles_per_cta + ts_tiles - 1) / ts_tiles * n_kc;
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const int g = lane / 4, t = lane % 4;
    const int tl = warp / splits, split = warp % splits;  // tile within the chunk's set, K split
    const int slot_words = b1s_slot_words<BITS>(ts_tiles, kc);
    const int row_words = b1s_row_words<BITS>(kc), scale_row = b1s_scale_row(kc);
    u32* ring = reinterpret_cast<u32*>(b1s_smem);
    u32* xb = ring + stages * slot_words;
    u32* gsx = xb + groups * B1_GROUP_WORDS;
    float* partial = reinterpret_cast<float*>(gsx + 2 * groups);

    // Weights never change: the first `stages` chunks are requested before the wait for the
    // previous kernel (programmatic dependent launch); one commit group per chunk, empty ones too,
    // so "chunk c has landed" is always "at most stages - 1 groups pending".
    for (int c = 0; c < stages; ++c) {
        if (c < n_chunks)
            b1s_issue_chunk<BITS, MODE>(ring + c * slot_words, scales, payload, c, n_kc, groups, n_out, cta,
                                        tiles_per_cta, ts_tiles, kc);
        cp_async_commit();
    }

    griddep_wait();
    // x's planes and (s, X), written by the previous kernel: plain loads (L2), then the first
    // chunk's barrier publishes them.
    {
        const uint4* src = reinterpret_cast<const uint4*>(planes);
        uint4* dst = reinterpret_cast<uint4*>(xb);
        for (int i = threadIdx.x; i < groups * B1_GROUP_WORDS / 4; i += blockDim.x) dst[i] = src[i];
        for (int i = threadIdx.x; i < 2 * groups; i += blockDim.x) gsx[i] = gsx_all[i];
    }
    __shared__ float norm_sq[B1S_THREADS / WARP_SIZE][GEMV_MAX_TOKENS];
    if (lane == 0) norm_sq[warp][0] = 0.0f;

    const u32 top_weight = 1u << (8 * (B1_WORDS - 1) + 1);
    const u32 top = t == 3 ? 0u - top_weight : top_weight;
    const int lane_shift = 2 * t + (BITS == 1 ? 1 : 0);
    float acc = 0.0f;
    for (int c = 0; c < n_chunks; ++c) {
        cp_async_wait_upto(stages - 1);
        __syncthreads();  // every thread's pieces of chunk c have landed (c = 0: and the planes)
        const int set = c / n_kc, kci = c % n_kc, g0 = kci * kc;
        const int tile_local = set * ts_tiles + tl;
        const u32* slot = ring + (c % stages) * slot_words;
        const u16* slot_scales = reinterpret_cast<const u16*>(slot + ts_tiles * TC_TILE_ROWS * row_words);
        if (kci == 0) acc = 0.0f;
        if (tile_local < tiles_per_cta) {  // warp-uniform
            const int u0 = g0 / NB, u1 = min(g0 + kc, groups) / NB;
            const u32* wrow[2] = {slot + (tl * TC_TILE_ROWS + g) * row_words + t * NB * BITS,
                                  slot + (tl * TC_TILE_ROWS + g + 8) * row_words + t * NB * BITS};
            const u16* srow[2] = {slot_scales + (tl * TC_TILE_ROWS + g) * scale_row,
                                  slot_scales + (tl * TC_TILE_ROWS + g + 8) * scale_row};
            for (int u = u0 + split; u < u1; u += splits) {
                const int off = (u - u0) * NB;  // the unit's first group within the chunk
                const u32* w[2] = {wrow[0] + off * LAYOUT_LANES * BITS, wrow[1] + off * LAYOUT_LANES * BITS};
                const u16* sc[2] = {srow[0] + off, srow[1] + off};
                TcUnit<BITS, NB> r;
                tc_load(r, w, sc);
                u32 sums[NB / 2][2][2];
                float d[NB / 2][2];
                b1_unit_sums<BITS, NB>(r, xb + u * NB * B1_GROUP_WORDS + lane * B1_WORDS, top, lane_shift, t, sums, d);
                acc = b1_unit_finish<NB>(sums, d, gsx + 2 * u * NB, t, acc);
            }
            if (kci == n_kc - 1) {
                // Lanes t and t ^ 2 hold the same row's two groups of every pair.
                const float row_sum = acc + __shfl_xor_sync(FULL_MASK, acc, 2);
                if (t < 2) partial[((tile_local * splits + split) * TC_TILE_ROWS + g + 8 * t) * 2] = row_sum;
            }
        }
        __syncthreads();  // slot c % stages is free
        if (c + stages < n_chunks)
            b1s_issue_chunk<BITS, MODE>(ring + (c % stages) * slot_words, scales, payload, c + stages, n_kc, groups,
                                        n_out, cta, tiles_per_cta, ts_tiles, kc);
        cp_async_commit();
    }

    // Fused RMSNorm: as gemv_b1 (warp 0 sums the groups' squares in group order).
    if (norm && warp == 0) {
        float ss = 0.0f;
        for (int i = lane; i < groups; i += WARP_SIZE) ss += group_sq[i];
        ss = warp_sum(ss);
        if (lane == 0) norm_sq[0][0] = ss;
    }
    __syncthreads();
    gemv_store_outputs<MODE, 1>(partial, 1, y, n_out, k, tiles_per_cta, splits, norm != 0, norm_eps, norm_sq, cta);
    if (GROUP_OUT) b1_planes_epilogue<MODE>(y, n_out, tiles_per_cta, cta, planes_out);
}

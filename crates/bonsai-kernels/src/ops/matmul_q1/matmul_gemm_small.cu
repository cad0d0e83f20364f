// Batched-decode GEMM, m = 2..SM_MAX_TOKENS tokens: `gemm_small` (the `*_gemm_small8`, `_small16`
// and `_small32` entry points, matmul_q1.cu's entry macro). Templates only. Past 32 tokens (8
// n-tiles) it lost to the wgmma GEMM by ~30 %: its slice of x then holds 2 units of K, and the
// splits' partials grow with m (docs/kernel-notes.md, "Small batches: the small-m GEMM").
//
// Same inputs and numerics as gemm_f16_mma / gemm_wgmma: the f16 pre-pass's rows xh (x * 2^e in
// pair-slot order, x_to_f16_rows), weights decoded exactly to (code value) * d in f16
// (mma_pair_f16x2), f32 accumulation, 2^-e in the epilogue; so the same error bound. What differs
// is where the operands live. At a few tokens a step reads every weight once for almost no
// arithmetic, so the GEMM is a weight stream like the one-token GEMV: each warp streams its 16
// rows' lane words from global memory straight into registers (gemv_tc's unit ring: TcUnit /
// tc_load, 16-byte evict-first loads, units in flight ahead of the one decoded), decodes them into
// mma.sync m16n8k16 A fragments and multiplies them by B fragments of the CTA's activation slice
// in shared memory, NT n-tiles of 8 tokens. No barrier inside the loop and no weight passes
// through shared memory (the wgmma GEMM's ring stages every group through it, behind a CTA
// barrier per group: at one 64-token tile for 16 tokens its chain of groups set the step).
//
// Grid: x = row blocks of SM_WARPS tiles (a warp per tile of 16 rows; SwiGLU tiles hold 8 gate
// rows then their 8 up rows, tc_weight_row), y = K splits of `split_units` layout units each. The
// warps of a CTA share its slice of xh: NT * 8 token rows (rows past m zero-filled) of the split's
// slots, each row padded by SM_PAD_WORDS so that the 32 lanes' B-fragment words (token g, word
// 8 s + t (+ 4)) fall in 32 distinct banks. Two accumulator chains per n-tile (even and odd k16
// steps) halve the mma dependency chain a warp waits on.
// With gridDim.y > 1 every CTA stores its raw accumulators to `partials`, and the CTA that arrives
// last at its row block's counter adds the splits in split order (fixed: the result does not
// depend on the arrival order) before the epilogue, as gemm_wgmma's split does.
//
// Speed of light (H200): the weight stream, as for the one-token GEMV (1-bit 8B: 1.07 GB a step at
// ~4.8 TB/s, ~0.22 ms); the B slices add NT * 8 * K * 2 bytes of L2 reads per row block.

#define SM_MAX_TOKENS 32
#define SM_WARPS 16
#define SM_THREADS (SM_WARPS * WARP_SIZE)
#define SM_PAD_WORDS 4
// Units in flight beyond the one decoded.
#define SM_AHEAD 2
// Splits whose partials the merging CTA loads before adding any.
#define SM_MERGE_BATCH(NT) ((NT) <= 2 ? 4 : 1)
// Accumulator chains per n-tile: two (even and odd k16 steps) while one or two n-tiles leave a
// warp few independent mma per step, one past that (registers).
#define SM_CHAINS(NT) ((NT) <= 2 ? 2 : 1)

// One layout unit (NB groups) of a warp's tile: decode, then NT mma per k16 step into the step
// parity's chain. `bx`: this lane's B words of the unit's first group (token g of n-tile 0, word t).
template <int BITS, int NT, int NB>
__device__ __forceinline__ void small_unit(float (&c)[SM_CHAINS(NT)][NT][4], const TcUnit<BITS, NB>& r, const u32* bx,
                                           int row_words) {
#pragma unroll
    for (int gi = 0; gi < NB; ++gi) {
        const MmaGroupScale s0 = mma_group_scale<BITS>((u16)(r.d[0][gi / 2] >> (16 * (gi % 2))));
        const MmaGroupScale s1 = mma_group_scale<BITS>((u16)(r.d[1][gi / 2] >> (16 * (gi % 2))));
        const MmaLaneWords w0 = mma_lane_words<BITS>(r.w[0] + gi * BITS);
        const MmaLaneWords w1 = mma_lane_words<BITS>(r.w[1] + gi * BITS);
#pragma unroll
        for (int s = 0; s < GROUP_SIZE / 16; ++s) {
            // A rows g (w0) and g + 8 (w1), slots 16 s + 2t (+1) and 16 s + 8 + 2t (+1).
            u32 a[4];
            a[0] = mma_pair_f16x2<BITS>(w0, 2 * s, s0);
            a[1] = mma_pair_f16x2<BITS>(w1, 2 * s, s1);
            a[2] = mma_pair_f16x2<BITS>(w0, 2 * s + 1, s0);
            a[3] = mma_pair_f16x2<BITS>(w1, 2 * s + 1, s1);
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
                const u32* b = bx + nt * 8 * row_words + gi * (GROUP_SIZE / 2) + 8 * s;
                mma_f16_16x8x16(c[s % SM_CHAINS(NT)][nt], a, b[0], b[4]);
            }
        }
    }
}

template <int BITS, int MODE, int NT, int NB>
__device__ __forceinline__ void gemm_small_body(const u16* __restrict__ scales, const u32* __restrict__ payload,
                                                const u16* __restrict__ xh, const float* __restrict__ row_unscale,
                                                int m, float* __restrict__ y, int n_out, int k,
                                                float* __restrict__ partials, unsigned* __restrict__ counters,
                                                int split_units) {
    constexpr int TOKENS = NT * 8, ACC = NT * 4;
    extern __shared__ uint4 small_smem[];
    u32* xs = reinterpret_cast<u32*>(small_smem);
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const int g = lane / 4, t = lane % 4;
    const int groups = k / GROUP_SIZE, units = groups / NB;
    const int tile = blockIdx.x * SM_WARPS + warp;
    const int u_begin = blockIdx.y * split_units, u_end = min(u_begin + split_units, units);
    const int slots = (u_end - u_begin) * NB * GROUP_SIZE;
    const int row_words = slots / 2 + SM_PAD_WORDS;

    // The weights are never written by any kernel: their first units stream in before the wait
    // for the previous kernel (programmatic dependent launch), as in the GEMVs.
    const u32* wnext[2];
    const u16* snext[2];
    tc_stream_start<BITS, MODE, NB>(scales, payload, tile, g, t, u_begin, n_out, groups, wnext, snext);
    const int w_step = NB * LAYOUT_LANES * BITS, s_step = NB;
    TcUnit<BITS, NB> ring[SM_AHEAD + 1];
    int loaded = u_begin;
#pragma unroll
    for (int a = 0; a <= SM_AHEAD; ++a) {
        if (loaded < u_end) tc_load(ring[a], wnext, snext);
        tc_stream_step(loaded, 1, wnext, snext, w_step, s_step);
    }
    griddep_wait();

    // The CTA's activation slice: 16-byte chunks, token rows past m zero-filled.
    const int row_chunks = slots / 8;
    const u16* x0 = xh + (long long)u_begin * NB * GROUP_SIZE;
    for (int i = threadIdx.x; i < TOKENS * row_chunks; i += SM_THREADS) {
        const int r = i / row_chunks, ch = i % row_chunks;
        const bool valid = r < m;
        cp_async16_zfill(xs + r * row_words + ch * 4, valid ? x0 + (long long)r * k + ch * 8 : xh, valid);
    }
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();

    float c[SM_CHAINS(NT)][NT][4];
#pragma unroll
    for (int p = 0; p < SM_CHAINS(NT); ++p)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) c[p][nt][0] = c[p][nt][1] = c[p][nt][2] = c[p][nt][3] = 0.0f;
    const u32* bx = xs + g * row_words + t;
    int phase = 0;  // ring[phase] holds unit u
    for (int u = u_begin; u < u_end; ++u) {
        // One body per ring slot, so slots are static registers (no moves between slots).
#pragma unroll
        for (int a = 0; a <= SM_AHEAD; ++a) {
            if (a != phase) continue;
            small_unit<BITS, NT, NB>(c, ring[a], bx, row_words);
            if (loaded < u_end) tc_load(ring[a], wnext, snext);
        }
        phase = phase == SM_AHEAD ? 0 : phase + 1;
        tc_stream_step(loaded, 1, wnext, snext, w_step, s_step);
        bx += NB * (GROUP_SIZE / 2);
    }
    float acc[ACC];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[4 * nt + i] = SM_CHAINS(NT) == 2 ? c[0][nt][i] + c[SM_CHAINS(NT) - 1][nt][i] : c[0][nt][i];

    if (gridDim.y > 1) {
        // Partial layout [split][row block][accumulator][thread]: every store and load coalesced.
        const int splits = gridDim.y;
        auto at = [&](int z, int i) {
            return (((long long)z * gridDim.x + blockIdx.x) * ACC + i) * SM_THREADS + threadIdx.x;
        };
#pragma unroll
        for (int i = 0; i < ACC; ++i) partials[at(blockIdx.y, i)] = acc[i];
        if (!split_k_arrived_last(counters + blockIdx.x, splits)) return;
        // SM_MERGE_BATCH splits' loads in flight together; the sum order stays split 0, 1, 2, ...
#pragma unroll 1
        for (int z0 = 0; z0 < splits; z0 += SM_MERGE_BATCH(NT)) {
            float p[SM_MERGE_BATCH(NT)][ACC];
#pragma unroll
            for (int zz = 0; zz < SM_MERGE_BATCH(NT); ++zz)
#pragma unroll
                for (int i = 0; i < ACC; ++i) p[zz][i] = z0 + zz < splits ? __ldcg(partials + at(z0 + zz, i)) : 0.0f;
#pragma unroll
            for (int zz = 0; zz < SM_MERGE_BATCH(NT); ++zz)
#pragma unroll
                for (int i = 0; i < ACC; ++i)
                    if (z0 + zz < splits) acc[i] = z0 + zz == 0 ? p[zz][i] : acc[i] + p[zz][i];
        }
    }

    // Epilogue: acc[4 nt + 2 h + e] is tile row g + 8 h, token 8 nt + 2 t + e. SwiGLU: row g is
    // the gate of feature 8 tile + g, row g + 8 its up. Add: every old value this lane adds to is
    // loaded before the first store (gemm_wgmma's epilogue: a store to y could alias the next
    // load, so interleaved they run one round trip after another).
    float unscale[NT][2];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const int tok = 8 * nt + 2 * t + e;
            unscale[nt][e] = tok < m ? row_unscale[tok] : 0.0f;
        }
    if constexpr (MODE == MATMUL_SWIGLU) {
        const int f = tile * (TC_TILE_ROWS / 2) + g;
        if (f >= n_out) return;
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int tok = 8 * nt + 2 * t + e;
                if (tok < m)
                    y[(long long)tok * n_out + f] =
                        silu_mul(acc[4 * nt + e] * unscale[nt][e], acc[4 * nt + 2 + e] * unscale[nt][e]);
            }
    } else {
        const int row0 = tile * TC_TILE_ROWS + g;
        float old[NT][2][2];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int e = 0; e < 2; ++e)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int tok = 8 * nt + 2 * t + e, row = row0 + 8 * h;
                    old[nt][e][h] = MODE == MATMUL_ADD && tok < m && row < n_out ? y[(long long)tok * n_out + row] : 0.0f;
                }
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int e = 0; e < 2; ++e)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int tok = 8 * nt + 2 * t + e, row = row0 + 8 * h;
                    if (tok < m && row < n_out) y[(long long)tok * n_out + row] = old[nt][e][h] + acc[4 * nt + 2 * h + e] * unscale[nt][e];
                }
    }
}

// NT n-tiles of 8 tokens; the layout's block size (4 groups, or 1 when K % 512 != 0) is the unit.
template <int BITS, int MODE, int NT>
__device__ __forceinline__ void gemm_small(const u16* scales, const u32* payload, const u16* xh,
                                           const float* row_unscale, int m, float* y, int n_out, int k,
                                           float* partials, unsigned* counters, int split_units) {
    if (layout_block_groups(k / GROUP_SIZE) == LAYOUT_BLOCK_GROUPS)
        gemm_small_body<BITS, MODE, NT, LAYOUT_BLOCK_GROUPS>(scales, payload, xh, row_unscale, m, y, n_out, k,
                                                             partials, counters, split_units);
    else
        gemm_small_body<BITS, MODE, NT, 1>(scales, payload, xh, row_unscale, m, y, n_out, k, partials, counters,
                                           split_units);
}

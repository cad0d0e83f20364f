// Decode GEMV on tensor cores, one token: `gemv_tc`. Templates only; matmul_q1.cu instantiates.
// Why (docs/kernel-notes.md, "The decode GEMV (binary tensor core)", measured and
// removed): the CUDA-core GEMVs issued ~3 instructions per weight on predicated adds and
// bookkeeping; here the dot runs on mma.sync.
//
// A tile is 16 weight rows (SwiGLU: 8 gate rows, then their 8 up rows). Per 128-group: mma.sync
// m16n8k16 bf16 over the group's 8 k16 steps into a fresh f32 C; A = the tile's weights built from
// sign bits (Q2: two planes, bit 0 and bit 1 of the code c, into the same C); B = x split exactly
// into three bf16 parts x = hi + mid + lo in three of B's 8 columns. Then C + offset (below) is
// scaled by the row's f16 d into running f32 sums; at the end the three part columns are summed
// within the lane quad. (2..8 tokens, two per n-tile, ran this kernel until the small-m GEMM,
// matmul_gemm_small.cu, replaced it.)
//
// A registers, no per-weight decode (device layout, weight_layout.cu: pair q of lane word w at
// bits 15 - q / 31 - q). For r = 0..7, v = w << r yields two registers, with one LOP3 each:
//   pair q = r     (k16 steps 0-3, k 0..63 of the group):   (v & 0x80008000) ^ 0xBF80BF80 = s
//   pair q = r + 8 (steps 4-7, k 64..127): exponent LSB,    (v & 0x00800080) | 0x3F003F00
//                                                           = 0.5 / 1.0 = 0.75 + 0.25 s
// Q2's bit-0 plane is needed at half scale: 0.5 s, and for q >= 8 the mantissa MSB of w << (q - 9)
// (w >> 1 for q = 8), (. & 0x00400040) | 0x3F003F00 = 0.5 / 0.75 = 0.625 + 0.125 s. B of k
// 64..127 holds 4 x (exact), so there A B = s x + 3 x (Q2: (0.5 s_lo + s_hi) x + 5.5 x), and the
// code value (Q2: c - 1 = 0.5 s_lo + s_hi + 0.5) needs, per group and token, the offset -3 S2 (Q1)
// or 0.5 S - 5.5 S2 (Q2), S = sum of the group's x, S2 = sum of its k 64..127, staged per CTA.
//
// Work split: CTA = tiles_per_cta x splits warps; warp (tile, split) takes the tile's units (a
// unit is one layout block: 4 groups, or 1 when K % 512 != 0) split, split + splits, ..., each
// with one 16-byte load per row and plane, TC_AHEAD units ahead in a register ring. B fragments
// and offsets are staged per CTA in shared memory, chunk_groups groups at a time (all of K on
// every Bonsai shape). Partials of the splits meet in shared memory and are added in split order
// (deterministic).
// Dynamic shared memory (bytes; `tc_smem_bytes` in tc_geometry.rs), each array with one extra
// all-zero group read by lanes that hold no B column / no offset:
//   B [chunk_groups + 1][TC_QUADS][TC_COLS][4 lanes] uint4 | offsets [chunk_groups + 1] f32 |
//   partials [warps][16 rows][2] f32

#define TC_TILE_ROWS 16
// Phase marks for the decode trace (BONSAI_TRACE: CTA 0's marks, trace.rs); nothing in
// production. Mark 0 (the kernel's start, before its wait) is not traced: the trace attributes a
// mark to the kernel released last before it.
#define TC_MARK(i)                  \
    do {                            \
        if ((i) > 0) TRACE_MARK(i); \
    } while (0)
#define TC_QUADS 4          // uint4 of B per (group, column lane): steps 2i and 2i + 1
#define TC_PARTS 3          // x = hi + mid + lo
#define TC_COLS TC_PARTS    // B columns: the token's three parts
#define TC_MAX_THREADS_M1 512
#define TC_SIGN_PAIR 0x80008000u  // pair q <= 7, after << q
#define TC_EXP_PAIR 0x00800080u   // pair q >= 8, after << (q - 8): the bf16 exponent LSB
#define TC_SIGN_ONE 0xBF80BF80u   // sign bits -> +-1.0
#define TC_SIGN_HALF 0xBF00BF00u  // sign bits -> +-0.5
#define TC_EXP_ONE 0x3F003F00u    // exponent LSB -> 0.5 / 1.0; mantissa MSB -> 0.5 / 0.75
#define TC_MANT_PAIR 0x00400040u  // Q2 bit-0 plane, pair q >= 8, after << (q - 9): mantissa MSB
#define TC_HALF_STEPS 4           // k16 steps per half group
#define TC_SECOND_HALF_SCALE 4.0f // B of the second half holds 4 x

// x = hi + mid + lo exactly, each part a bf16 in the high half of the returned f32 bits: hi is
// x truncated to 8 significant bits, r = x - hi is exact (<= 16 significant bits), mid is r
// truncated to 8 bits, lo = r - mid is exact with <= 8 significant bits, i.e. a bf16 (unless
// |x| < ~2^-110, where lo may be an f32 subnormal and bits below 2^-133 are dropped).
__device__ __forceinline__ void tc_split3(float v, u32* part) {
    part[0] = __float_as_uint(v) & 0xFFFF0000u;
    const float r = v - __uint_as_float(part[0]);
    part[1] = __float_as_uint(r) & 0xFFFF0000u;
    part[2] = __float_as_uint(r - __uint_as_float(part[1])) & 0xFFFF0000u;
}

// Local tile row r (0..15) -> weight row to read (clamped into the matrix; outputs past the end
// are computed on the last row and never stored).
template <int MODE>
__device__ __forceinline__ int tc_weight_row(int tile, int r, int n_out) {
    if (MODE == MATMUL_SWIGLU) {
        const int f = min(tile * (TC_TILE_ROWS / 2) + r % (TC_TILE_ROWS / 2), n_out - 1);
        return r < TC_TILE_ROWS / 2 ? f : n_out + f;
    }
    return min(tile * TC_TILE_ROWS + r, n_out - 1);
}

// The start of a lane's weight stream (running pointers, loop-carried so the compiler keeps them
// in registers): unit `split` of the tile's rows g and g + 8 (tc_weight_row) from lane word t,
// and its scales; tc_stream_step moves it on.
template <int BITS, int MODE, int NB>
__device__ __forceinline__ void tc_stream_start(const u16* scales, const u32* payload, int tile, int g, int t, int split,
                                                int n_out, int groups_per_row, const u32* (&wnext)[2],
                                                const u16* (&snext)[2]) {
    const int row0 = tc_weight_row<MODE>(tile, g, n_out), row1 = tc_weight_row<MODE>(tile, g + 8, n_out);
    constexpr int UNIT_WORDS = NB * LAYOUT_LANES * BITS;
    wnext[0] = layout_row<BITS>(payload, row0, groups_per_row) + t * NB * BITS + split * UNIT_WORDS;
    wnext[1] = layout_row<BITS>(payload, row1, groups_per_row) + t * NB * BITS + split * UNIT_WORDS;
    snext[0] = scales + (long long)row0 * groups_per_row + split * NB;
    snext[1] = scales + (long long)row1 * groups_per_row + split * NB;
}
// Steps a lane's weight stream to its next unit: `loaded` (the unit it points at) and the
// pointers move on by `splits` units (w_step words, s_step scales).
__device__ __forceinline__ void tc_stream_step(int& loaded, int splits, const u32* (&wnext)[2], const u16* (&snext)[2],
                                               int w_step, int s_step) {
    loaded += splits;
#pragma unroll
    for (int h = 0; h < 2; ++h) { wnext[h] += w_step; snext[h] += s_step; }
}

// One unit of a lane's weights: rows g and g + 8, NB groups x BITS planes, and the f16 scales.
template <int BITS, int NB>
struct TcUnit {
    u32 w[2][NB * BITS];
    u32 d[2][(NB + 1) / 2];
};

// Loads the unit at `w` (rows g, g + 8: w[0], w[1]; one 16-byte load per row and plane when
// NB = 4) and its scales at `sc`. Streaming loads (__ldcs, ld.global.cs: evict-first in L1 and
// L2): a decode step reads ~1 GB of weights, each byte once, through the 50 MB L2; at normal
// priority they evict what every layer reuses (activations, planes, norm weights, short KV
// caches, kernel code). Faster than plain loads on both models, and than the read-only path with
// an L2 evict-first policy and no L1 allocation (docs/kernel-notes.md, "The decode GEMV (binary
// tensor core)": evict-first weights).
template <int BITS, int NB>
__device__ __forceinline__ void tc_load(TcUnit<BITS, NB>& r, const u32* const (&w)[2], const u16* const (&sc)[2]) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        if (NB * BITS >= 4) {
#pragma unroll
            for (int v = 0; v < NB * BITS / 4; ++v) {
                const uint4 q = __ldcs(reinterpret_cast<const uint4*>(w[h]) + v);
                r.w[h][4 * v] = q.x; r.w[h][4 * v + 1] = q.y; r.w[h][4 * v + 2] = q.z; r.w[h][4 * v + 3] = q.w;
            }
        } else if (NB * BITS == 2) {
            const uint2 q = __ldcs(reinterpret_cast<const uint2*>(w[h]));
            r.w[h][0] = q.x; r.w[h][NB * BITS - 1] = q.y;
        } else {
            r.w[h][0] = __ldcs(w[h]);
        }
        if (NB == LAYOUT_BLOCK_GROUPS) {
            const uint2 q = __ldcs(reinterpret_cast<const uint2*>(sc[h]));
            r.d[h][0] = q.x; r.d[h][(NB + 1) / 2 - 1] = q.y;
        } else {
            r.d[h][0] = __ldcs(sc[h]);
        }
    }
}

// Stage groups [c0, c0 + cg) of x: B fragments of every part, and the offsets. A warp per group;
// lane l takes weights j = 2l, 2l + 1 (k16 step l / 8, half (l / 4) % 2, fragment lane l % 4:
// weight_layout.cu) and j + 64 (step l / 8 + 4, B = 4 x), so the index math is per lane, not per
// element, and the same values give the offset sums.
template <int BITS>
__device__ __forceinline__ void tc_stage(const float* __restrict__ x, int c0, int cg, uint4* bs, float* xoff,
                                         const float* __restrict__ norm_w, float* warp_sq) {
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE, warps = blockDim.x / WARP_SIZE;
    const int s = lane / 8, h = (lane / 4) % 2, t = lane % 4;
    // u32 index of (step s, half h, lane t) within a group's block, column 0; the second half's
    // steps s + 4 live TC_QUADS / 2 quads further.
    const int lane_word = ((s / 2) * TC_COLS * LAYOUT_LANES + t) * 4 + 2 * (s % 2) + h;
    const int second_half_words = (TC_QUADS / 2) * TC_COLS * LAYOUT_LANES * 4;
    u32* bw = reinterpret_cast<u32*>(bs);
    const int group_words = TC_QUADS * TC_COLS * LAYOUT_LANES * 4;
    // Running pointers per warp: the item is the group, and both pointers advance by a constant.
    const float* src = x + (long long)c0 * GROUP_SIZE + 2 * lane;
    u32* dst = bw + lane_word;
    // Software-pipelined by one item: the next item's x is loaded before this one is split, so a
    // warp with several items waits for one L2 round trip instead of one per item.
    auto load_item = [&](int item, float2& lo, float2& hi) {
        const float* row_src = src + item * GROUP_SIZE;
        lo = make_float2(0.0f, 0.0f);
        hi = make_float2(0.0f, 0.0f);
        if (item < cg) {
            lo = *reinterpret_cast<const float2*>(row_src);
            hi = *reinterpret_cast<const float2*>(row_src + GROUP_SIZE / 2);
        }
    };
    float2 next_lo, next_hi;
    load_item(warp, next_lo, next_hi);
    for (int item = warp; item < cg; item += warps) {
        float2 lo = next_lo, hi = next_hi;
        load_item(item + warps, next_lo, next_hi);
        if (norm_w != nullptr) {
            // Fused RMSNorm: stage x * w; the token's 1 / rms scales the finished dot products
            // in the epilogue (it is one factor per token), so no pass over x has to come first.
            // This warp's sum of squares of x goes to its own slot, in item order.
            const float sq = warp_sum(lo.x * lo.x + lo.y * lo.y + hi.x * hi.x + hi.y * hi.y);
            if (lane == 0) warp_sq[0] += sq;
            const float* wn = norm_w + (c0 + item) * GROUP_SIZE + 2 * lane;
            const float2 wl = *reinterpret_cast<const float2*>(wn);
            const float2 wh = *reinterpret_cast<const float2*>(wn + GROUP_SIZE / 2);
            lo = make_float2(lo.x * wl.x, lo.y * wl.y);
            hi = make_float2(hi.x * wh.x, hi.y * wh.y);
        }
        u32 a0[TC_PARTS], a1[TC_PARTS], b0[TC_PARTS], b1[TC_PARTS];
        tc_split3(lo.x, a0);
        tc_split3(lo.y, a1);
        tc_split3(TC_SECOND_HALF_SCALE * hi.x, b0);  // exact
        tc_split3(TC_SECOND_HALF_SCALE * hi.y, b1);
        u32* item_dst = dst + item * group_words;
#pragma unroll
        for (int p = 0; p < TC_PARTS; ++p) {  // part p in column p
            const int col_words = p * LAYOUT_LANES * 4;
            item_dst[col_words] = (a0[p] >> 16) | (a1[p] & 0xFFFF0000u);
            item_dst[col_words + second_half_words] = (b0[p] >> 16) | (b1[p] & 0xFFFF0000u);
        }
        const float second = warp_sum(hi.x + hi.y);
        const float all = BITS == 2 ? warp_sum(lo.x + lo.y) + second : 0.0f;
        if (lane == 0) xoff[item] = BITS == 2 ? 0.5f * all - 5.5f * second : -3.0f * second;
    }
}

// One unit: NB groups of the tile, each accumulated in a fresh C, offset, scaled by d into acc.
// The groups' mma chains run interleaved: each group's 8 (Q2: 16) mma accumulate into one C, so
// issued group after group they form one long dependent chain per unit; taking step i of every
// group before step i + 1 keeps NB independent chains in flight (faster than 1 and 2:
// docs/kernel-notes.md, "gemv_tc (code-3 Q2 matrices, 2-8 tokens)").
// `bl` / `ol`: this lane's B fragments and offset of the unit's first group (group strides
// b_stride / o_stride; 0 on lanes that read the zero group).
template <int BITS, int NB>
__device__ __forceinline__ void tc_unit(float (&acc)[4], const TcUnit<BITS, NB>& r, const uint4* bl, int b_stride,
                                        const float* ol, int o_stride, u32 sign_pair, u32 exp_pair, u32 mant_pair) {
    float c[NB][4];
#pragma unroll
    for (int gi = 0; gi < NB; ++gi) c[gi][0] = c[gi][1] = c[gi][2] = c[gi][3] = 0.0f;
#pragma unroll
    for (int i = 0; i < TC_QUADS / 2; ++i) {
#pragma unroll
        for (int gi = 0; gi < NB; ++gi) {
            const uint4* bg = bl + gi * b_stride;
            // Steps 2i + ss (sign form, quad i) and 2i + ss + 4 (exponent form, quad i + 2)
            // share the shifts r = 2 (2i + ss) + half.
            u32 a[2][2][BITS][4];  // [ss][form][plane]
#pragma unroll
            for (int ss = 0; ss < 2; ++ss)
#pragma unroll
                for (int p = 0; p < BITS; ++p) {
                    const bool half = BITS == 2 && p == 0;
                    const u32 w0 = r.w[0][gi * BITS + p], w1 = r.w[1][gi * BITS + p];
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const int q = 2 * (2 * i + ss) + e / 2;  // a[0], a[1]: half 0; a[2], a[3]: half 1
                        const u32 w = e % 2 ? w1 : w0;
                        const u32 v = w << q;
                        a[ss][0][p][e] = (v & sign_pair) ^ (half ? TC_SIGN_HALF : TC_SIGN_ONE);
                        if (half) a[ss][1][p][e] = ((q == 0 ? w >> 1 : w << (q - 1)) & mant_pair) | TC_EXP_ONE;
                        else a[ss][1][p][e] = (v & exp_pair) | TC_EXP_ONE;
                    }
                }
            const uint4 b_lo = bg[i * TC_COLS * LAYOUT_LANES];
            const uint4 b_hi = bg[(i + TC_QUADS / 2) * TC_COLS * LAYOUT_LANES];
#pragma unroll
            for (int ss = 0; ss < 2; ++ss)
#pragma unroll
                for (int p = 0; p < BITS; ++p) {
                    mma_bf16_16x8x16(c[gi], a[ss][0][p], ss ? b_lo.z : b_lo.x, ss ? b_lo.w : b_lo.y);
                    mma_bf16_16x8x16(c[gi], a[ss][1][p], ss ? b_hi.z : b_hi.x, ss ? b_hi.w : b_hi.y);
                }
        }
    }
#pragma unroll
    for (int gi = 0; gi < NB; ++gi) {
        const float d0 = f16_to_f32((u16)(r.d[0][gi / 2] >> (16 * (gi % 2))));
        const float d1 = f16_to_f32((u16)(r.d[1][gi / 2] >> (16 * (gi % 2))));
        const float off = ol[gi * o_stride];  // lane t = 0 (column 0 carries the offset); else 0
        acc[0] = fmaf(d0, c[gi][0] + off, acc[0]);
        acc[1] = fmaf(d0, c[gi][1], acc[1]);
        acc[2] = fmaf(d1, c[gi][2] + off, acc[2]);
        acc[3] = fmaf(d1, c[gi][3], acc[3]);
    }
}

// Units prefetched in registers beyond the one being computed: Q2 units are twice as large.
#define TC_AHEAD(BITS) ((BITS) == 1 ? 2 : 1)

// Epilogue of the decode GEMVs (gemv_tc, gemv_b1): one thread per (token, tile, output); the
// splits' partials (partial[(warp * 16 + row) * P_STRIDE + token]) added in split order, then (norm)
// the fused RMSNorm's 1 / rms (norm_sq: each warp's sum of squares per token) and the store.
// EARLY (one token, MATMUL_ADD, a thread per output: blockDim.x >= tiles_per_cta * outs): the
// thread's y value was read ahead into `y_early` (gemv_b1: the `_early` entry points before
// griddep_wait, the `_out` Add ones right after it), so the add needs no load here; the same add,
// the same bits.
// ONE_NORM_SLOT: only warp 0's norm slot can be nonzero (gemv_b1), so the others are not added.
// STAGED (gemv_b1's `_out` planes epilogue): each output is also written to staged[tok n_out +
// o] as one 64-bit word, its bits and a ready flag (1 in the high half).
// PLAIN_Y false (gemv_b1's `_rope` epilogue): the staging word only; that epilogue writes y.
template <int MODE, bool EARLY = false, bool ONE_NORM_SLOT = false, bool STAGED = false, bool PLAIN_Y = true,
          int P_STRIDE = 2, int NORM_TOKENS = GEMV_MAX_TOKENS>
__device__ __forceinline__ void gemv_store_outputs(const float* partial, int m, float* __restrict__ y, int n_out,
                                                   int k, int tiles_per_cta, int splits, bool norm,
                                                   float norm_eps, const float (*norm_sq)[NORM_TOKENS], int cta,
                                                   float y_early = 0.0f, unsigned long long* staged = nullptr) {
    const int outs = MODE == MATMUL_SWIGLU ? TC_TILE_ROWS / 2 : TC_TILE_ROWS;
    const int per_token = tiles_per_cta * outs;
    for (int i = threadIdx.x; i < m * per_token; i += blockDim.x) {
        // One token (every decode GEMV): no integer division on the kernel's last steps.
        const int tok = m == 1 ? 0 : i / per_token, j = m == 1 ? i : i % per_token;
        const int tl = j / outs, r = j % outs;
        const int o = (cta * tiles_per_cta + tl) * outs + r;
        if (o >= n_out) continue;
        float v = 0.0f, up = 0.0f;
        for (int s = 0; s < splits; ++s) {
            const float* pr = partial + ((tl * splits + s) * TC_TILE_ROWS) * P_STRIDE + tok;
            v += pr[r * P_STRIDE];
            if (MODE == MATMUL_SWIGLU) up += pr[(r + TC_TILE_ROWS / 2) * P_STRIDE];
        }
        if (norm) {  // as rms_norm.cu: rsqrt(mean(x^2) + eps)
            float ss = 0.0f;
            const int slots = ONE_NORM_SLOT ? 1 : blockDim.x / WARP_SIZE;
            for (int w = 0; w < slots; ++w) ss += norm_sq[w][tok];
            const float inv_rms = rsqrtf(ss / (float)k + norm_eps);
            v *= inv_rms;
            up *= inv_rms;
        }
        float* dst = y + (long long)tok * n_out + o;
        const float out = MODE == MATMUL_SWIGLU ? silu_mul(v, up) : MODE == MATMUL_ADD ? (EARLY ? y_early : *dst) + v : v;
        if constexpr (PLAIN_Y) *dst = out;
        if constexpr (STAGED)
            st_relaxed_gpu_u64(staged + (long long)tok * n_out + o, (unsigned long long)__float_as_uint(out) | (1ull << 32));
    }
}

template <int BITS, int MODE, int NB>
__device__ __forceinline__ void gemv_tc_body(const u16* __restrict__ scales, const u32* __restrict__ payload,
                                             const float* __restrict__ x, int m, float* __restrict__ y,
                                             int n_out, int k, int tiles_per_cta, int splits, int chunk_groups,
                                             const float* __restrict__ norm_w, float norm_eps) {
    constexpr int AHEAD = TC_AHEAD(BITS);
    TRACE_MARKS_BEGIN;
    TC_MARK(0);
    extern __shared__ uint4 tc_smem[];
    const int groups_per_row = k / GROUP_SIZE;
    const int units = groups_per_row / NB;
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const int g = lane / 4, t = lane % 4;
    const int tile_local = warp / splits, split = warp % splits;
    const int tile = blockIdx.x * tiles_per_cta + tile_local;
    const int b_group = TC_QUADS * TC_COLS * LAYOUT_LANES;  // uint4 per staged group
    uint4* bs = tc_smem;
    float* xoff = reinterpret_cast<float*>(tc_smem + (chunk_groups + 1) * b_group);
    float* partial = xoff + (chunk_groups + 1);
    // The zero groups, read by lanes without a B column (g >= TC_COLS) / without the offset.
    for (int i = threadIdx.x; i < b_group; i += blockDim.x) bs[chunk_groups * b_group + i] = make_uint4(0u, 0u, 0u, 0u);
    if (threadIdx.x == 0) xoff[chunk_groups] = 0.0f;
    // Column 0 (the hi part, element 0 on lanes t = 0) carries the offset.
    const bool b_lane = g < TC_COLS, o_lane = t == 0;
    const uint4* b_base = b_lane ? bs + g * LAYOUT_LANES + t : bs + chunk_groups * b_group;
    const int b_stride = b_lane ? b_group : 0;
    const float* o_base = o_lane ? xoff : xoff + chunk_groups;
    const int o_stride = o_lane ? 1 : 0;
    // The masks reach every lane through a shuffle from lane 0 (a value the compiler cannot fold),
    // so they stay in registers and `(v & mask) op constant` is ONE LOP3; as two immediates the
    // compiler emits two LOP3s per A register.
    const u32 sign_pair = __shfl_sync(FULL_MASK, lane == 0 ? TC_SIGN_PAIR : 0u, 0);
    const u32 exp_pair = __shfl_sync(FULL_MASK, lane == 0 ? TC_EXP_PAIR : 0u, 0);
    const u32 mant_pair = __shfl_sync(FULL_MASK, lane == 0 ? TC_MANT_PAIR : 0u, 0);

    // Running pointers (loop-carried, so the compiler keeps them in registers instead of
    // recomputing addresses in every ring-slot body): the next unit to load, and this lane's B
    // fragments and offsets of the unit being computed.
    const u32* wnext[2];
    const u16* snext[2];
    tc_stream_start<BITS, MODE, NB>(scales, payload, tile, g, t, split, n_out, groups_per_row, wnext, snext);
    const int w_step = splits * (NB * LAYOUT_LANES * BITS), s_step = splits * NB;

    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    TcUnit<BITS, NB> ring[AHEAD + 1];
    int loaded = split;  // the unit wnext / snext point at
#pragma unroll
    for (int a = 0; a <= AHEAD; ++a) {
        if (loaded < units) tc_load(ring[a], wnext, snext);
        tc_stream_step(loaded, splits, wnext, snext, w_step, s_step);
    }

    // Only now wait for the previous kernel (programmatic dependent launch): the weights above
    // are never written by any kernel, so with BONSAI_PDL=1 their first units stream in while the
    // previous kernel drains; x (staged below) and y are the dependent data.
    griddep_wait();
    TC_MARK(1);
    // Fused RMSNorm (norm_w != null): each warp sums the squares of the x it stages into its own
    // slot (zeroed here, before the first chunk's barrier); the epilogue adds the slots
    // in warp order (deterministic) for 1 / rms. Every CTA stages all of x, so each sees all of it.
    __shared__ float norm_sq[TC_MAX_THREADS_M1 / WARP_SIZE][GEMV_MAX_TOKENS];
    if (norm_w != nullptr && lane < GEMV_MAX_TOKENS) norm_sq[warp][lane] = 0.0f;
    int u = split, phase = 0;  // ring[phase] holds unit u
    for (int c0 = 0; c0 < groups_per_row; c0 += chunk_groups) {
        const int cg = min(chunk_groups, groups_per_row - c0);
        __syncthreads();  // the previous chunk's fragments are consumed
        tc_stage<BITS>(x, c0, cg, bs, xoff, norm_w, norm_sq[warp]);
        __syncthreads();
        TC_MARK(2);
        const int u_end = (c0 + cg) / NB;
        const uint4* bl = b_base + (u * NB - c0) * b_stride;
        const float* ol = o_base + (u * NB - c0) * o_stride;
        const int bl_step = splits * NB * b_stride, ol_step = splits * NB * o_stride;
        for (; u < u_end; u += splits) {
            // One body per ring slot, so slots are static registers (no moves between slots).
#pragma unroll
            for (int a = 0; a <= AHEAD; ++a) {
                if (a != phase) continue;
                tc_unit<BITS, NB>(acc, ring[a], bl, b_stride, ol, o_stride, sign_pair, exp_pair, mant_pair);
                if (loaded < units) tc_load(ring[a], wnext, snext);
            }
            phase = phase == AHEAD ? 0 : phase + 1;
            tc_stream_step(loaded, splits, wnext, snext, w_step, s_step);
            bl += bl_step;
            ol += ol_step;
        }
    }

    TC_MARK(3);
    // The three part columns (2t + e < 3: lanes t = 0, 1) summed within the quad.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        float v = 0.0f;
#pragma unroll
        for (int e = 0; e < 2; ++e)
            if (2 * t + e < TC_COLS) v += acc[2 * h + e];
        v += __shfl_xor_sync(FULL_MASK, v, 1);
        v += __shfl_xor_sync(FULL_MASK, v, 2);
        if (t == 0) partial[(warp * TC_TILE_ROWS + g + 8 * h) * 2] = v;
    }
    __syncthreads();

    TC_MARK(4);
    gemv_store_outputs<MODE>(partial, m, y, n_out, k, tiles_per_cta, splits, norm_w != nullptr, norm_eps, norm_sq,
                             blockIdx.x);
    TC_MARK(5);
    TRACE_MARKS_END;
}

// The layout's block size (4 groups, or 1 when K % 512 != 0) picks the unit.
template <int BITS, int MODE>
__device__ __forceinline__ void gemv_tc(const u16* scales, const u32* payload, const float* x, int m, float* y,
                                        int n_out, int k, int tiles_per_cta, int splits, int chunk_groups,
                                        const float* norm_w, float norm_eps) {
    if (layout_block_groups(k / GROUP_SIZE) == LAYOUT_BLOCK_GROUPS)
        gemv_tc_body<BITS, MODE, LAYOUT_BLOCK_GROUPS>(scales, payload, x, m, y, n_out, k, tiles_per_cta, splits,
                                                      chunk_groups, norm_w, norm_eps);
    else
        gemv_tc_body<BITS, MODE, 1>(scales, payload, x, m, y, n_out, k, tiles_per_cta, splits, chunk_groups, norm_w,
                                    norm_eps);
}

// Decode GEMV on the binary tensor core, m = 1 (and 2..8 tokens of a batched step: TOKENS in
// gemv_b1_body): `gemv_b1_prepare` (x -> bit planes, once per GEMV) then `gemv_b1` (templates;
// matmul_q1.cu instantiates). Why (docs/kernel-notes.md,
// "The decode GEMV (binary tensor core)"): gemv_tc issues ~1.8 instructions per weight (A registers built from sign bits, three
// bf16 parts of x), more than the H200 can issue at copy speed (~1 per weight); one
// `mma.sync m16n8k128 b1 and.popc` covers 4x the weights of a bf16 mma at the same issue cost,
// and the layout's lane words ARE its A registers.
//
// Arithmetic, per 128-group G of x (after the fused RMSNorm's weights, if any):
//   x_k ~ s_G q_k, s_G = 2^(E - B1_PLANES + 2) with max|x_G| < 2^E, q_k = rint(x_k / s_G), an
//   integer of |q_k| <= 2^(B1_PLANES - 2) (|x_k - s_G q_k| <= s_G / 2), held as B1_PLANES bit
//   planes of its two's complement (plane p weighs 2^p, the top plane -2^(P-1)).
//   Q1 (w = 2b - 1): sum_k w_k q_k = 2 sum_p 2^p popc(b AND plane_p) - X_G, X_G = sum_k q_k;
//   Q2 (w = c - 1, ternary codes c = 2 c1 + c0 in {0, 1, 2}): the same with c = u + v, the
//   thermometer planes u = c0 | c1 and v = c1 (b1_group_sums).
//   All of that is exact integer arithmetic (|result| <= 2 * 128 * 2^14 = 2^22, so exact in f32
//   too; partial sums wrap harmlessly in u32), times d * s_G (exact) into the sum: one rounding.
//
// `gemv_b1_prepare` (a warp per group) quantizes x once and writes the planes in the order the
// mma's B fragments want them; every `gemv_b1` CTA copies them into shared memory with cp.async
// (no arithmetic) while its first weight units are in flight.
//
// One binary mma (m16n8k128) per group and 8 planes: A = the tile's 16 rows x the group's 128 k
// (lane t's layout words of rows g and g + 8, weight_layout.cu); B column n = plane 8j + n of the
// group. Lane (g, t) receives columns 2t, 2t + 1 (planes 8j + 2t + {0, 1}) of rows g and g + 8 and
// weighs them into a u32 per row; two swaps within the lane quad then leave each lane one whole
// (row, group) sum of a pair of groups. The k order inside a group is the layout's lane-word
// order, the same for A and B, so the k reduction is unchanged.
//
// Work split, weight loads and the epilogue are gemv_tc's (matmul_gemv_tc.cu: tiles x splits
// warps per CTA, TcUnit ring of units loaded ahead, split partials added in split order).
// Global scratch from the prepare kernel (launcher: matmul_q1/cuda_b1.rs), per group:
//   planes [groups][32 lanes][B1_WORDS] u32 | (s_G, X_G) [groups][2] u32 | sum of squares [groups] f32
// Dynamic shared memory (`b1_smem_bytes` in tc_geometry.rs): planes and (s, X) of chunk_groups
// groups, then partials [warps][16][2] f32.

// 16 planes: x to 16-bit integers per 128-group (relative error <= 2^-14 of the group's max per
// element). 24 planes (within f32 rounding) decode measurably slower for two more mma and their
// weighting per group; 8 planes break the check's logit bound (docs/kernel-notes.md, "The decode
// GEMV (binary tensor core)", kept and removed). The verify bound takes the step from
// here (b1_group_steps in verify/matmul_kernels.rs, B1_WORDS in tc_geometry.rs).
#define B1_PLANES 16
#define B1_WORDS (B1_PLANES / 8)
#define B1_GROUP_WORDS (WARP_SIZE * B1_WORDS)
// Smallest group exponent E: keeps 2^(B1_PLANES - 2 - E) and s_G normal f32 (groups of |x| below
// 2^-100 quantize with that floor: the bound |x - s q| <= s / 2 still holds).
#define B1_MIN_EXP (-100)
#define B1_MAX_THREADS 512
// Groups whose sums of squares (the fused RMSNorm's) a gemv_b1 CTA copies into shared memory with
// its first planes (K <= 16384); beyond that, warp 0 reads them from global memory after its loop.
#define B1_NORM_STAGE_GROUPS 128

// 2^e as an f32, e in [-126, 127].
__device__ __forceinline__ float b1_pow2(int e) { return __uint_as_float((u32)(e + 127) << 23); }

// 32 x 32 bit transpose across the warp: lane p returns the word whose bit l is bit p of lane l's
// `v`. Five butterfly stages, each swapping the off-diagonal s x s blocks with lane ^ s.
__device__ __forceinline__ u32 b1_transpose_bits(u32 v, int lane) {
#pragma unroll
    for (int s = WARP_SIZE / 2; s >= 1; s >>= 1) {
        // Bit positions p with (p & s) == 0.
        const u32 m = s == 16 ? 0x0000FFFFu : s == 8 ? 0x00FF00FFu : s == 4 ? 0x0F0F0F0Fu : s == 2 ? 0x33333333u : 0x55555555u;
        const u32 y = __shfl_xor_sync(FULL_MASK, v, s);
        v = (lane & s) ? ((v & ~m) | ((y & ~m) >> s)) : ((v & m) | ((y & m) << s));
    }
    return v;
}

// Sum of an int over the warp (two's complement, exact while the true sum fits).
__device__ __forceinline__ int b1_warp_sum_int(int v) {
#pragma unroll
    for (int offset = WARP_SIZE / 2; offset > 0; offset >>= 1) v += __shfl_xor_sync(FULL_MASK, v, offset);
    return v;
}

// `mark(i)`: the decode trace's phase marks 1-4 of the prepare kernel (x arrived, max found, sum
// of q found, planes stored); a no-op everywhere else.
struct B1NoMarks {
    __device__ void operator()(int) const {}
};
// The part of b1_prepare_group after its loads: v[t] (element layout_weight(t, lane), times the
// norm weight when there is one) and sq (this lane's sum of squares of the unscaled values) in
// registers. Also the `_out` epilogue's (b1_planes_epilogue), on values it polled from other CTAs.
template <class Marks = B1NoMarks>
__device__ __forceinline__ void b1_quantize_group(const float (&v)[LAYOUT_LANES], float sq, u32* planes_group,
                                                  u32* gsx_group, float* sq_group, Marks mark = {}) {
    const int lane = threadIdx.x % WARP_SIZE;
    sq = warp_sum(sq);
    mark(1);
    float amax = 0.0f;
#pragma unroll
    for (int t = 0; t < LAYOUT_LANES; ++t) amax = fmaxf(amax, fabsf(v[t]));
    amax = warp_max(amax);
    mark(2);
    // max|x_G| < 2^E (biased exponent - 126 for a normal amax; 0 and subnormals take the floor).
    const int e = max((int)((__float_as_uint(amax) >> 23) & 0xFFu) - 126, B1_MIN_EXP);
    const float to_int = b1_pow2(B1_PLANES - 2 - e);  // exact scaling: |x * to_int| < 2^(P - 2)
    int q[LAYOUT_LANES];
    int qsum = 0;
#pragma unroll
    for (int t = 0; t < LAYOUT_LANES; ++t) {
        q[t] = __float2int_rn(v[t] * to_int);
        qsum += q[t];
    }
    qsum = b1_warp_sum_int(qsum);
    mark(3);
    if (lane == 0) {
        gsx_group[0] = __float_as_uint(b1_pow2(e - B1_PLANES + 2));
        gsx_group[1] = (u32)qsum;
        sq_group[0] = sq;
    }
    // Plane p of lane word t goes to B column n = p % 8 of mma p / 8, read by lane 4n + t.
    // Two lane words per transpose: q fits 16 bits, so word t in the low half and t + 1 in the
    // high half leave lane p < 16 plane p of word t and lane 16 + p plane p of word t + 1 (half
    // the shuffles, every lane stores: fewer instructions, the traced transposes faster;
    // docs/kernel-notes.md, "The decode GEMV (binary tensor core)", `B1_TRANSPOSE_SINGLE`).
    static_assert(B1_PLANES <= 16, "two lane words per transpose need q within 16 bits");
#pragma unroll
    for (int t = 0; t < LAYOUT_LANES; t += 2) {
        const u32 plane = b1_transpose_bits(((u32)q[t] & 0xFFFFu) | ((u32)q[t + 1] << 16), lane);
        const int p = lane % 16, tw = t + lane / 16;
        if (p < B1_PLANES) planes_group[(4 * (p % 8) + tw) * B1_WORDS + p / 8] = plane;
    }
    mark(4);
}
// One 128-group of x (times norm_w when given) -> its planes, (s, X) and sum of squares of x.
// Called by a whole warp (every lane); pointers at the group's first element / slot. Lane l takes
// the 4 weights j = layout_weight(t, l), t = 0..3 (bit l of lane word t), so a transpose of its 4
// quantized values yields the planes. x_group has no __restrict__: attention_decode's planes
// variant reads outputs its own CTA wrote in the same launch (never the non-coherent path).
template <class Marks = B1NoMarks>
__device__ __forceinline__ void b1_prepare_group(const float* x_group, const float* norm_w_group, u32* planes_group,
                                                 u32* gsx_group, float* sq_group, Marks mark = {}) {
    const int j0 = layout_weight(0, threadIdx.x % WARP_SIZE);  // layout_weight(t, lane) = j0 + 2t
    float v[LAYOUT_LANES];
    float sq = 0.0f;
#pragma unroll
    for (int t = 0; t < LAYOUT_LANES; ++t) {
        v[t] = x_group[j0 + 2 * t];
        sq += v[t] * v[t];
        if (norm_w_group != nullptr) v[t] *= norm_w_group[j0 + 2 * t];
    }
    b1_quantize_group(v, sq, planes_group, gsx_group, sq_group, mark);
}

// x (K floats per token row, times norm_w when given) -> per group its planes, (s, X) and sum of
// squares of x: a warp per group (b1_prepare_group), grid row blockIdx.y = token (the scratch is
// [token][group], each token's groups as one token's).
template <class Marks = B1NoMarks>
__device__ __forceinline__ void gemv_b1_prepare_body(const float* __restrict__ x, const float* __restrict__ norm_w,
                                                     int k, u32* __restrict__ planes, u32* __restrict__ gsx,
                                                     float* __restrict__ group_sq, Marks mark = {}) {
    const int groups = k / GROUP_SIZE;
    const int group = blockIdx.x * (blockDim.x / WARP_SIZE) + threadIdx.x / WARP_SIZE;
    if (group >= groups) return;
    const long long first = (long long)group * GROUP_SIZE;
    const long long row_group = (long long)blockIdx.y * groups + group;
    b1_prepare_group(x + (long long)blockIdx.y * k + first, norm_w != nullptr ? norm_w + first : nullptr,
                     planes + row_group * B1_GROUP_WORDS, gsx + 2 * row_group, group_sq + row_group, mark);
}

// up to 32 warps per CTA (cuda_b1.rs: prepare_config).
extern "C" __global__ void __launch_bounds__(1024)
    gemv_b1_prepare(const float* __restrict__ x, const float* __restrict__ norm_w, int k, u32* __restrict__ planes,
                    u32* __restrict__ gsx, float* __restrict__ group_sq) {
    griddep_wait();
    TRACE_MARKS_BEGIN;
    // The GEMV's CTAs may start (and prefetch their weights) on the other SMs at once (triggering
    // only after x is in was slower: docs/kernel-notes.md, "The decode GEMV (binary tensor core)",
    // `B1_PREPARE_TRIGGER_AFTER_LOADS`).
    griddep_launch_dependents();
    gemv_b1_prepare_body(x, norm_w, k, planes, gsx, group_sq, [&](int i) {
        TRACE_MARK(i);  // empty without BONSAI_TRACE
        (void)i;
    });
    TRACE_MARK(5);  // CTA 0's groups stored (the decode trace; nothing otherwise)
    TRACE_MARKS_END;
    TRACE_CTA_ENDS;
}

// A decode step's first launch: x = row ids[0] of the quantized embedding table (as embed_rows,
// same arithmetic) and x's planes (times norm_w) as gemv_b1_prepare, one launch instead of two.
// A warp per group; lane l dequantizes bit l of the group's lane words t = 0..3, which are the
// weights b1_prepare_group gives lane l (layout_weight(t, l)). An id >= vocab gives a NaN row,
// as embed_rows does.
#define GEMV_B1_PREPARE_EMBED_PARAMS                                                                             \
    const u16 *__restrict__ scales, const u32 *__restrict__ payload, const u32 *__restrict__ ids, int vocab,       \
        const float *__restrict__ norm_w, int k, float *__restrict__ x, u32 *__restrict__ planes,                  \
        u32 *__restrict__ gsx, float *__restrict__ group_sq
#define GEMV_B1_PREPARE_EMBED_ARGS scales, payload, ids, vocab, norm_w, k, x, planes, gsx, group_sq
template <int BITS>
__device__ __forceinline__ void gemv_b1_prepare_embed_body(GEMV_B1_PREPARE_EMBED_PARAMS) {
    const int groups_per_row = k / GROUP_SIZE;
    const int group = blockIdx.x * (blockDim.x / WARP_SIZE) + threadIdx.x / WARP_SIZE;
    if (group >= groups_per_row) return;
    const int lane = threadIdx.x % WARP_SIZE;
    const int j0 = layout_weight(0, lane);  // layout_weight(t, lane) = j0 + 2t
    const u32 id = ids[0];
    float v[LAYOUT_LANES];
    if (id >= (u32)vocab) {
#pragma unroll
        for (int t = 0; t < LAYOUT_LANES; ++t) v[t] = __int_as_float(0x7fc00000);
    } else {
        const float d = f16_to_f32(scales[(long long)id * groups_per_row + group]);
        const u32* row = layout_row<BITS>(payload, id, groups_per_row);
#pragma unroll
        for (int t = 0; t < LAYOUT_LANES; ++t) {
            u32 c = 0;
#pragma unroll
            for (int p = 0; p < BITS; ++p) c |= ((row[layout_word<BITS>(groups_per_row, group, t, p)] >> lane) & 1u) << p;
            v[t] = (float)code_value<BITS>(c) * d;
        }
    }
    const long long first = (long long)group * GROUP_SIZE;
    float sq = 0.0f;
#pragma unroll
    for (int t = 0; t < LAYOUT_LANES; ++t) {
        x[first + j0 + 2 * t] = v[t];
        sq += v[t] * v[t];
        if (norm_w != nullptr) v[t] *= norm_w[first + j0 + 2 * t];
    }
    b1_quantize_group(v, sq, planes + group * B1_GROUP_WORDS, gsx + 2 * group, group_sq + group);
}

extern "C" __global__ void __launch_bounds__(1024) gemv_b1_prepare_embed_q1(GEMV_B1_PREPARE_EMBED_PARAMS) {
    griddep_wait();
    griddep_launch_dependents();
    gemv_b1_prepare_embed_body<1>(GEMV_B1_PREPARE_EMBED_ARGS);
}
extern "C" __global__ void __launch_bounds__(1024) gemv_b1_prepare_embed_q2(GEMV_B1_PREPARE_EMBED_PARAMS) {
    griddep_wait();
    griddep_launch_dependents();
    gemv_b1_prepare_embed_body<2>(GEMV_B1_PREPARE_EMBED_ARGS);
}

// One group of a unit: B1_WORDS binary mma per weight plane, weighted into this lane's u32 sums
// of rows g and g + 8 (its two planes of each mma). Column 2t + e of mma j is plane
// p = 8j + 2t + e, weighing 2^p (the top plane -2^p), doubled for Q1 (w = 2b - 1): the
// lane-independent 2^(8j + e) is an immediate, the rest one shift at the end (`lane_shift`), and
// the top plane's lane-dependent sign sits in `top` (+-2^(8 B1_WORDS - 7)). Sums wrap mod 2^32.
//
// Q2 (ternary codes only: c = 2 c1 + c0 in {0, 1, 2}, the launchers' `ternary` check) as a
// thermometer: c = u + v with u = c0 | c1 (c >= 1) and v = c1 (c >= 2). Both weigh 1, so v's mma
// accumulates onto u's and one weighting serves both: 60 fewer instructions per unit than
// weighting the two bit planes apart (SASS), and faster on Ternary-8B (docs/kernel-notes.md, "The
// decode GEMV (binary tensor core)"). A code 3 (+2d, which Q2_0 allows) would count 2 here, so such matrices
// never reach these kernels (launch::matmul::gemv_for routes them to gemv_tc).
template <int BITS>
__device__ __forceinline__ void b1_group_sums(const u32 (&w0)[BITS], const u32 (&w1)[BITS], const u32* b, u32 top,
                                              int lane_shift, u32& lo, u32& hi) {
    static_assert(BITS == 1 || BITS == 2, "one sign plane or two code planes");
    // Row g's and row g + 8's plane words of the (only / thermometer) mma pair.
    const u32 a0 = BITS == 1 ? w0[0] : w0[0] | w0[BITS - 1], a1 = BITS == 1 ? w1[0] : w1[0] | w1[BITS - 1];
    u32 sum0 = 0, sum1 = 0;
#pragma unroll
    for (int j = 0; j < B1_WORDS; ++j) {
        const u32 bj = b[j];
        const u32 e0 = 1u << (8 * j), e1 = j == B1_WORDS - 1 ? top : 1u << (8 * j + 1);
        int c[4] = {0, 0, 0, 0};
        mma_b1_and_popc_16x8x128(c, a0, a1, bj);
        if (BITS == 2) mma_b1_and_popc_16x8x128(c, w0[BITS - 1], w1[BITS - 1], bj);
        sum0 += (u32)c[0] * e0 + (u32)c[1] * e1;
        sum1 += (u32)c[2] * e0 + (u32)c[3] * e1;
    }
    lo = sum0 << lane_shift;
    hi = sum1 << lane_shift;
}

// A pair of groups' lane sums (rows g / g + 8 of groups 0 / 1) -> after two swaps within the
// lane quad, lane t holds the whole sum of row g + 8 (t & 1), group t >> 1; minus X_G it is
// sum_k w_k q_k exactly, scaled by d s_G into acc. `gs`: (s, X) of the pair's first group; `d`:
// this lane's rows' f16 scales of its group. Outside any divergent branch (shuffles).
__device__ __forceinline__ float b1_pair_finish(const u32 (&sum)[2][2], const u32* gs, const float (&d)[2],
                                                bool has_second, int t, float acc) {
    const bool odd = t & 1, upper = t & 2;  // selects, not indexing (no local memory)
    u32 keep[2];
#pragma unroll
    for (int gi = 0; gi < 2; ++gi)
        keep[gi] = (odd ? sum[gi][1] : sum[gi][0]) + __shfl_xor_sync(FULL_MASK, odd ? sum[gi][0] : sum[gi][1], 1);
    const u32 total = (upper ? keep[1] : keep[0]) + __shfl_xor_sync(FULL_MASK, upper ? keep[0] : keep[1], 2);
    if (!has_second && upper) return acc;  // a single-group unit: lanes t >= 2 hold no group
    const int h = t / 2;
    const float s = __uint_as_float(gs[2 * h]);
    const int dot = (int)(total - gs[2 * h + 1]);
    return fmaf((odd ? d[1] : d[0]) * s, (float)dot, acc);
}

// One unit (NB groups of rows g and g + 8, in registers `r`) against the planes at `xb_lane` (this
// lane's words of the unit's first group; group gi at + gi B1_GROUP_WORDS): the lane sums of each
// pair of groups and the rows' f32 scales of this lane's group of each pair, for b1_unit_finish.
template <int BITS, int NB>
__device__ __forceinline__ void b1_unit_sums(const TcUnit<BITS, NB>& r, const u32* xb_lane, u32 top, int lane_shift,
                                             int t, u32 (&sums)[(NB + 1) / 2][2][2], float (&d)[(NB + 1) / 2][2]) {
    constexpr int PAIRS = (NB + 1) / 2;
#pragma unroll
    for (int gi = 0; gi < 2 * PAIRS; ++gi) {
        if (gi >= NB) {  // a single-group unit's absent second group
            sums[gi / 2][gi % 2][0] = sums[gi / 2][gi % 2][1] = 0u;
            continue;
        }
        u32 w0[BITS], w1[BITS];
#pragma unroll
        for (int p = 0; p < BITS; ++p) {
            w0[p] = r.w[0][gi * BITS + p];
            w1[p] = r.w[1][gi * BITS + p];
        }
        b1_group_sums<BITS>(w0, w1, xb_lane + gi * B1_GROUP_WORDS, top, lane_shift, sums[gi / 2][gi % 2][0],
                            sums[gi / 2][gi % 2][1]);
    }
#pragma unroll
    for (int pr = 0; pr < PAIRS; ++pr) {
        // This lane's group of the pair (t / 2) picks its rows' scales: word pr holds the f16
        // scales of groups 2 pr (low half) and 2 pr + 1 (NB = 1: one, low).
        const int half_shift = NB == LAYOUT_BLOCK_GROUPS ? 16 * (t / 2) : 0;
        d[pr][0] = f16_to_f32((u16)(r.d[0][pr] >> half_shift));
        d[pr][1] = f16_to_f32((u16)(r.d[1][pr] >> half_shift));
    }
}

// The unit in ring slot `phase` (a warp-uniform dispatch, so the ring stays in registers): its
// lane sums and scales (b1_unit_sums), then `reload(slot)` refills the slot with a later unit.
template <int BITS, int NB, int AHEAD, class Reload>
__device__ __forceinline__ void b1_ring_unit_sums(TcUnit<BITS, NB> (&ring)[AHEAD + 1], int phase, const u32* xb_lane,
                                                  u32 top, int lane_shift, int t, u32 (&sums)[(NB + 1) / 2][2][2],
                                                  float (&d)[(NB + 1) / 2][2], Reload reload) {
#pragma unroll
    for (int a = 0; a <= AHEAD; ++a) {
        if (a != phase) continue;
        b1_unit_sums<BITS, NB>(ring[a], xb_lane, top, lane_shift, t, sums, d);
        reload(ring[a]);
    }
}

// b1_group_sums' plane weights for lane t of a quad: the top plane's sign on lanes t = 3 (plane
// 8 B1_WORDS - 1 there) in `top`, and the lane's shift 2t, +1 for Q1.
template <int BITS>
__device__ __forceinline__ void b1_lane_plane_weights(int t, u32& top, int& lane_shift) {
    const u32 top_weight = 1u << (8 * (B1_WORDS - 1) + 1);
    top = t == 3 ? 0u - top_weight : top_weight;
    lane_shift = 2 * t + (BITS == 1 ? 1 : 0);
}

// The fused RMSNorm's sum of squares of x, over the prepare's per-group sums in one fixed order
// (lanes over groups, then the warp sum), so every GEMV that normalises gets the same bits.
__device__ __forceinline__ float b1_norm_sum_sq(const float* group_sq, int groups, int lane) {
    float ss = 0.0f;
    for (int i = lane; i < groups; i += WARP_SIZE) ss += group_sq[i];
    return warp_sum(ss);
}

// b1_unit_sums' pairs into acc (`gsx_unit`: (s, X) of the unit's first group). Shuffles: call it
// where the warp is converged.
template <int NB>
__device__ __forceinline__ float b1_unit_finish(const u32 (&sums)[(NB + 1) / 2][2][2], const float (&d)[(NB + 1) / 2][2],
                                                const u32* gsx_unit, int t, float acc) {
#pragma unroll
    for (int pr = 0; pr < (NB + 1) / 2; ++pr)
        acc = b1_pair_finish(sums[pr], gsx_unit + 4 * pr, d[pr], NB == LAYOUT_BLOCK_GROUPS, t, acc);
    return acc;
}

// The multi-token form of b1_ring_unit_sums then b1_unit_finish: the unit in ring slot `phase`
// against each present token's planes (token tok's at xb_lane + tok * xb_token_words, its (s, X)
// at gsx_unit + tok * gsx_token_words) into acc[tok], then `reload(slot)`. The weights are loaded
// once for all tokens; per token the same integer sums and finish as one token's GEMV, so each
// token's result is bit for bit its own GEMV's with the same geometry. Tokens >= m (a 4-token
// kernel serving 3) are skipped, warp-uniformly.
template <int BITS, int NB, int AHEAD, int TOKENS, class Reload>
__device__ __forceinline__ void b1_ring_unit_tokens(TcUnit<BITS, NB> (&ring)[AHEAD + 1], int phase, const u32* xb_lane,
                                                    int xb_token_words, const u32* gsx_unit, int gsx_token_words,
                                                    u32 top, int lane_shift, int t, int m, float (&acc)[TOKENS],
                                                    Reload reload) {
    constexpr int PAIRS = (NB + 1) / 2;
#pragma unroll
    for (int a = 0; a <= AHEAD; ++a) {
        if (a != phase) continue;
#pragma unroll
        for (int tok = 0; tok < TOKENS; ++tok) {
            if (tok >= m) break;
            u32 sums[PAIRS][2][2];
            float d[PAIRS][2];
            b1_unit_sums<BITS, NB>(ring[a], xb_lane + tok * xb_token_words, top, lane_shift, t, sums, d);
            acc[tok] = b1_unit_finish<NB>(sums, d, gsx_unit + tok * gsx_token_words, t, acc[tok]);
        }
        reload(ring[a]);
    }
}

// What a one-token binary GEMV does after its stores, picked at compile time by its OUT type's
// KIND: nothing (B1NoOut, the plain entry points), the next GEMV's planes (B1PlanesOut, `_out`),
// or the decode qkv projection's per-head RMSNorm, RoPE and KV write (B1RopeOut, `_rope`).
#define B1_OUT_NONE 0
#define B1_OUT_PLANES 1
#define B1_OUT_ROPE 2
struct B1NoOut {
    static constexpr int KIND = B1_OUT_NONE;
    unsigned long long* staged = nullptr;
};

// Where a GEMV's epilogue writes y's planes for the next GEMV (the `_gemv_b1_out` entry points):
// the planes, (s, X) and sums of squares of each 128-group of y, times `norm_w` (that GEMV's
// RMSNorm weights) when given, and one staging word per output (b1_planes_epilogue), zero between
// launches. Mirrored by `PlanesOutArgs` in ops/matmul_q1/cuda_b1.rs (same fields, same order).
struct B1PlanesOut {
    static constexpr int KIND = B1_OUT_PLANES;
    u32* planes;
    u32* gsx;
    float* group_sq;
    const float* norm_w;
    unsigned long long* staged;
};

// A lane's N staging words (word t at words[stride * t]) once every ready flag is set (those of
// other CTAs land when they land). Every round reloads all words still unset at once: one round
// trip per round (a loop per word made it up to four in a row, and was far slower:
// docs/kernel-notes.md, "Planes epilogues and the decode layer's launches").
template <int N>
__device__ __forceinline__ void b1_poll_staged(unsigned long long* words, int stride, unsigned long long (&w)[N]) {
#pragma unroll
    for (int t = 0; t < N; ++t) w[t] = ld_relaxed_gpu_u64(words + stride * t);
    for (;;) {
        bool all_set = true;
#pragma unroll
        for (int t = 0; t < N; ++t) all_set = all_set && (w[t] >> 32) != 0;
        if (all_set) break;
#pragma unroll
        for (int t = 0; t < N; ++t)
            if ((w[t] >> 32) == 0) w[t] = ld_relaxed_gpu_u64(words + stride * t);
    }
}

// Group g of the `_out` epilogue: polls its staging words (`words`: this lane's first), clears
// them, and quantizes the values (times the norm weights of group g, if any) into `planes`, `gsx`
// and `group_sq` with b1_prepare_group's arithmetic.
__device__ __forceinline__ void b1_planes_group(unsigned long long* words, const float* norm_w, int g, int j0,
                                                u32* planes, u32* gsx, float* group_sq) {
    // The norm weights first: their round trip overlaps the wait, not after it.
    const float* norm_w_group = norm_w != nullptr ? norm_w + (long long)g * GROUP_SIZE : nullptr;
    float nw[LAYOUT_LANES];
#pragma unroll
    for (int t = 0; t < LAYOUT_LANES; ++t) nw[t] = norm_w_group != nullptr ? norm_w_group[j0 + 2 * t] : 1.0f;
    unsigned long long w[LAYOUT_LANES];
    b1_poll_staged(words, 2, w);
    float v[LAYOUT_LANES];
    float sq = 0.0f;
#pragma unroll
    for (int t = 0; t < LAYOUT_LANES; ++t) {  // b1_prepare_group's loop on the polled values
        v[t] = __uint_as_float((u32)w[t]);
        sq += v[t] * v[t];
        if (norm_w_group != nullptr) v[t] *= nw[t];
    }
#pragma unroll
    for (int t = 0; t < LAYOUT_LANES; ++t) st_relaxed_gpu_u64(words + 2 * t, 0ull);
    b1_quantize_group(v, sq, planes, gsx, group_sq);
}

// The `_gemv_b1_out` epilogue, after gemv_store_outputs has also written every output to
// staged[o] as one 64-bit word (its bits and a ready flag in the high half, STAGED): the CTA that
// produces a group's last output quantizes the group, a warp per group, by polling its 128 words
// until every flag is set (those of earlier CTAs land when they land), then clears them for the
// next launch, and runs b1_prepare_group's arithmetic on the values, so the planes equal
// gemv_b1_prepare's of y bit for bit. No fence, counter, acquire or reload of y: its path is about
// one L2 round trip after the last producer's store. The per-group arrival counters it replaced
// (fence, atomic, acquire load, reload) cost more than a prepare launch (docs/kernel-notes.md,
// "Planes epilogues and the decode layer's launches"). Deadlock-free when the
// launch is one wave: a quantizing CTA waits only for lower-numbered CTAs, and the launcher
// checks that the grid fits on the device at once.
//
// TOKENS > 1 (the multi-token `_out` entry points): token tok's outputs are staged at tok n_out and
// its planes written at group tok (n_out / 128) + g; a warp per (group, token), tokens < m.
template <int MODE, int TOKENS = 1>
__device__ __forceinline__ void b1_planes_epilogue(int n_out, int tiles_per_cta, int cta, const B1PlanesOut& o,
                                                   int m = 1) {
    const int outs = MODE == MATMUL_SWIGLU ? TC_TILE_ROWS / 2 : TC_TILE_ROWS;
    const int o0 = cta * tiles_per_cta * outs, o1 = min(o0 + tiles_per_cta * outs, n_out);
    if (o0 >= o1) return;
    // Groups whose last output (128 g + 127) is one of this CTA's [o0, o1): g_first's ends at or
    // after o0, g_end - 1's before o1.
    const int g_first = o0 / GROUP_SIZE, g_end = o1 / GROUP_SIZE;
    const int warp = threadIdx.x / WARP_SIZE, lane = threadIdx.x % WARP_SIZE;
    const int j0 = layout_weight(0, lane);  // layout_weight(t, lane) = j0 + 2t
    // One token: written out rather than through b1_planes_group, which changed the one-token
    // `_out` kernels' SASS (their epilogue's placement moves them: "The decode GEMV").
    if constexpr (TOKENS == 1) {
        for (int g = g_first + warp; g < g_end; g += blockDim.x / WARP_SIZE) {
            unsigned long long* words = o.staged + (long long)g * GROUP_SIZE + j0;
            // The norm weights first: their round trip overlaps the wait, not after it.
            const float* norm_w_group = o.norm_w != nullptr ? o.norm_w + (long long)g * GROUP_SIZE : nullptr;
            float nw[LAYOUT_LANES];
#pragma unroll
            for (int t = 0; t < LAYOUT_LANES; ++t) nw[t] = norm_w_group != nullptr ? norm_w_group[j0 + 2 * t] : 1.0f;
            unsigned long long w[LAYOUT_LANES];
            b1_poll_staged(words, 2, w);
            float v[LAYOUT_LANES];
            float sq = 0.0f;
#pragma unroll
            for (int t = 0; t < LAYOUT_LANES; ++t) {  // b1_prepare_group's loop on the polled values
                v[t] = __uint_as_float((u32)w[t]);
                sq += v[t] * v[t];
                if (norm_w_group != nullptr) v[t] *= nw[t];
            }
#pragma unroll
            for (int t = 0; t < LAYOUT_LANES; ++t) st_relaxed_gpu_u64(words + 2 * t, 0ull);
            b1_quantize_group(v, sq, o.planes + (long long)g * B1_GROUP_WORDS, o.gsx + 2 * g, o.group_sq + g);
        }
    } else {
        for (int item = warp; item < (g_end - g_first) * m; item += blockDim.x / WARP_SIZE) {
            const int g = g_first + item / m, tok = item % m;
            const long long row_group = (long long)tok * (n_out / GROUP_SIZE) + g;
            b1_planes_group(o.staged + (long long)tok * n_out + (long long)g * GROUP_SIZE + j0, o.norm_w, g, j0,
                            o.planes + row_group * B1_GROUP_WORDS, o.gsx + 2 * row_group, o.group_sq + row_group);
        }
    }
}

// The `_gemv_b1_rope` epilogue's parameters: the decode qkv projection (MATMUL_STORE, one token,
// head_dim = GROUP_SIZE) does qk_norm_rope_kv_write's work on its own outputs. Per output one
// staging word (zero between launches), the device position, both norms' weights, the RoPE table
// ([max_pos][64] cos and sin), and the layer's paged f16 cache (pools [blocks][n_kv][KV_BLOCK][128]
// and the sequence's block table, prelude.cuh). Mirrored by `RopeOutArgs` in
// ops/matmul_q1/cuda_b1.rs (same fields, same order).
struct B1RopeOut {
    static constexpr int KIND = B1_OUT_ROPE;
    unsigned long long* staged;
    const u32* pos0;
    const float* q_norm;
    const float* k_norm;
    const float* cos_table;
    const float* sin_table;
    u16* k_cache;
    u16* v_cache;
    const u32* block_table;
    float eps;
    int max_pos;
    int max_seq;
    int n_q;
    int n_kv;
};

// The rope epilogue, after gemv_store_outputs wrote every output only as a staging word (bits and
// a ready flag; no plain store of y, which another CTA's late store could overwrite after this
// one's). The CTA that produces a head's last output takes the head, a warp per head: it polls
// the head's 128 words as b1_planes_epilogue does (lane l holds elements l + 32 t, both halves of
// its rotating pairs d = l and l + 32), clears them, and writes the head to y: q and k heads
// normalised and rotated, v heads as computed; k and v rows also to the caches at `pos` (in the
// block the table names, its entry read before the poll; skipped past max_seq, no entry read
// then; NaN heads past max_pos). qk_norm_rope_kv_write's arithmetic (qk_pair_sq,
// qk_inv_rms, qk_rope_pair), its sum of squares in block_sum's order over that kernel's two warps
// (each warp's butterfly, then the two sums added): bit-identical to the two launches it
// replaces. One wave, as b1_planes_epilogue.
__device__ __forceinline__ void b1_rope_epilogue(float* y, int n_out, int tiles_per_cta, int cta, const B1RopeOut& o,
                                                 u32 pos) {
    constexpr int HD = GROUP_SIZE, HALF = HD / 2, PER_LANE = HD / WARP_SIZE;
    const int o0 = cta * tiles_per_cta * TC_TILE_ROWS, o1 = min(o0 + tiles_per_cta * TC_TILE_ROWS, n_out);
    if (o0 >= o1) return;
    const int warp = threadIdx.x / WARP_SIZE, lane = threadIdx.x % WARP_SIZE;
    for (int head = o0 / HD + warp; head < o1 / HD; head += blockDim.x / WARP_SIZE) {  // warp-uniform
        const bool is_v = head >= o.n_q + o.n_kv;
        const bool rotate = !is_v && pos < (u32)o.max_pos;
        const bool to_cache = head >= o.n_q && pos < (u32)o.max_seq;
        // What does not come from the other CTAs first: these round trips overlap the poll.
        const u32 block = to_cache ? o.block_table[pos / KV_BLOCK] : 0u;
        float w[PER_LANE], c[2], s[2];
        if (rotate) {
            const float* nw = head < o.n_q ? o.q_norm : o.k_norm;
#pragma unroll
            for (int t = 0; t < PER_LANE; ++t) w[t] = nw[lane + WARP_SIZE * t];
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                c[i] = o.cos_table[(long long)pos * HALF + lane + WARP_SIZE * i];
                s[i] = o.sin_table[(long long)pos * HALF + lane + WARP_SIZE * i];
            }
        }
        unsigned long long* words = o.staged + (long long)head * HD + lane;
        unsigned long long v64[PER_LANE];
        b1_poll_staged(words, WARP_SIZE, v64);
        float h[PER_LANE];
#pragma unroll
        for (int t = 0; t < PER_LANE; ++t) {
            h[t] = __uint_as_float((u32)v64[t]);
            st_relaxed_gpu_u64(words + WARP_SIZE * t, 0ull);
        }
        if (!is_v) {
            // (h[0], h[2]) is the pair d = lane, (h[1], h[3]) d = lane + 32: qk_norm_rope_kv_write's
            // thread d of its warps 0 and 1, whose sums block_sum adds.
            const float ss = warp_sum(qk_pair_sq(h[0], h[2])) + warp_sum(qk_pair_sq(h[1], h[3]));
            if (rotate) {
                const float inv = qk_inv_rms(ss, HD, o.eps);
                qk_rope_pair(h[0], h[2], inv, w[0], w[2], c[0], s[0], &h[0], &h[2]);
                qk_rope_pair(h[1], h[3], inv, w[1], w[3], c[1], s[1], &h[1], &h[3]);
            } else {
#pragma unroll
                for (int t = 0; t < PER_LANE; ++t) h[t] = __int_as_float(0x7fc00000);
            }
        }
        float* dst = y + (long long)head * HD + lane;
#pragma unroll
        for (int t = 0; t < PER_LANE; ++t) dst[WARP_SIZE * t] = h[t];
        if (to_cache) {
            const int kv_head = head - o.n_q - (is_v ? o.n_kv : 0);
            u16* row = (is_v ? o.v_cache : o.k_cache) + kv_block_row(block, o.n_kv, kv_head, (int)pos, HD) + lane;
#pragma unroll
            for (int t = 0; t < PER_LANE; ++t) row[WARP_SIZE * t] = f32_to_f16(h[t]);
        }
    }
}

// The epilogue adds only warp 0's norm slot (the others are zero) in the GEMVs that have a norm
// (Store, SwiGLU): about 550 fewer instructions there. The Add GEMVs keep the all-slot sum so their
// SASS is unchanged: reading one slot everywhere was slower, their loops slowing with their changed
// code; only where a norm exists it gains (docs/kernel-notes.md, "The decode GEMV (binary tensor
// core)").
#define B1_ONE_NORM_SLOT(MODE) ((MODE) != MATMUL_ADD)

// OUT: the epilogue after the stores (B1NoOut, B1PlanesOut for the `_gemv_b1_out` entry points,
// B1RopeOut for `_gemv_b1_rope`). A compile-time switch: the mere presence of the (skipped)
// planes epilogue made the plain kernels slower per launch (docs/kernel-notes.md, "The decode GEMV
// (binary tensor core)": code placement), so the plain entry points are compiled without it.
// TOKENS > 1 (`_gemv_b1_t2`, `_t4`, `_t8`: a batched decode step of m <= TOKENS sequences): the same
// weight stream against m tokens' planes ([token][group] in the scratch, [token][chunk group] in
// shared memory), each token's sums and finish as its own GEMV's (b1_ring_unit_tokens); y and the
// fused norm per token; no epilogue work (B1NoOut) or every token's planes (B1PlanesOut, `_out`).
template <int BITS, int MODE, int NB, class OUT, int TOKENS = 1>
__device__ __forceinline__ void gemv_b1_body(const u16* __restrict__ scales, const u32* __restrict__ payload,
                                             const u32* planes, const u32* gsx_all, const float* group_sq,
                                             float* __restrict__ y, int n_out, int k, int tiles_per_cta,
                                             int splits, int chunk_groups, int norm, float norm_eps, int cta,
                                             const OUT& out, int m = 1) {
    static_assert(TOKENS == 1 || OUT::KIND != B1_OUT_ROPE, "the rope epilogue is a one-token kernel's");
    constexpr int AHEAD = TC_AHEAD(BITS);
    // Partial slots per (warp, row): 2 for one token (the store loop's historical stride), else one per token.
    constexpr int P_STRIDE = TOKENS == 1 ? 2 : TOKENS;
    TRACE_MARKS_BEGIN;
    TC_MARK(0);  // the lab's and the decode trace's phase marks (matmul_gemv_tc.cu); nothing in production
    extern __shared__ uint4 b1_smem[];
    const int groups_per_row = k / GROUP_SIZE;
    const int units = groups_per_row / NB;
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const int g = lane / 4, t = lane % 4;
    const int tile_local = warp / splits, split = warp % splits;
    const int tile = cta * tiles_per_cta + tile_local;
    // Warps past tiles_per_cta * splits (a CTA sized for another geometry) load and compute
    // nothing but take part in every barrier.
    const bool active = warp < tiles_per_cta * splits;
    u32* xb = reinterpret_cast<u32*>(b1_smem);
    u32* gsx = xb + TOKENS * chunk_groups * B1_GROUP_WORDS;
    float* partial = reinterpret_cast<float*>(gsx + TOKENS * 2 * chunk_groups);
    u32 top;
    int lane_shift;
    b1_lane_plane_weights<BITS>(t, top, lane_shift);

    const u32* wnext[2];
    const u16* snext[2];
    tc_stream_start<BITS, MODE, NB>(scales, payload, tile, g, t, split, n_out, groups_per_row, wnext, snext);
    const int w_step = splits * (NB * LAYOUT_LANES * BITS), s_step = splits * NB;

    float acc = 0.0f;
    float acc_tokens[TOKENS] = {};  // TOKENS > 1
    TcUnit<BITS, NB> ring[AHEAD + 1];
    int loaded = active ? split : units;
    // The whole ring fills before griddep_wait: filling one slot or none there and the rest after
    // it was slower, and the prepare's x load, the suspected victim of that burst, arrived no
    // sooner (docs/kernel-notes.md, "The decode GEMV (binary tensor core)", `B1_PREWAIT_ONE`).
#pragma unroll
    for (int a = 0; a <= AHEAD; ++a) {
        if (loaded < units) tc_load(ring[a], wnext, snext);
        tc_stream_step(loaded, splits, wnext, snext, w_step, s_step);
    }

    // The Add GEMVs' residual at this thread's output, read ahead of the final add (below).
    float y_early = 0.0f;
    auto read_y_early = [&]() {
        const int o = cta * tiles_per_cta * TC_TILE_ROWS + (int)threadIdx.x;
        if ((int)threadIdx.x < tiles_per_cta * TC_TILE_ROWS && o < n_out) y_early = y[o];
    };
    // Weights never change: their first units stream in before the wait for the previous kernel
    // (programmatic dependent launch: gemv_b1_prepare); the planes and y are the dependent data.
    griddep_wait();
    TC_MARK(1);
    // The `_out` Add GEMVs read their y right after the wait, so its round trip (another SM's fresh
    // output: slower than an L2 hit) overlaps the loop instead of preceding the final add. Not before
    // the wait: in `planes` mode y comes from the kernel two launches back, and the GEMV in
    // between triggers at its start; once this wait returns, that kernel has completed.
    // Faster than the read in the epilogue (docs/kernel-notes.md, "Planes epilogues and the decode
    // layer's launches": the residual after the wait).
    constexpr bool Y_READ = TOKENS == 1 && OUT::KIND == B1_OUT_PLANES && MODE == MATMUL_ADD;
    if constexpr (Y_READ) read_y_early();
    // The rope epilogue's position (written by an earlier graph replay's position_advance; every
    // kernel before this one has completed once the wait returns).
    u32 rope_pos = 0;
    if constexpr (OUT::KIND == B1_OUT_ROPE) rope_pos = out.pos0[0];
    __shared__ float norm_sq[B1_MAX_THREADS / WARP_SIZE][TOKENS];
    if (lane == 0)
#pragma unroll
        for (int tok = 0; tok < TOKENS; ++tok) norm_sq[warp][tok] = 0.0f;
    // The fused RMSNorm's per-group sums of squares, copied with the first planes: read after the
    // loop from global memory, their L2 round trip sat on the kernel's critical path (qkv's and
    // gate_up's tail in the decode trace; warp 0 reading them during the planes copy delayed the
    // CTA's first barrier instead). Faster than both placements (docs/kernel-notes.md, "The decode
    // GEMV (binary tensor core)").
    __shared__ float group_sq_s[B1_NORM_STAGE_GROUPS];
    const bool stage_sq = TOKENS == 1 && norm && groups_per_row <= B1_NORM_STAGE_GROUPS;
    float norm_ss = 0.0f;
    int u = active ? split : units, phase = 0;
    for (int c0 = 0; c0 < groups_per_row; c0 += chunk_groups) {
        const int cg = min(chunk_groups, groups_per_row - c0);
        __syncthreads();  // the previous chunk's planes are consumed
#pragma unroll
        for (int tok = 0; tok < TOKENS; ++tok) {
            if (TOKENS > 1 && tok >= m) break;
            // Token tok's rows of the scratch (tok = 0: the one-token kernels' own pointers).
            const u32* planes_tok = planes + (long long)tok * groups_per_row * B1_GROUP_WORDS;
            const u32* gsx_tok = gsx_all + (long long)tok * 2 * groups_per_row;
            const uint4* src = reinterpret_cast<const uint4*>(planes_tok + (long long)c0 * B1_GROUP_WORDS);
            uint4* dst = b1_smem + tok * chunk_groups * (B1_GROUP_WORDS / 4);
            for (int i = threadIdx.x; i < cg * B1_GROUP_WORDS / 4; i += blockDim.x) cp_async16(dst + i, src + i);
            for (int i = threadIdx.x; i < 2 * cg; i += blockDim.x)
                cp_async4(gsx + tok * 2 * chunk_groups + i, gsx_tok + 2 * c0 + i);
        }
        if (c0 == 0 && stage_sq)
            for (int i = threadIdx.x; i < groups_per_row; i += blockDim.x) cp_async4(group_sq_s + i, group_sq + i);
        cp_async_commit();
        cp_async_wait<0>();
        __syncthreads();
        TC_MARK(2);
        const int u_end = (c0 + cg) / NB;
        for (; u < u_end; u += splits) {
            const int gl0 = u * NB - c0;  // the unit's first group within the chunk
            auto reload = [&](TcUnit<BITS, NB>& r) {
                if (loaded < units) tc_load(r, wnext, snext);
            };
            if constexpr (TOKENS == 1) {
                constexpr int PAIRS = (NB + 1) / 2;
                u32 sums[PAIRS][2][2];  // [pair][group of the pair][row g / g + 8]
                float d[PAIRS][2];
                b1_ring_unit_sums<BITS, NB, AHEAD>(ring, phase, xb + gl0 * B1_GROUP_WORDS + lane * B1_WORDS, top,
                                                   lane_shift, t, sums, d, reload);
                // The swaps run outside the ring-slot dispatch, where the warp is visibly converged
                // (finishing a unit after the next unit's mma instead was slower: docs/kernel-notes.md,
                // "The decode GEMV (binary tensor core)", `B1_DEFERRED_FINISH`).
                acc = b1_unit_finish<NB>(sums, d, gsx + 2 * gl0, t, acc);
            } else {
                b1_ring_unit_tokens<BITS, NB, AHEAD, TOKENS>(ring, phase, xb + gl0 * B1_GROUP_WORDS + lane * B1_WORDS,
                                                             chunk_groups * B1_GROUP_WORDS, gsx + 2 * gl0,
                                                             2 * chunk_groups, top, lane_shift, t, m, acc_tokens,
                                                             reload);
            }
            phase = phase == AHEAD ? 0 : phase + 1;
            tc_stream_step(loaded, splits, wnext, snext, w_step, s_step);
        }
    }

    TC_MARK(3);
    // Lanes t and t ^ 2 hold the same row's two groups of every pair.
    if constexpr (TOKENS == 1) {
        acc += __shfl_xor_sync(FULL_MASK, acc, 2);
        if (t < 2 && active) partial[(warp * TC_TILE_ROWS + g + 8 * t) * P_STRIDE] = acc;
        // Fused RMSNorm: warp 0 adds the groups' sums of squares in group order (deterministic)
        // into its slot; the epilogue takes 1 / rms from the slots (the others stay 0).
        if (norm && warp == 0) norm_ss = b1_norm_sum_sq(stage_sq ? group_sq_s : group_sq, groups_per_row, lane);
        if (norm && warp == 0 && lane == 0) norm_sq[0][0] = norm_ss;
    } else {
#pragma unroll
        for (int tok = 0; tok < TOKENS; ++tok) {
            acc_tokens[tok] += __shfl_xor_sync(FULL_MASK, acc_tokens[tok], 2);
            if (t < 2 && active) partial[(warp * TC_TILE_ROWS + g + 8 * t) * P_STRIDE + tok] = acc_tokens[tok];
        }
        // Each token's sums of squares as one token's GEMV adds them (its slot 0).
        if (norm && warp == 0)
            for (int tok = 0; tok < m; ++tok) {
                const float ss = b1_norm_sum_sq(group_sq + (long long)tok * groups_per_row, groups_per_row, lane);
                if (lane == 0) norm_sq[0][tok] = ss;
            }
    }
    __syncthreads();
    TC_MARK(4);
    gemv_store_outputs<MODE, Y_READ, B1_ONE_NORM_SLOT(MODE), OUT::KIND != B1_OUT_NONE, OUT::KIND != B1_OUT_ROPE, P_STRIDE, TOKENS>(
        partial, TOKENS == 1 ? 1 : m, y, n_out, k, tiles_per_cta, splits, norm != 0, norm_eps, norm_sq, cta, y_early, out.staged);
    if constexpr (OUT::KIND == B1_OUT_PLANES) b1_planes_epilogue<MODE, TOKENS>(n_out, tiles_per_cta, cta, out, m);
    if constexpr (OUT::KIND == B1_OUT_ROPE) {
        static_assert(MODE == MATMUL_STORE, "the rope epilogue is the qkv projection's");
        b1_rope_epilogue(y, n_out, tiles_per_cta, cta, out, rope_pos);
    }
    TC_MARK(5);
    TRACE_MARKS_END;
    TRACE_CTA_ENDS;
}

// The one-group-unit body (K % 512 != 0: never a real model's shape) is a call, so each entry
// point's inline code is the 4-group path alone, starting at the entry and running contiguously
// (inlined, ptxas placed the 1-group body first and every launch jumped ~18 KB into its code).
// A layer's distinct decode code (~160 KB of SASS) does not fit an SM's instruction caches, and
// code placement moves the GEMVs by tenths of a microsecond: with the one-slot epilogue above
// this layout is faster on both models (docs/kernel-notes.md, "The decode GEMV (binary tensor
// core)": hot body first).
template <int BITS, int MODE, class OUT>
__device__ __noinline__ void gemv_b1_body_single_groups(const u16* scales, const u32* payload, const u32* planes,
                                                        const u32* gsx, const float* group_sq, float* y, int n_out,
                                                        int k, int tiles_per_cta, int splits, int chunk_groups, int norm,
                                                        float norm_eps, int cta, OUT out) {
    gemv_b1_body<BITS, MODE, 1, OUT>(scales, payload, planes, gsx, group_sq, y, n_out, k, tiles_per_cta,
                                              splits, chunk_groups, norm, norm_eps, cta, out);
}
template <int BITS, int MODE, class OUT, int TOKENS>
__device__ __noinline__ void gemv_b1_tokens_single_groups(const u16* scales, const u32* payload, const u32* planes,
                                                          const u32* gsx, const float* group_sq, float* y, int n_out,
                                                          int k, int tiles_per_cta, int splits, int chunk_groups,
                                                          int norm, float norm_eps, int cta, OUT out, int m) {
    gemv_b1_body<BITS, MODE, 1, OUT, TOKENS>(scales, payload, planes, gsx, group_sq, y, n_out, k, tiles_per_cta,
                                             splits, chunk_groups, norm, norm_eps, cta, out, m);
}

// `cta`: which of the launch's CTAs this is (blockIdx.x); `m`: the tokens present (TOKENS > 1).
template <int BITS, int MODE, class OUT, int TOKENS = 1>
__device__ __forceinline__ void gemv_b1(const u16* scales, const u32* payload, const u32* planes, const u32* gsx,
                                        const float* group_sq, float* y, int n_out, int k, int tiles_per_cta,
                                        int splits, int chunk_groups, int norm, float norm_eps, int cta,
                                        const OUT& out, int m = 1) {
    if (layout_block_groups(k / GROUP_SIZE) == LAYOUT_BLOCK_GROUPS)
        gemv_b1_body<BITS, MODE, LAYOUT_BLOCK_GROUPS, OUT, TOKENS>(scales, payload, planes, gsx, group_sq, y, n_out, k,
                                                                   tiles_per_cta, splits, chunk_groups, norm, norm_eps,
                                                                   cta, out, m);
    else if constexpr (TOKENS == 1)
        gemv_b1_body_single_groups<BITS, MODE, OUT>(scales, payload, planes, gsx, group_sq, y, n_out, k,
                                                             tiles_per_cta, splits, chunk_groups, norm, norm_eps, cta,
                                                             out);
    else
        gemv_b1_tokens_single_groups<BITS, MODE, OUT, TOKENS>(scales, payload, planes, gsx, group_sq, y, n_out, k,
                                                              tiles_per_cta, splits, chunk_groups, norm, norm_eps, cta,
                                                              out, m);
}

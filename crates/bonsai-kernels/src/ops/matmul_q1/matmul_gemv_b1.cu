// Decode GEMV on the binary tensor core, m = 1: `gemv_b1`. Templates only; matmul_q1.cu
// instantiates. Why (docs/kernel-notes.md, round 8): gemv_tc issues ~1.8 instructions per weight
// (A registers built from sign bits, three bf16 parts of x), more than the H200 can issue at
// copy speed (~1 per weight); one `mma.sync m16n8k256 b1 and.popc` covers 8x the weights of a
// bf16 mma at the same issue cost, and the layout's lane words ARE its A registers.
//
// Arithmetic, per 128-group G of x (after the fused RMSNorm's weights, if any):
//   x_k ~ s_G q_k, s_G = 2^(E - B1_PLANES + 2) with max|x_G| < 2^E, q_k = rint(x_k / s_G), an
//   integer of |q_k| <= 2^(B1_PLANES - 2) (|x_k - s_G q_k| <= s_G / 2), held as B1_PLANES bit
//   planes of its two's complement (plane p weighs 2^p, the top plane -2^(P-1)).
//   Q1 (w = 2b - 1): sum_k w_k q_k = 2 sum_p coef_p popc(b AND plane_p) - X_G, X_G = sum_k q_k;
//   Q2 (w = c - 1 = 2 c1 + c0 - 1): the same with the bit planes c1 (weighing 2) and c0 (1).
//   All of that is exact s32 arithmetic (|result| <= 2 * 128 * 2^22 = 2^30; partial sums wrap
//   harmlessly in u32); one rounding converts it to f32, times d * s_G (exact) into the sum.
//
// One binary mma: A = 16 weight rows x 256 k = two groups (a pair) of the tile's rows (registers
// 0/1: the pair's first group, 2/3: its second; lane t's layout words, weight_layout.cu); B = 8
// columns = 4 planes x 2 halves: column n = 4h + pl holds plane 4j + pl of the pair's group h
// over that group's 128 k and zeros over the other's, so C[row][n] is one (row, group, plane)
// popcount. B1_PLANES / 4 mma per pair and weight plane. Lane (g, t) receives columns 2t, 2t+1:
// group h = t / 2, planes 4j + 2 (t % 2) + {0, 1}; it weighs them into a u32 per row, swaps
// half of them with lane t ^ 1 so that each lane holds a whole plane sum of one (row, group),
// and scales that. The k order inside a group is the layout's lane-word order, the same for A
// and B (the staging writes x's planes in it), so the k reduction is unchanged.
//
// Work split, weight loads and the epilogue are gemv_tc's (matmul_gemv_tc.cu: tiles x splits
// warps per CTA, TcUnit ring of units loaded ahead, split partials added in split order).
// Dynamic shared memory (`b1_smem_bytes` in tc_geometry.rs):
//   B [pair slots][32 lanes][B1_MMAS][2] u32 | (s_G, X_G) [chunk_groups][2] u32 | partials [warps][16][2] f32
// A pair slot is two groups (K % 512 == 0) or one (otherwise: A registers 2/3 are zero).

#define B1_PLANES 24
#define B1_MMAS (B1_PLANES / 4)
#define B1_PAIR_WORDS (WARP_SIZE * B1_MMAS * 2)
// Smallest group exponent E: keeps 2^(B1_PLANES - 2 - E) and s_G normal f32 (groups of |x| below
// 2^-100 quantize with that floor: the bound |x - s q| <= s / 2 still holds).
#define B1_MIN_EXP (-100)
#define B1_MAX_THREADS 512

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

// Stage groups [c0, c0 + cg) of x: each group's planes into the B slots of the lanes that read
// them, and (s_G, X_G). A warp per group; lane l takes the 4 weights j = layout_weight(t, l),
// t = 0..3 (bit l of lane word t), so a transpose of its 4 quantized values yields the planes.
template <int NB>
__device__ __forceinline__ void b1_stage(const float* __restrict__ x, int c0, int cg, u32* xb, u32* gsx,
                                         const float* __restrict__ norm_w, float* warp_sq) {
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE, warps = blockDim.x / WARP_SIZE;
    const int j0 = layout_weight(0, lane);  // layout_weight(t, lane) = j0 + 2t
    for (int gl = warp; gl < cg; gl += warps) {
        const long long base = (long long)(c0 + gl) * GROUP_SIZE + j0;
        float v[LAYOUT_LANES];
#pragma unroll
        for (int t = 0; t < LAYOUT_LANES; ++t) v[t] = x[base + 2 * t];
        if (norm_w != nullptr) {
            // Fused RMSNorm: stage x * w; 1 / rms scales the finished dot products (epilogue).
            float sq = 0.0f;
#pragma unroll
            for (int t = 0; t < LAYOUT_LANES; ++t) {
                sq += v[t] * v[t];
                v[t] *= norm_w[base + 2 * t];
            }
            sq = warp_sum(sq);
            if (lane == 0) warp_sq[0] += sq;
        }
        float amax = 0.0f;
#pragma unroll
        for (int t = 0; t < LAYOUT_LANES; ++t) amax = fmaxf(amax, fabsf(v[t]));
        amax = warp_max(amax);
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
        if (lane == 0) {
            gsx[2 * gl] = __float_as_uint(b1_pow2(e - B1_PLANES + 2));
            gsx[2 * gl + 1] = (u32)qsum;
        }
        // Group gl's pair slot and half; lane p (< B1_PLANES) then holds plane p of lane word t,
        // which B column n = 4 h + p % 4 (lanes 4n + t) takes as mma j = p / 4.
        const int slot = NB == LAYOUT_BLOCK_GROUPS ? gl / 2 : gl, h = NB == LAYOUT_BLOCK_GROUPS ? gl % 2 : 0;
        u32* pair = xb + slot * B1_PAIR_WORDS;
#pragma unroll
        for (int t = 0; t < LAYOUT_LANES; ++t) {
            const u32 plane = b1_transpose_bits((u32)q[t], lane);
            if (lane < B1_PLANES) {
                const int n = 4 * h + lane % 4, j = lane / 4;
                u32* dst = pair + ((n * LAYOUT_LANES + t) * B1_MMAS + j) * 2;
                dst[0] = h == 0 ? plane : 0u;
                dst[1] = h == 0 ? 0u : plane;
                if (NB != LAYOUT_BLOCK_GROUPS) {
                    // Single-group slots: the second half's columns read zeros (A is zero there too).
                    u32* other = pair + (((4 + lane % 4) * LAYOUT_LANES + t) * B1_MMAS + j) * 2;
                    other[0] = 0u;
                    other[1] = 0u;
                }
            }
        }
    }
}

// One pair of groups of a unit: B1_MMAS binary mma per weight plane, weighted into this lane's
// u32 sums of rows g and g + 8 (its planes of group t / 2 of the pair). `w`: the unit's words
// (`first`: the pair's first group within the unit; `has_second`: a second group exists);
// `b`: this lane's B words of the pair. Column 2t + e of mma j is plane p = 4j + 2 (t % 2) + e,
// weighing 2^p (the top plane -2^p), doubled for Q1 (w = 2b - 1): the lane-independent factor
// 2^(4j + e) is an immediate, the rest one shift at the end (`lane_shift`), and the top plane's
// lane-dependent sign sits in `top` (+-2^(4 B1_MMAS - 3)). Sums wrap mod 2^32; the result fits.
template <int BITS>
__device__ __forceinline__ void b1_pair_sums(const u32 (&w)[2][LAYOUT_BLOCK_GROUPS * BITS], int first, bool has_second,
                                             const u32* b, u32 top, int lane_shift, u32 (&sum)[2]) {
    u32 plane_sum[BITS][2] = {};  // per weight plane: Q2's c1 plane weighs twice its c0 plane
#pragma unroll
    for (int j = 0; j < B1_MMAS; ++j) {
        const uint2 bj = *reinterpret_cast<const uint2*>(b + 2 * j);
        const u32 e0 = 1u << (4 * j), e1 = j == B1_MMAS - 1 ? top : 1u << (4 * j + 1);
#pragma unroll
        for (int p = 0; p < BITS; ++p) {
            u32 a[4];
            a[0] = w[0][first * BITS + p];
            a[1] = w[1][first * BITS + p];
            a[2] = has_second ? w[0][(first + 1) * BITS + p] : 0u;
            a[3] = has_second ? w[1][(first + 1) * BITS + p] : 0u;
            int c[4] = {0, 0, 0, 0};
            mma_b1_and_popc_16x8x256(c, a, bj.x, bj.y);
            plane_sum[p][0] += (u32)c[0] * e0 + (u32)c[1] * e1;
            plane_sum[p][1] += (u32)c[2] * e0 + (u32)c[3] * e1;
        }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r)
        sum[r] = (BITS == 1 ? plane_sum[0][r] : plane_sum[0][r] + (plane_sum[BITS - 1][r] << 1)) << lane_shift;
}

// Lanes t and t ^ 1 hold the other half of each other's planes: after one swap even lanes hold
// row g's whole sum, odd lanes row g + 8's, of group t / 2 of the pair; minus X_G it is
// sum_k w_k q_k exactly, scaled by d s_G into acc. `gs`: (s, X) of the pair's first group;
// `d`: this lane's rows' f16 scales of its group. Outside any divergent branch (a shuffle).
__device__ __forceinline__ float b1_pair_finish(const u32 (&sum)[2], const u32* gs, const float (&d)[2], bool has_second,
                                                int t, float acc) {
    const bool odd = t & 1;  // selects, not indexing: a run-time index would put the arrays in memory
    const u32 total = (odd ? sum[1] : sum[0]) + __shfl_xor_sync(FULL_MASK, odd ? sum[0] : sum[1], 1);
    if (!has_second && t >= 2) return acc;  // no second group in a single-group slot
    const int h = t / 2;
    const float s = __uint_as_float(gs[2 * h]);
    const int dot = (int)(total - gs[2 * h + 1]);
    return fmaf((odd ? d[1] : d[0]) * s, (float)dot, acc);
}

template <int BITS, int MODE, int NB>
__device__ __forceinline__ void gemv_b1_body(const u16* __restrict__ scales, const u32* __restrict__ payload,
                                             const float* __restrict__ x, float* __restrict__ y, int n_out, int k,
                                             int tiles_per_cta, int splits, int chunk_groups,
                                             const float* __restrict__ norm_w, float norm_eps) {
    constexpr int AHEAD = TC_AHEAD(BITS, 1);
    extern __shared__ uint4 b1_smem[];
    const int groups_per_row = k / GROUP_SIZE;
    const int units = groups_per_row / NB;
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const int g = lane / 4, t = lane % 4;
    const int tile_local = warp / splits, split = warp % splits;
    const int tile = blockIdx.x * tiles_per_cta + tile_local;
    const int pair_slots = NB == LAYOUT_BLOCK_GROUPS ? chunk_groups / 2 : chunk_groups;
    u32* xb = reinterpret_cast<u32*>(b1_smem);
    u32* gsx = xb + pair_slots * B1_PAIR_WORDS;
    float* partial = reinterpret_cast<float*>(gsx + 2 * chunk_groups);

    // b1_pair_sums' plane weights: the top plane's sign on odd lanes (plane 4 B1_MMAS - 1 there,
    // 4 B1_MMAS - 3 on even lanes) and the lane's shift 2 (t % 2), +1 for Q1.
    const u32 top_weight = 1u << (4 * (B1_MMAS - 1) + 1);
    const u32 top = (t & 1) ? 0u - top_weight : top_weight;
    const int lane_shift = 2 * (t % 2) + (BITS == 1 ? 1 : 0);

    const int row0 = tc_weight_row<MODE>(tile, g, n_out), row1 = tc_weight_row<MODE>(tile, g + 8, n_out);
    constexpr int UNIT_WORDS = NB * LAYOUT_LANES * BITS;
    const u32* wnext[2] = {layout_row<BITS>(payload, row0, groups_per_row) + t * NB * BITS + split * UNIT_WORDS,
                           layout_row<BITS>(payload, row1, groups_per_row) + t * NB * BITS + split * UNIT_WORDS};
    const u16* snext[2] = {scales + (long long)row0 * groups_per_row + split * NB,
                           scales + (long long)row1 * groups_per_row + split * NB};
    const int w_step = splits * UNIT_WORDS, s_step = splits * NB;

    float acc = 0.0f;
    TcUnit<BITS, NB> ring[AHEAD + 1];
    int loaded = split;
#pragma unroll
    for (int a = 0; a <= AHEAD; ++a) {
        if (loaded < units) tc_load(ring[a], wnext, snext);
        loaded += splits;
#pragma unroll
        for (int h = 0; h < 2; ++h) { wnext[h] += w_step; snext[h] += s_step; }
    }

    // Weights never change: their first units stream in before the wait for the previous kernel
    // (programmatic dependent launch); x and y are the dependent data.
    griddep_wait();
    __shared__ float norm_sq[B1_MAX_THREADS / WARP_SIZE][GEMV_MAX_TOKENS];
    if (norm_w != nullptr && lane == 0) norm_sq[warp][0] = 0.0f;
    int u = split, phase = 0;
    for (int c0 = 0; c0 < groups_per_row; c0 += chunk_groups) {
        const int cg = min(chunk_groups, groups_per_row - c0);
        __syncthreads();  // the previous chunk's planes are consumed
        b1_stage<NB>(x, c0, cg, xb, gsx, norm_w, norm_sq[warp]);
        __syncthreads();
        const int u_end = (c0 + cg) / NB;
        for (; u < u_end; u += splits) {
            const int gl0 = u * NB - c0;  // the unit's first group within the chunk
            constexpr int PAIRS = (NB + 1) / 2;
            u32 sums[PAIRS][2];
            float d[PAIRS][2];
#pragma unroll
            for (int a = 0; a <= AHEAD; ++a) {
                if (a != phase) continue;
                TcUnit<BITS, NB>& r = ring[a];
                // Widen the unit to LAYOUT_BLOCK_GROUPS groups of words (NB = 1: the rest unused).
                u32 w[2][LAYOUT_BLOCK_GROUPS * BITS];
#pragma unroll
                for (int h = 0; h < 2; ++h) {
#pragma unroll
                    for (int i = 0; i < NB * BITS; ++i) w[h][i] = r.w[h][i];
#pragma unroll
                    for (int i = NB * BITS; i < LAYOUT_BLOCK_GROUPS * BITS; ++i) w[h][i] = 0u;
                }
#pragma unroll
                for (int pr = 0; pr < PAIRS; ++pr) {
                    const int slot = NB == LAYOUT_BLOCK_GROUPS ? gl0 / 2 + pr : gl0;
                    b1_pair_sums<BITS>(w, 2 * pr, NB == LAYOUT_BLOCK_GROUPS, xb + slot * B1_PAIR_WORDS + lane * B1_MMAS * 2,
                                       top, lane_shift, sums[pr]);
                    // This lane's group of the pair (t / 2) picks its rows' scales: word pr holds
                    // the f16 scales of groups 2 pr (low half) and 2 pr + 1 (NB = 1: one, low).
                    const int half_shift = NB == LAYOUT_BLOCK_GROUPS ? 16 * (t / 2) : 0;
                    d[pr][0] = f16_to_f32((u16)(r.d[0][pr] >> half_shift));
                    d[pr][1] = f16_to_f32((u16)(r.d[1][pr] >> half_shift));
                }
                if (loaded < units) tc_load(r, wnext, snext);
            }
            // The swaps run outside the ring-slot dispatch, where the warp is visibly converged.
#pragma unroll
            for (int pr = 0; pr < PAIRS; ++pr)
                acc = b1_pair_finish(sums[pr], gsx + 2 * (gl0 + 2 * pr), d[pr], NB == LAYOUT_BLOCK_GROUPS, t, acc);
            phase = phase == AHEAD ? 0 : phase + 1;
            loaded += splits;
#pragma unroll
            for (int h = 0; h < 2; ++h) { wnext[h] += w_step; snext[h] += s_step; }
        }
    }

    // Lanes t and t ^ 2 hold the same row's two groups of every pair.
    acc += __shfl_xor_sync(FULL_MASK, acc, 2);
    if (t < 2) partial[(warp * TC_TILE_ROWS + g + 8 * t) * 2] = acc;
    __syncthreads();
    gemv_store_outputs<MODE, 1>(partial, 1, y, n_out, k, tiles_per_cta, splits, norm_w, norm_eps, norm_sq);
}

template <int BITS, int MODE>
__device__ __forceinline__ void gemv_b1(const u16* scales, const u32* payload, const float* x, float* y, int n_out,
                                        int k, int tiles_per_cta, int splits, int chunk_groups, const float* norm_w,
                                        float norm_eps) {
    if (layout_block_groups(k / GROUP_SIZE) == LAYOUT_BLOCK_GROUPS)
        gemv_b1_body<BITS, MODE, LAYOUT_BLOCK_GROUPS>(scales, payload, x, y, n_out, k, tiles_per_cta, splits,
                                                      chunk_groups, norm_w, norm_eps);
    else
        gemv_b1_body<BITS, MODE, 1>(scales, payload, x, y, n_out, k, tiles_per_cta, splits, chunk_groups, norm_w,
                                    norm_eps);
}

// Decode GEMV on tensor cores, m = 1..GEMV_MAX_TOKENS tokens: `gemv_tc`. Templates only;
// matmul_q1.cu instantiates. Why (docs/kernel-notes.md): the CUDA-core GEMVs spent ~3 issued
// instructions per weight on predicated adds and bookkeeping; here the dot runs on mma.sync.
//
// A tile is 16 weight rows (SwiGLU: 8 gate rows and the 8 matching up rows) x one 128-group per
// accumulation: mma.sync m16n8k16 bf16, A = the tile's weights as exact +-1 (Q1) or, for Q2, two
// planes +-0.5 (bit 0 of the code) and +-1 (bit 1) issued into the same accumulator, B = x split
// exactly into three bf16 parts x = hi + mid + lo placed in three of B's 8 columns (m = 1), or
// two tokens per n-tile in columns 0-2 and 3-5 (m = 2..8, up to 4 n-tiles sharing A), f32
// accumulation. Per group: C starts at 0, takes the group's 8 k16 steps (x2 planes for Q2), Q2
// adds 0.5 sum x of the group ((c - 1) = 0.5 s_lo + s_hi + 0.5, s = +-1), then every element is
// scaled by its row's f16 d and added to the running f32 sums. At the end each token's three
// part columns are summed within the lane quad.
//
// A needs no per-weight decode: the device layout (weight_layout.cu) gives lane t, per row and
// group, one lane word whose pair q (k16 step q/2, half q%2) sits at bits 15 - q / 31 - q, so an
// A register is ((word << q) & 0x80008000) ^ 0xBF80BF80 (1 SHF + 1 LOP3 per 2 weights).
//
// Work split: CTA = tiles_per_cta x splits warps; warp (tile, split) takes the tile's units (a
// unit is one layout block: 4 groups, or 1 when K % 512 != 0) split, split + splits, ..., loading
// each unit's words with one 16-byte load per row and plane, TC_AHEAD units ahead in registers.
// B fragments are staged per CTA in shared memory, chunk_groups groups at a time (the whole K for
// m = 1 on every Bonsai shape). The splits' partial sums meet in shared memory and are added in
// split order (deterministic).
// Dynamic shared memory (bytes; `tc_smem_bytes` in cuda.rs):
//   B  [chunk_groups][n_tiles][TC_QUADS][COLS][4 lanes] uint4 |
//   x half-sums [chunk_groups][tok_count] f32 | partials [warps][16 rows][2 NT] f32

#define TC_TILE_ROWS 16
#define TC_QUADS 4          // uint4 of B per (group, n-tile, column lane): steps 2i and 2i + 1
#define TC_PARTS 3          // x = hi + mid + lo
#define TC_MAX_THREADS_M1 768
#define TC_MAX_THREADS_M8 512
#define TC_SIGN_PAIR 0x80008000u
#define TC_PM_ONE 0xBF80BF80u   // sign bits -> bf16 pair of +-1.0
#define TC_PM_HALF 0xBF00BF00u  // sign bits -> bf16 pair of +-0.5

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

// The A register of pair q of a lane word: two bf16 of +-magnitude, lower k in the low half.
__device__ __forceinline__ u32 tc_pair(u32 word, int q, u32 magnitude) {
    return ((word << q) & TC_SIGN_PAIR) ^ magnitude;
}

// uint4 index of B fragments (group gl, n-tile nt, quad i, column c, lane t).
template <int COLS>
__device__ __forceinline__ int tc_b_index(int gl, int nt, int i, int c, int t, int n_tiles) {
    return (((gl * n_tiles + nt) * TC_QUADS + i) * COLS + c) * LAYOUT_LANES + t;
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

// One unit of a lane's weights: rows g and g + 8, NB groups x BITS planes, and the f16 scales.
template <int BITS, int NB>
struct TcUnit {
    u32 w[2][NB * BITS];
    u32 d[2][(NB + 1) / 2];
};

template <int BITS, int NB>
__device__ __forceinline__ void tc_load(TcUnit<BITS, NB>& r, const u32* const (&rows)[2],
                                        const u16* const (&srows)[2], int u, int units) {
    if (u >= units) return;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const u32* src = rows[h] + u * NB * LAYOUT_LANES * BITS;
        if (NB * BITS >= 4) {
#pragma unroll
            for (int v = 0; v < NB * BITS / 4; ++v) {
                const uint4 q = reinterpret_cast<const uint4*>(src)[v];
                r.w[h][4 * v] = q.x; r.w[h][4 * v + 1] = q.y; r.w[h][4 * v + 2] = q.z; r.w[h][4 * v + 3] = q.w;
            }
        } else if (NB * BITS == 2) {
            const uint2 q = *reinterpret_cast<const uint2*>(src);
            r.w[h][0] = q.x; r.w[h][NB * BITS - 1] = q.y;
        } else {
            r.w[h][0] = src[0];
        }
        if (NB == LAYOUT_BLOCK_GROUPS) {
            const uint2 q = *reinterpret_cast<const uint2*>(srows[h] + u * NB);
            r.d[h][0] = q.x; r.d[h][(NB + 1) / 2 - 1] = q.y;
        } else {
            r.d[h][0] = srows[h][u * NB];
        }
    }
}

// f16 scale of group gi of a unit's row h.
template <int BITS, int NB>
__device__ __forceinline__ float tc_scale(const TcUnit<BITS, NB>& r, int h, int gi) {
    return f16_to_f32((u16)(r.d[h][gi / 2] >> (16 * (gi % 2))));
}

// Stage groups [c0, c0 + cg) of x: B fragments of every token and part, and (Q2) 0.5 sum x.
template <int BITS, int COLS>
__device__ __forceinline__ void tc_stage(const float* __restrict__ x, int m, int k, int c0, int cg,
                                         int n_tiles, int tok_count, uint4* bs, float* xhalf) {
    constexpr int PAIRS = GROUP_SIZE / 2;
    u32* bw = reinterpret_cast<u32*>(bs);
    for (int i = threadIdx.x; i < cg * tok_count * PAIRS; i += blockDim.x) {
        const int pi = i % PAIRS, tok = (i / PAIRS) % tok_count, gl = i / PAIRS / tok_count;
        const int j = 2 * pi;
        float2 v = make_float2(0.0f, 0.0f);
        if (tok < m) v = *reinterpret_cast<const float2*>(x + (long long)tok * k + (long long)(c0 + gl) * GROUP_SIZE + j);
        u32 p0[TC_PARTS], p1[TC_PARTS];
        tc_split3(v.x, p0);
        tc_split3(v.y, p1);
        // Weight j of a group is k16 step j / 16, half (j / 8) % 2, lane (j / 2) % 4 (weight_layout.cu).
        const int s = j / 16, h = (j / 8) % 2, t = (j / 2) % 4;
#pragma unroll
        for (int p = 0; p < TC_PARTS; ++p) {
            const int c = 3 * (tok % 2) + p;
            bw[tc_b_index<COLS>(gl, tok / 2, s / 2, c, t, n_tiles) * 4 + 2 * (s % 2) + h] =
                (p0[p] >> 16) | (p1[p] & 0xFFFF0000u);
        }
    }
    if (BITS == 2) {
        const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
        for (int item = warp; item < cg * tok_count; item += blockDim.x / WARP_SIZE) {
            const int gl = item / tok_count, tok = item % tok_count;
            float s = 0.0f;
            if (tok < m) {
                const float4 v = *reinterpret_cast<const float4*>(x + (long long)tok * k +
                                                                  (long long)(c0 + gl) * GROUP_SIZE + 4 * lane);
                s = (v.x + v.y) + (v.z + v.w);
            }
            s = warp_sum(s);
            if (lane == 0) xhalf[item] = 0.5f * s;
        }
    }
}

// One unit: NB groups of the tile, each accumulated in a fresh C, scaled by d into acc.
template <int BITS, int NT, int COLS, int NB>
__device__ __forceinline__ void tc_unit(float (&acc)[NT][4], const TcUnit<BITS, NB>& r, const uint4* bs,
                                        const float* xhalf, int gl0, int n_tiles, int tok_count, int g, int t) {
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
    for (int gi = 0; gi < NB; ++gi) {
        float c[NT][4];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) c[nt][0] = c[nt][1] = c[nt][2] = c[nt][3] = 0.0f;
#pragma unroll
        for (int i = 0; i < TC_QUADS; ++i) {
            uint4 b[NT];
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
                b[nt] = (nt < n_tiles && g < COLS) ? bs[tc_b_index<COLS>(gl0 + gi, nt, i, g, t, n_tiles)] : zero;
#pragma unroll
            for (int ss = 0; ss < 2; ++ss) {
                const int q = 2 * (2 * i + ss);  // pair of half 0 of step 2i + ss; half 1 is q + 1
#pragma unroll
                for (int p = 0; p < BITS; ++p) {
                    const u32 mag = (BITS == 2 && p == 0) ? TC_PM_HALF : TC_PM_ONE;
                    const u32 w0 = r.w[0][gi * BITS + p], w1 = r.w[1][gi * BITS + p];
                    const u32 a[4] = {tc_pair(w0, q, mag), tc_pair(w1, q, mag), tc_pair(w0, q + 1, mag),
                                      tc_pair(w1, q + 1, mag)};
#pragma unroll
                    for (int nt = 0; nt < NT; ++nt)
                        if (nt < n_tiles)
                            mma_bf16_16x8x16(c[nt], a, ss ? b[nt].z : b[nt].x, ss ? b[nt].w : b[nt].y);
                }
            }
        }
        const float d0 = tc_scale(r, 0, gi), d1 = tc_scale(r, 1, gi);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
            if (nt >= n_tiles) continue;
            if (BITS == 2) {
                // Lane 0 holds column 0 (token 2 nt, part hi), lane 1 column 3 (token 2 nt + 1).
                const int tok = 2 * nt + t;
                const float off = (t < COLS / 3 && tok < tok_count) ? xhalf[(gl0 + gi) * tok_count + tok] : 0.0f;
                const float o0 = t == 0 ? off : 0.0f, o1 = t == 1 ? off : 0.0f;
                c[nt][0] += o0; c[nt][2] += o0;
                c[nt][1] += o1; c[nt][3] += o1;
            }
            acc[nt][0] = fmaf(d0, c[nt][0], acc[nt][0]);
            acc[nt][1] = fmaf(d0, c[nt][1], acc[nt][1]);
            acc[nt][2] = fmaf(d1, c[nt][2], acc[nt][2]);
            acc[nt][3] = fmaf(d1, c[nt][3], acc[nt][3]);
        }
    }
}

// Units prefetched in registers beyond the one being computed (Q2 units are twice as large).
#define TC_AHEAD(BITS) ((BITS) == 1 ? 2 : 1)

template <int BITS, int MODE, int NT, int COLS, int NB>
__device__ __forceinline__ void gemv_tc_body(const u16* __restrict__ scales, const u32* __restrict__ payload,
                                             const float* __restrict__ x, int m, float* __restrict__ y,
                                             int n_out, int k, int tiles_per_cta, int splits, int chunk_groups) {
    constexpr int AHEAD = TC_AHEAD(BITS);
    extern __shared__ uint4 tc_smem[];
    const int groups_per_row = k / GROUP_SIZE;
    const int units = groups_per_row / NB;
    const int n_tiles = NT == 1 ? 1 : (m + 1) / 2;
    const int tok_count = COLS == 3 ? 1 : 2 * n_tiles;
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const int g = lane / 4, t = lane % 4;
    const int tile_local = warp / splits, split = warp % splits;
    const int tile = blockIdx.x * tiles_per_cta + tile_local;
    uint4* bs = tc_smem;
    float* xhalf = reinterpret_cast<float*>(tc_smem + chunk_groups * n_tiles * TC_QUADS * COLS * LAYOUT_LANES);
    float* partial = xhalf + chunk_groups * tok_count;

    const int row0 = tc_weight_row<MODE>(tile, g, n_out), row1 = tc_weight_row<MODE>(tile, g + 8, n_out);
    const u32* const rows[2] = {layout_row<BITS>(payload, row0, groups_per_row) + t * NB * BITS,
                                layout_row<BITS>(payload, row1, groups_per_row) + t * NB * BITS};
    const u16* const srows[2] = {scales + (long long)row0 * groups_per_row, scales + (long long)row1 * groups_per_row};

    float acc[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.0f;
    TcUnit<BITS, NB> ring[AHEAD + 1];
#pragma unroll
    for (int a = 0; a <= AHEAD; ++a) tc_load(ring[a], rows, srows, split + a * splits, units);

    int u = split;
    for (int c0 = 0; c0 < groups_per_row; c0 += chunk_groups) {
        const int cg = min(chunk_groups, groups_per_row - c0);
        __syncthreads();  // the previous chunk's fragments are consumed
        tc_stage<BITS, COLS>(x, m, k, c0, cg, n_tiles, tok_count, bs, xhalf);
        __syncthreads();
        const int u_end = (c0 + cg) / NB;
#pragma unroll 1
        for (; u < u_end; u += splits) {
            tc_unit<BITS, NT, COLS, NB>(acc, ring[0], bs, xhalf, u * NB - c0, n_tiles, tok_count, g, t);
#pragma unroll
            for (int a = 0; a < AHEAD; ++a) ring[a] = ring[a + 1];
            tc_load(ring[AHEAD], rows, srows, u + (AHEAD + 1) * splits, units);
        }
    }

    // Each token's three part columns: column 2t + e of the quad holds token (2t + e) / 3.
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
        if (nt >= n_tiles) continue;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float v[2] = {0.0f, 0.0f};
#pragma unroll
            for (int e = 0; e < 2; ++e)
                if (2 * t + e < COLS) v[(2 * t + e) / 3] += acc[nt][2 * h + e];
#pragma unroll
            for (int tt = 0; tt < 2; ++tt) {
                v[tt] += __shfl_xor_sync(FULL_MASK, v[tt], 1);
                v[tt] += __shfl_xor_sync(FULL_MASK, v[tt], 2);
            }
            if (t == 0) {
#pragma unroll
                for (int tt = 0; tt < COLS / 3; ++tt)
                    partial[(warp * TC_TILE_ROWS + g + 8 * h) * (2 * NT) + 2 * nt + tt] = v[tt];
            }
        }
    }
    __syncthreads();

    // Epilogue: one thread per (token, tile, output); the splits' partials added in split order.
    const int outs = MODE == MATMUL_SWIGLU ? TC_TILE_ROWS / 2 : TC_TILE_ROWS;
    for (int i = threadIdx.x; i < m * tiles_per_cta * outs; i += blockDim.x) {
        const int tok = i / (tiles_per_cta * outs), tl = (i / outs) % tiles_per_cta, r = i % outs;
        const int o = (blockIdx.x * tiles_per_cta + tl) * outs + r;
        if (o >= n_out) continue;
        float v = 0.0f, up = 0.0f;
        for (int s = 0; s < splits; ++s) {
            const float* pr = partial + ((tl * splits + s) * TC_TILE_ROWS) * (2 * NT) + tok;
            v += pr[r * (2 * NT)];
            if (MODE == MATMUL_SWIGLU) up += pr[(r + TC_TILE_ROWS / 2) * (2 * NT)];
        }
        float* dst = y + (long long)tok * n_out + o;
        if (MODE == MATMUL_SWIGLU) *dst = silu_mul(v, up);
        else if (MODE == MATMUL_ADD) *dst += v;
        else *dst = v;
    }
}

// NT n-tiles of 2 tokens (COLS = 6), or one token (NT = 1, COLS = 3). The layout's block size
// (4 groups, or 1 when K % 512 != 0) picks the unit.
template <int BITS, int MODE, int NT, int COLS>
__device__ __forceinline__ void gemv_tc(const u16* scales, const u32* payload, const float* x, int m, float* y,
                                        int n_out, int k, int tiles_per_cta, int splits, int chunk_groups) {
    if (layout_block_groups(k / GROUP_SIZE) == LAYOUT_BLOCK_GROUPS)
        gemv_tc_body<BITS, MODE, NT, COLS, LAYOUT_BLOCK_GROUPS>(scales, payload, x, m, y, n_out, k, tiles_per_cta,
                                                                splits, chunk_groups);
    else
        gemv_tc_body<BITS, MODE, NT, COLS, 1>(scales, payload, x, m, y, n_out, k, tiles_per_cta, splits,
                                              chunk_groups);
}

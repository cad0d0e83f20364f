// f32-accurate GEMM machinery on tensor cores ("3xTF32"), shared by gemm_f32.cu and conv3x3.cu:
// `out[M, N] = A[M, K] · B[K, N] (+ bias)` where A is always K-contiguous rows (a Linear's
// activations, a conv's filters) and B comes from a loader policy (a weight matrix W[N, K], or
// an image gathered im2col-style on the fly). Templates only; entry points live in the op files.
//
// Split: every f32 operand x becomes big = tf32(x) and small = tf32(x - big) (both rounded to
// nearest; the subtraction is exact); each product a·w is computed as a_small·w_big +
// a_big·w_small + a_big·w_big by three mma.sync m16n8k8 tf32 into a partial spanning
// TF32X3_FOLD_STEPS k8 steps (small terms first), which an f32 add (round to nearest) folds into
// the accumulator: the tensor core truncates when it accumulates. The dropped
// a_small·w_small and the rounding of the small parts leave <= 3·2^-22·|a·w| per product
// (derivation and the full error bound: ops/gemm_f32/mod.rs).
//
// Geometry: CTA tile 128 (M) x 128 (N) x 32 (K), 8 warps as 2 (M) x 4 (N), warp tile 64 x 32
// = 4 m16 tiles x 4 n8 tiles; a 3-stage cp.async ring (one barrier per K step); fragments of
// [rows][32] tiles come from shared memory by ldmatrix (an 8x8 b16 matrix is 8 rows x 4 f32,
// exactly the m16n8k8 tf32 fragment), rows XOR-swizzled in 16-byte chunks so every ldmatrix
// phase and every 16-byte cp.async hits 8 distinct bank groups. The split happens in registers
// right after each fragment load. CTAs are rasterised in groups of TF32X3_GROUP_M row tiles so a
// wave of CTAs shares its A and B tiles through L2.
#define TF32X3_TILE_M 128
#define TF32X3_TILE_N 128
#define TF32X3_TILE_K 32
#define TF32X3_STAGES 3
#define TF32X3_THREADS 256
#define TF32X3_WARPS_N 4
#define TF32X3_WARP_M 64
#define TF32X3_WARP_N 32
#define TF32X3_MI (TF32X3_WARP_M / 16)
#define TF32X3_NI (TF32X3_WARP_N / 8)
#define TF32X3_GROUP_M 8
// k8 steps summed in one partial before the f32 fold into the accumulator.
#define TF32X3_FOLD_STEPS 2
// Floats of one [128][32] operand tile.
#define TF32X3_ROWS_TILE_FLOATS (TF32X3_TILE_M * TF32X3_TILE_K)

// Offset of element (row, k) in a [rows][32] tile: the 16-byte chunk k/4 is XORed with row % 8.
__device__ __forceinline__ int tf32x3_swizzle(int row, int k) {
    return row * TF32X3_TILE_K + ((((k >> 2) ^ (row & 7)) << 2) | (k & 3));
}

// Columns col and col + 1 of one output row: + bias[col], bias[col + 1] (bias may be null), one
// float2 store when `pairs` (n even, so an even col is 8-byte aligned), else scalars; col + 1
// past n is dropped. Both epilogues' (the mma.sync one adds conv3x3's per-row bias first).
__device__ __forceinline__ void tf32x3_store_pair(float* dst_row, int col, int n, float v0, float v1,
                                                  const float* __restrict__ bias, bool pairs) {
    if (bias != nullptr) {
        v0 += bias[col];
        if (col + 1 < n) v1 += bias[col + 1];
    }
    if (pairs) {
        float2 pair;
        pair.x = v0;
        pair.y = v1;
        *reinterpret_cast<float2*>(dst_row + col) = pair;
    } else {
        dst_row[col] = v0;
        if (col + 1 < n) dst_row[col + 1] = v1;
    }
}

// Split-K merges (conv3x3_split_merge, gemm_f32_split_merge): element i of the sum of `splits`
// partial arrays of `total` elements each, added in split order (the same bits every run).
__device__ __forceinline__ float4 tf32x3_sum_splits4(const float4* __restrict__ p4, long long i, long long total4,
                                                     int splits) {
    float4 acc = p4[i];
    for (int s = 1; s < splits; ++s) {
        const float4 v = p4[s * total4 + i];
        acc.x += v.x;
        acc.y += v.y;
        acc.z += v.z;
        acc.w += v.w;
    }
    return acc;
}
__device__ __forceinline__ float tf32x3_sum_splits(const float* __restrict__ p, long long i, long long total,
                                                   int splits) {
    float acc = p[i];
    for (int s = 1; s < splits; ++s) acc += p[s * total + i];
    return acc;
}

// The whole merge of a [rows, cols] output: out = ((partial[0] + partial[1]) + ...) + bias, the
// bias per row (BIAS_PER_ROW: conv3x3, a channel of `cols` pixels) or per column (gemm_f32, an
// output feature); bias may be null. Grid-stride over float4s when cols % 4 == 0 and both
// pointers are 16-byte aligned (a float4 then stays in one row), else scalars.
template <bool BIAS_PER_ROW>
__device__ __forceinline__ void tf32x3_merge_splits(const float* __restrict__ partial, const float* __restrict__ bias,
                                                    float* __restrict__ out, int rows, int cols, int splits) {
    const long long total = (long long)rows * cols;
    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    const bool vec4 = (cols & 3) == 0 && ((reinterpret_cast<unsigned long long>(partial) |
                                           reinterpret_cast<unsigned long long>(out)) & 15) == 0;
    if (vec4) {
        const float4* p4 = reinterpret_cast<const float4*>(partial);
        float4* o4 = reinterpret_cast<float4*>(out);
        for (long long i = first; i < total / 4; i += stride) {
            float4 acc = tf32x3_sum_splits4(p4, i, total / 4, splits);
            if (BIAS_PER_ROW && bias != nullptr) {
                const float b = bias[(4 * i) / cols];
                acc = make_float4(acc.x + b, acc.y + b, acc.z + b, acc.w + b);
            } else if (bias != nullptr) {  // bias may be only 4-byte aligned: scalar loads
                const float* b = bias + (4 * i) % cols;
                acc.x += b[0];
                acc.y += b[1];
                acc.z += b[2];
                acc.w += b[3];
            }
            o4[i] = acc;
        }
    } else {
        for (long long i = first; i < total; i += stride) {
            const float acc = tf32x3_sum_splits(partial, i, total, splits);
            out[i] = bias == nullptr ? acc : acc + bias[BIAS_PER_ROW ? i / cols : i % cols];
        }
    }
}

// Copies [128][32] tiles of a row-major [rows_total, k_total] matrix (rows row0.., columns k0..)
// into shared memory; elements outside the matrix become 0. VEC16: one 16-byte cp.async per 4
// columns (k_total % 4 == 0 and a 16-byte aligned matrix, checked by the launcher); otherwise one
// 4-byte cp.async per element. Thread-invariant addressing is computed once (CTA prologue): each
// thread keeps one pointer and a bit per row it copies, so a K step costs only the copies.
template <bool VEC16>
struct Tf32x3Rows {
    // Columns per copy, copies per row, rows one pass of the CTA covers, passes per tile.
    static constexpr int COLS = VEC16 ? 4 : 1;
    static constexpr int PER_ROW = TF32X3_TILE_K / COLS;
    static constexpr int ROWS_PER_PASS = TF32X3_THREADS / PER_ROW;
    static constexpr int PASSES = TF32X3_TILE_M / ROWS_PER_PASS;
    const float* first;  // element (this thread's first row, its column) of the matrix
    const float* fallback;  // a mappable address for the zero-filling copies
    long long pass_stride;  // elements between this thread's rows in consecutive passes
    int col;             // this thread's column inside the K tile
    int dst;             // its first element in the tile (swizzled; later passes add whole rows)
    int k_total;
    u32 row_ok;          // bit j: the row of pass j is inside the matrix

    __device__ __forceinline__ Tf32x3Rows(const float* src, int rows_total, int row0, int k_cols) {
        const int r = threadIdx.x / PER_ROW;
        col = (threadIdx.x % PER_ROW) * COLS;
        k_total = k_cols;
        pass_stride = (long long)ROWS_PER_PASS * k_cols;
        first = src + (long long)(row0 + r) * k_cols + col;
        fallback = src;
        dst = tf32x3_swizzle(r, col);  // row + ROWS_PER_PASS keeps row % 8: same swizzle
        row_ok = 0;
#pragma unroll
        for (int j = 0; j < PASSES; ++j)
            if (row0 + r + j * ROWS_PER_PASS < rows_total) row_ok |= 1u << j;
    }
    __device__ __forceinline__ void load(float* tile, int k0) const {
        const bool col_ok = k0 + col < k_total;
        const float* src = first + k0;
#pragma unroll
        for (int j = 0; j < PASSES; ++j) {
            const bool valid = col_ok && ((row_ok >> j) & 1u);
            float* d = tile + dst + j * ROWS_PER_PASS * TF32X3_TILE_K;
            if (VEC16) {
                cp_async16_zfill(d, valid ? src + j * pass_stride : fallback, valid);
            } else if (valid) {
                cp_async4(d, src + j * pass_stride);
            } else {
                *d = 0.0f;
            }
        }
    }
};

// The m16 x k8 A fragment at tile rows r0.. (r0 % 8 == 0), k8 slice ks, by one ldmatrix.x4:
// matrices (rows +0, k +0), (rows +8, k +0), (rows +0, k +4), (rows +8, k +4) = a[0..3].
__device__ __forceinline__ void tf32x3_fragment_a(u32* a, const float* tile, int r0, int ks, int lane) {
    const int r = r0 + (lane & 7) + ((lane >> 3) & 1) * 8;
    const int k = ks * 8 + (lane >> 4) * 4;
    ldmatrix_x4(a, tile + tf32x3_swizzle(r, k));
}

// B fragments (b0, b1) of the two n8 tiles at tile rows n0.. and n0 + 8.. of a [N][32] tile, by
// one ldmatrix.x4: matrices (n +0, k +0), (n +0, k +4), (n +8, k +0), (n +8, k +4).
__device__ __forceinline__ void tf32x3_fragment_b_pair(u32 (*b)[2], const float* tile, int n0, int ks, int lane) {
    const int r = n0 + (lane & 7) + (lane >> 4) * 8;
    const int k = ks * 8 + ((lane >> 3) & 1) * 4;
    u32 q[4];
    ldmatrix_x4(q, tile + tf32x3_swizzle(r, k));
    b[0][0] = q[0];
    b[0][1] = q[1];
    b[1][0] = q[2];
    b[1][1] = q[3];
}

// x = big + small + residual, both parts tf32 bit patterns rounded to nearest (ties away from
// zero): |x - big| <= 2^-11 |x|, x - big is exact in f32, |residual| <= 2^-22 |x|. Rounding by
// integer add + mask rather than cvt.rna.tf32.f32, which expands to ~5 SASS instructions
// (FSETP, VIADD, LOP3, SEL, ...) against 2, and the split runs for every fragment value. Adding
// half a tf32 ulp to the magnitude bits rounds either sign; a carry moves to the next binade.
// Non-finite x (and |x| within half a tf32 ulp of FLT_MAX) give small = NaN or inf, so the
// output is never a silently finite value.
#define TF32X3_TF32_MASK 0xffffe000u
#define TF32X3_TF32_HALF_ULP 0x00001000u
__device__ __forceinline__ u32 tf32x3_round(u32 bits) { return (bits + TF32X3_TF32_HALF_ULP) & TF32X3_TF32_MASK; }
__device__ __forceinline__ void tf32x3_split(u32 x, u32& big, u32& small) {
    big = tf32x3_round(x);
    small = tf32x3_round(__float_as_uint(__uint_as_float(x) - __uint_as_float(big)));
}

// Which tile this CTA computes: CTAs run in groups of TF32X3_GROUP_M row tiles, column-major
// inside a group, so consecutive CTAs reuse the same B columns and a few A rows from L2.
__device__ __forceinline__ void tf32x3_tile_of_cta(int tiles_m, int tiles_n, int& tile_m, int& tile_n) {
    const int id = blockIdx.x;
    const int per_group = TF32X3_GROUP_M * tiles_n;
    const int group = id / per_group;
    const int first_m = group * TF32X3_GROUP_M;
    const int rows = min(tiles_m - first_m, TF32X3_GROUP_M);
    const int in_group = id - group * per_group;
    tile_m = first_m + in_group % rows;
    tile_n = in_group / rows;
}

// B loader policy (GEMM): W[N, K] K-contiguous, staged exactly like A.
template <bool VEC16>
struct Tf32x3WeightRows {
    static constexpr int STAGE_FLOATS = TF32X3_ROWS_TILE_FLOATS;
    Tf32x3Rows<VEC16> rows;
    __device__ __forceinline__ Tf32x3WeightRows(const float* w, int n, int n0, int k) : rows(w, n, n0, k) {}
    __device__ __forceinline__ void load(float* tile, int k0) const { rows.load(tile, k0); }
    // b[j] = (b0, b1) of n8 tile j of the warp's columns wn0.. (tile-local).
    __device__ __forceinline__ void fragments(u32 (*b)[2], const float* tile, int wn0, int ks, int lane) const {
#pragma unroll
        for (int j = 0; j < TF32X3_NI; j += 2) tf32x3_fragment_b_pair(b + j, tile, wn0 + 8 * j, ks, lane);
    }
};

// The whole CTA: out[M, N] tile (tile_m, tile_n) of A[M, K] · B, where `bl` was built for
// tile_n and loads B stages by K offset. `bias` (nullable) is per column
// unless BIAS_PER_ROW. `smem`: TF32X3_STAGES x (A tile + BLoader::STAGE_FLOATS) floats.
// Split-K: only K tiles [kt_begin, kt_end) are summed (kt_end < 0: to the last tile).
template <bool A_VEC16, bool BIAS_PER_ROW, class BLoader>
__device__ __forceinline__ void tf32x3_gemm_cta(float* smem, const float* __restrict__ a, const BLoader& bl,
                                                const float* __restrict__ bias, float* __restrict__ out,
                                                int m, int n, int k, int tile_m, int tile_n, int kt_begin = 0,
                                                int kt_end = -1) {
    constexpr int STAGE = TF32X3_ROWS_TILE_FLOATS + BLoader::STAGE_FLOATS;
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const int wm0 = (warp / TF32X3_WARPS_N) * TF32X3_WARP_M, wn0 = (warp % TF32X3_WARPS_N) * TF32X3_WARP_N;
    const int m0 = tile_m * TF32X3_TILE_M, n0 = tile_n * TF32X3_TILE_N;
    const int all_tiles = (k + TF32X3_TILE_K - 1) / TF32X3_TILE_K;
    const int k_tiles = (kt_end < 0 || kt_end > all_tiles ? all_tiles : kt_end) - kt_begin;
    const int k_first = kt_begin * TF32X3_TILE_K;
    const Tf32x3Rows<A_VEC16> a_rows(a, m, m0, k);

    float acc[TF32X3_MI][TF32X3_NI][4];
    zero_fill(acc);

    // Prologue: K tiles 0..STAGES-2 in flight, one commit group each (empty groups keep the count).
#pragma unroll
    for (int s = 0; s < TF32X3_STAGES - 1; ++s) {
        if (s < k_tiles) {
            float* st = smem + s * STAGE;
            a_rows.load(st, k_first + s * TF32X3_TILE_K);
            bl.load(st + TF32X3_ROWS_TILE_FLOATS, k_first + s * TF32X3_TILE_K);
        }
        cp_async_commit();
    }

    for (int kt = 0; kt < k_tiles; ++kt) {
        // Tile kt has landed (at most STAGES-2 younger groups pending) and, after the barrier,
        // every warp is done with the stage of tile kt-1, which tile kt+STAGES-1 now overwrites.
        cp_async_wait<TF32X3_STAGES - 2>();
        __syncthreads();
        const int next = kt + TF32X3_STAGES - 1;
        if (next < k_tiles) {
            float* st = smem + (next % TF32X3_STAGES) * STAGE;
            a_rows.load(st, k_first + next * TF32X3_TILE_K);
            bl.load(st + TF32X3_ROWS_TILE_FLOATS, k_first + next * TF32X3_TILE_K);
        }
        cp_async_commit();

        const float* a_tile = smem + (kt % TF32X3_STAGES) * STAGE;
        const float* b_tile = a_tile + TF32X3_ROWS_TILE_FLOATS;
#pragma unroll
        for (int k0 = 0; k0 < TF32X3_TILE_K / 8; k0 += TF32X3_FOLD_STEPS) {
            u32 b_big[TF32X3_FOLD_STEPS][TF32X3_NI][2], b_small[TF32X3_FOLD_STEPS][TF32X3_NI][2];
#pragma unroll
            for (int f = 0; f < TF32X3_FOLD_STEPS; ++f) {
                u32 b_raw[TF32X3_NI][2];
                bl.fragments(b_raw, b_tile, wn0, k0 + f, lane);
#pragma unroll
                for (int j = 0; j < TF32X3_NI; ++j) {
                    tf32x3_split(b_raw[j][0], b_big[f][j][0], b_small[f][j][0]);
                    tf32x3_split(b_raw[j][1], b_big[f][j][1], b_small[f][j][1]);
                }
            }
#pragma unroll
            for (int i = 0; i < TF32X3_MI; ++i) {
                u32 a_big[TF32X3_FOLD_STEPS][4], a_small[TF32X3_FOLD_STEPS][4];
#pragma unroll
                for (int f = 0; f < TF32X3_FOLD_STEPS; ++f) {
                    u32 a_raw[4];
                    tf32x3_fragment_a(a_raw, a_tile, wm0 + 16 * i, k0 + f, lane);
#pragma unroll
                    for (int e = 0; e < 4; ++e) tf32x3_split(a_raw[e], a_big[f][e], a_small[f][e]);
                }
                // The k8 steps' products go into a fresh partial (small terms first), which is
                // then added to the accumulator in f32 with round-to-nearest: the tensor core
                // truncates when it accumulates, and a long truncating chain drifts.
#pragma unroll
                for (int j = 0; j < TF32X3_NI; ++j) {
                    float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
                    for (int f = 0; f < TF32X3_FOLD_STEPS; ++f) {
                        mma_tf32_16x8x8(part, a_small[f], b_big[f][j][0], b_big[f][j][1]);
                        mma_tf32_16x8x8(part, a_big[f], b_small[f][j][0], b_small[f][j][1]);
                        mma_tf32_16x8x8(part, a_big[f], b_big[f][j][0], b_big[f][j][1]);
                    }
#pragma unroll
                    for (int e = 0; e < 4; ++e) acc[i][j][e] += part[e];
                }
            }
        }
    }
    cp_async_wait<0>();  // nothing may be in flight into shared memory when the CTA exits

    // Epilogue: acc[i][j] = rows (g, g + 8) x columns (2t, 2t + 1) of the m16 x n8 tile.
    const int g = lane / 4, t = lane % 4;
    const bool pairs = (n % 2) == 0;  // then (row * n + even col) is even: 8-byte aligned stores
#pragma unroll
    for (int i = 0; i < TF32X3_MI; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = m0 + wm0 + 16 * i + g + 8 * h;
            if (row >= m) continue;
            const float row_bias = (BIAS_PER_ROW && bias != nullptr) ? bias[row] : 0.0f;
            float* dst_row = out + (long long)row * n;
#pragma unroll
            for (int j = 0; j < TF32X3_NI; ++j) {
                const int col = n0 + wn0 + 8 * j + 2 * t;
                if (col >= n) continue;
                float v0 = acc[i][j][2 * h], v1 = acc[i][j][2 * h + 1];
                if (BIAS_PER_ROW) {
                    v0 += row_bias;
                    v1 += row_bias;
                }
                tf32x3_store_pair(dst_row, col, n, v0, v1, BIAS_PER_ROW ? nullptr : bias, pairs);
            }
        }
}

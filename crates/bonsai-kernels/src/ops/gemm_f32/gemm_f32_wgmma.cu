// gemm_f32 on Hopper's warpgroup MMA (wgmma, sm_90a): `out[M, N] = A[M, K] · W[N, K]^T (+ bias[N])`,
// 3xTF32 with both operands read by the tensor cores from shared memory (launcher:
// ops/gemm_f32/cuda_wgmma.rs; error bound: ops/gemm_f32/mod.rs).
//
// 1. `gemm_f32_tf32_split` (once over A, once over W): big = tf32(x), small = tf32(x - big), both
//    rounded to nearest (ties away; tile_3xtf32.cu's tf32x3_split, the bound's split), stored as
//    f32 bit patterns in [rows][K_pad] arrays, K_pad = K rounded up to whole 32-wide K tiles and
//    zero-filled past K. So the GEMM needs no K bound, no alignment case and no split of its own.
// 2. `gemm_f32_3xtf32_wgmma` (gemm_f32_wgmma_cta): CTA tile 128 (M) x 128 (N) x 32 (K), 2 warpgroups (256 threads),
//    warpgroup w owning output rows 64 w .. 64 w + 63 and all 128 columns (one m64n128 f32
//    accumulator set, 64 registers per thread, plus the partial's 64). A GW_STAGES-deep cp.async
//    ring of stages of 4 operand tiles (A_big, A_small, W_big, W_small; [128 rows][32 k] f32 each,
//    16-byte chunk c of row r at chunk position c ^ (r % 8): the wgmma 128-byte swizzle), one CTA
//    barrier per K tile. Per K tile each warpgroup issues, for each k8 step, a_small·w_big,
//    a_big·w_small, a_big·w_big (small terms first) into a partial that its first wgmma
//    overwrites (scale-d = 0), waits for them, and folds the partial into the accumulator with
//    f32 adds (round to nearest): the tensor core truncates when it accumulates, so the long sum
//    stays out of it. Rows past M and columns past N are zero-filled by the copies and never
//    stored.
#define GW_TILE_M 128
#define GW_TILE_N 128
#define GW_TILE_K 32
#define GW_STAGES 3
#define GW_WARPGROUPS 2
#define GW_THREADS (128 * GW_WARPGROUPS)
// k8 steps per partial before its fold: a whole K tile (the bound in mod.rs counts 3 · GW_FOLD_STEPS
// tensor-core steps per partial and one fold per GW_FOLD_STEPS k8 steps).
#define GW_FOLD_STEPS 4
#define GW_K8_PER_TILE (GW_TILE_K / 8)
// One [128][32] f32 operand tile, a ring stage of 4 of them, the swizzle's alignment.
#define GW_OPERAND_TILE_BYTES (GW_TILE_M * GW_TILE_K * 4)
#define GW_STAGE_BYTES (4 * GW_OPERAND_TILE_BYTES)
#define GW_ALIGN 1024
// Rows a warpgroup's wgmma covers and the bytes of them in an operand tile.
#define GW_WG_ROWS 64
#define GW_WG_ROW_BYTES (GW_WG_ROWS * GW_TILE_K * 4)
// Accumulators per thread of one m64n128 f32 set.
#define GW_ACC 64
// Threads per split-pass CTA.
#define GW_SPLIT_THREADS 256

static_assert(GW_K8_PER_TILE % GW_FOLD_STEPS == 0, "a fold period must divide a K tile");
static_assert(GW_TILE_M == GW_TILE_N, "the A and W tiles share one copy pattern");

// big / small parts of src[rows][k] into big / small [rows][k_padded] (zeros past k). Grid: x
// covers k_padded / 4 column quads, y row CTAs (looping over rows). `vec4`: k % 4 == 0 and src
// 16-byte aligned (float4 loads); otherwise scalar loads.
extern "C" __global__ void __launch_bounds__(GW_SPLIT_THREADS) gemm_f32_tf32_split(const float* __restrict__ src,
                                                                                  int rows, int k, int k_padded,
                                                                                  int vec4, u32* __restrict__ big,
                                                                                  u32* __restrict__ small) {
    griddep_wait();
    griddep_launch_dependents();
    const int c = (blockIdx.x * GW_SPLIT_THREADS + threadIdx.x) * 4;
    if (c >= k_padded) return;
    for (int row = blockIdx.y; row < rows; row += gridDim.y) {
        const float* s = src + (long long)row * k + c;
        u32 x[4];
        if (vec4 && c < k) {
            const float4 v = *reinterpret_cast<const float4*>(s);
            x[0] = __float_as_uint(v.x);
            x[1] = __float_as_uint(v.y);
            x[2] = __float_as_uint(v.z);
            x[3] = __float_as_uint(v.w);
        } else {
#pragma unroll
            for (int e = 0; e < 4; ++e) x[e] = c + e < k ? __float_as_uint(s[e]) : 0u;
        }
        uint4 b, sm;
        tf32x3_split(x[0], b.x, sm.x);
        tf32x3_split(x[1], b.y, sm.y);
        tf32x3_split(x[2], b.z, sm.z);
        tf32x3_split(x[3], b.w, sm.w);
        const long long at = (long long)row * k_padded + c;
        *reinterpret_cast<uint4*>(big + at) = b;
        *reinterpret_cast<uint4*>(small + at) = sm;
    }
}

// This thread's share of filling one ring stage: rows tid / 8 + 32 j (j = 0..3) of every operand
// tile, 16-byte chunk tid % 8 (row + 32 j keeps row % 8, so one swizzled offset serves all j).
struct GwStageCopies {
    static constexpr int CHUNKS_PER_ROW = GW_TILE_K / 4;
    static constexpr int ROWS_PER_PASS = GW_THREADS / CHUNKS_PER_ROW;
    static constexpr int PASSES = GW_TILE_M / ROWS_PER_PASS;
    u32 dst;                 // byte offset of the first chunk in a tile (swizzled)
    long long a_first, w_first;  // element offsets of it in the split A / W (K tile 0)
    long long pass_stride;   // elements between consecutive passes' rows
    u32 a_rows_ok, w_rows_ok;  // bit j: the row of pass j is inside A / W

    __device__ __forceinline__ GwStageCopies(int m0, int m, int n0, int n, int k_padded) {
        const int r = threadIdx.x / CHUNKS_PER_ROW, c = threadIdx.x % CHUNKS_PER_ROW;
        dst = (u32)(r * GW_TILE_K * 4 + ((c ^ (r & 7)) * 16));
        a_first = (long long)(m0 + r) * k_padded + c * 4;
        w_first = (long long)(n0 + r) * k_padded + c * 4;
        pass_stride = (long long)ROWS_PER_PASS * k_padded;
        a_rows_ok = w_rows_ok = 0;
#pragma unroll
        for (int j = 0; j < PASSES; ++j) {
            if (m0 + r + j * ROWS_PER_PASS < m) a_rows_ok |= 1u << j;
            if (n0 + r + j * ROWS_PER_PASS < n) w_rows_ok |= 1u << j;
        }
    }
};

// The GEMM CTA: per K tile, barrier, the tile's 12 wgmma into the partial, wait, fold; the ring
// keeps GW_STAGES - 1 tiles ahead. The tensor cores idle from a warpgroup's last wgmma of a tile
// to its first of the next (wait, fold, barrier). A loop with two partials that folded one tile
// while the next one's wgmmas ran (one tile of copies ahead) measured slower (docs/kernel-notes.md,
// "gemm_f32 3xTF32 / wgmma and conv3x3", the overlapped wgmma loop).
__device__ __forceinline__ void gemm_f32_wgmma_cta(const u32* __restrict__ a_big, const u32* __restrict__ a_small,
                                                   const u32* __restrict__ w_big, const u32* __restrict__ w_small,
                                                   const float* __restrict__ bias, float* __restrict__ out, int m,
                                                   int n, int k_padded, int splits) {
    extern __shared__ float4 gw_smem_raw[];
    // The dynamic window is only 16-byte aligned by contract: round up (the launcher adds GW_ALIGN).
    unsigned char* smem = reinterpret_cast<unsigned char*>(
        (reinterpret_cast<unsigned long long>(gw_smem_raw) + GW_ALIGN - 1) & ~(unsigned long long)(GW_ALIGN - 1));
    int tile_m, tile_n;
    tf32x3_tile_of_cta((m + GW_TILE_M - 1) / GW_TILE_M, (n + GW_TILE_N - 1) / GW_TILE_N, tile_m, tile_n);
    const int m0 = tile_m * GW_TILE_M, n0 = tile_n * GW_TILE_N;
    // Split K (splits > 1, gridDim.y = splits): CTA row blockIdx.y sums K tiles [k_first, k_last)
    // into out + blockIdx.y·m·n with no bias; gemm_f32_split_merge adds the rows and the bias.
    const int all_k_tiles = k_padded / GW_TILE_K;
    const int per_split = (all_k_tiles + splits - 1) / splits;
    const int k_first = blockIdx.y * per_split;
    const int k_last = min(all_k_tiles, k_first + per_split);
    const int k_tiles = k_last > k_first ? k_last - k_first : 0;
    if (splits > 1) {
        out += (long long)blockIdx.y * m * n;
        bias = nullptr;
    }
    const GwStageCopies cp(m0, m, n0, n, k_padded);

    // Tile kt into ring slot `slot`, one commit group's worth (the caller commits).
    auto load = [&](int kt, int slot) {
        unsigned char* st = smem + slot * GW_STAGE_BYTES + cp.dst;
        const long long k0 = (long long)(k_first + kt) * GW_TILE_K;  // kt counts this split's tiles
#pragma unroll
        for (int j = 0; j < GwStageCopies::PASSES; ++j) {
            const bool a_ok = (cp.a_rows_ok >> j) & 1u, w_ok = (cp.w_rows_ok >> j) & 1u;
            const long long a_at = cp.a_first + j * cp.pass_stride + k0, w_at = cp.w_first + j * cp.pass_stride + k0;
            unsigned char* d = st + j * GwStageCopies::ROWS_PER_PASS * GW_TILE_K * 4;
            cp_async16_zfill(d, a_ok ? a_big + a_at : a_big, a_ok);
            cp_async16_zfill(d + GW_OPERAND_TILE_BYTES, a_ok ? a_small + a_at : a_small, a_ok);
            cp_async16_zfill(d + 2 * GW_OPERAND_TILE_BYTES, w_ok ? w_big + w_at : w_big, w_ok);
            cp_async16_zfill(d + 3 * GW_OPERAND_TILE_BYTES, w_ok ? w_small + w_at : w_small, w_ok);
        }
    };
    const int wg = threadIdx.x / 128;
    // k8 steps f0 .. f0 + GW_FOLD_STEPS - 1 of the tile in ring slot `slot` into `part`, small terms
    // first, the first wgmma overwriting it (scale-d = 0); one commit group.
    auto issue = [&](float* part, int slot, int f0) {
        const unsigned char* st = smem + slot * GW_STAGE_BYTES;
        const unsigned char* a_big_t = st + wg * GW_WG_ROW_BYTES;
        const unsigned char* a_small_t = a_big_t + GW_OPERAND_TILE_BYTES;
        const unsigned char* w_big_t = st + 2 * GW_OPERAND_TILE_BYTES;
        const unsigned char* w_small_t = st + 3 * GW_OPERAND_TILE_BYTES;
        // The last fold read `part`: fence before the wgmmas overwrite it.
        wgmma_fence();
#pragma unroll
        for (int s = f0; s < f0 + GW_FOLD_STEPS; ++s) {
            wgmma_tf32_m64n128k8_ss(part, a_small_t, w_big_t, s, s != f0);
            wgmma_tf32_m64n128k8_ss(part, a_big_t, w_small_t, s, true);
            wgmma_tf32_m64n128k8_ss(part, a_big_t, w_big_t, s, true);
        }
        wgmma_commit();
    };

    float acc[GW_ACC], part0[GW_ACC];
#pragma unroll
    for (int i = 0; i < GW_ACC; ++i) acc[i] = part0[i] = 0.0f;
    auto fold = [&](const float* part) {
#pragma unroll
        for (int i = 0; i < GW_ACC; ++i) acc[i] += part[i];
    };

    // Prologue: K tiles 0 .. STAGES-2 in flight, one commit group each (empty groups keep the
    // count).
#pragma unroll
    for (int s = 0; s < GW_STAGES - 1; ++s) {
        if (s < k_tiles) load(s, s);
        cp_async_commit();
    }
#pragma unroll 1
    for (int kt = 0; kt < k_tiles; ++kt) {
        // Tile kt landed (at most STAGES-2 younger groups pending); the proxy fence makes this
        // thread's copies visible to the tensor cores after the barrier, and after the barrier
        // every warpgroup has waited for its wgmmas on tile kt-1's slot, which is refilled now.
        cp_async_wait<GW_STAGES - 2>();
        fence_proxy_async_smem();
        __syncthreads();
#pragma unroll
        for (int f0 = 0; f0 < GW_K8_PER_TILE; f0 += GW_FOLD_STEPS) {
            issue(part0, kt % GW_STAGES, f0);
            // The copies of tile kt + STAGES - 1 are issued while the tensor cores work.
            if (f0 == 0) {
                const int next = kt + GW_STAGES - 1;
                if (next < k_tiles) load(next, next % GW_STAGES);
                cp_async_commit();
            }
            wgmma_wait<0>();
            fold(part0);
        }
    }
    cp_async_wait<0>();  // nothing may be in flight into shared memory when the CTA exits

    // Epilogue: warp w (16 w .. 16 w + 15 of the CTA's rows: warpgroup w / 4, its warp w % 4);
    // acc[4j + e] = (row g, column 8j + 2t + e), acc[4j + 2 + e] = (row g + 8, same column).
    const int warp = threadIdx.x / WARP_SIZE, lane = threadIdx.x % WARP_SIZE, g = lane / 4, t = lane % 4;
    const bool pairs = (n % 2) == 0;  // then (row * n + even col) is even: 8-byte aligned stores
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int row = m0 + 16 * warp + g + 8 * h;
        if (row >= m) continue;
        float* dst_row = out + (long long)row * n;
#pragma unroll
        for (int j = 0; j < GW_TILE_N / 8; ++j) {
            const int col = n0 + 8 * j + 2 * t;
            if (col >= n) continue;
            tf32x3_store_pair(dst_row, col, n, acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1], bias, pairs);
        }
    }
}

// Griddep first (launch_ex.rs's griddep check reads every entry's body).
extern "C" __global__ void __launch_bounds__(GW_THREADS, 1)
    gemm_f32_3xtf32_wgmma(const u32* __restrict__ a_big, const u32* __restrict__ a_small,
                          const u32* __restrict__ w_big, const u32* __restrict__ w_small,
                          const float* __restrict__ bias, float* __restrict__ out, int m, int n, int k_padded,
                          int splits) {
    griddep_wait();
    griddep_launch_dependents();
    gemm_f32_wgmma_cta(a_big, a_small, w_big, w_small, bias, out, m, n, k_padded, splits);
}

// out[i] = ((partial[0][i] + partial[1][i]) + ...) + bias[i % n]: the K splits in a fixed order
// (the same bits every run; one round-to-nearest add per extra split, counted by the bound).
// `bias` may be null.
extern "C" __global__ void gemm_f32_split_merge(const float* __restrict__ partial, const float* __restrict__ bias,
                                                float* __restrict__ out, int m, int n, int splits) {
    griddep_wait();
    griddep_launch_dependents();
    tf32x3_merge_splits<false>(partial, bias, out, m, n, splits);
}

// Joint (non-causal) attention on tensor cores, FlashAttention-2 style. Contract, layouts and
// the accuracy bound: ops/joint_attention/mod.rs. Launcher: ops/joint_attention/cuda.rs.
//
// This file holds the conversion pass, the helpers the hd 64 / 128 kernels share
// (joint_attention_qreg.cu and joint_attention_wgmma.cu are concatenated after it) and the
// hd 384 / 512 kernels of the VAE mid-block:
// - `joint_attention_to_bf16`: q, k, v f32 [H, seq, hd] -> bf16 copies (round to nearest even),
//   one pass over the three tensors (gridDim.y picks the tensor). Converting once here, rather
//   than per CTA while staging, halves the K/V bytes every CTA streams and lets cp.async copy
//   tiles straight into the layout ldmatrix reads.
// - `joint_attention_hd{384,512}`: grid (ceil(seq / BLOCK_Q), H, hd / DV). One CTA owns
//   BLOCK_Q = 16 x WARPS queries of one head and DV output dims; each warp owns 16 query rows.
//   Keys stream in BLOCK_K-key tiles through a cp.async double buffer (tile t + 1 loads while
//   tile t computes; one barrier per tile). Per tile and warp:
//     S[16 x BLOCK_K] = Q K^T      mma.m16n8k16 bf16, f32 accumulators
//     online softmax in f32        p = exp2(s * c - m * c), c = log2(e) / sqrt(hd), on the
//                                  SFU with subnormal weights (< 2^-126) flushed to zero
//     O[16 x DV] += P V            P rounded to bf16 in registers (the S accumulator layout is
//                                  the A-fragment layout), f32 accumulators
//   The row sum adds the f32 p (not the bf16 ones); each thread keeps a partial sum of its
//   columns and the 4 lanes of a row combine them once at the end.
//   Tail keys (>= seq) are zero-filled by cp.async and their scores set to -inf; tail queries
//   compute on zero rows and are not stored.
//   The output dims are split across CTAs (DV = 128, gridDim.z = hd / 128): a 16-row O block
//   over all 384 / 512 dims would not fit registers. Every CTA computes the full S over all hd
//   (recomputed per chunk) and P V for its chunk only; Q is re-read from shared memory per
//   k-step (its fragments over hd 384 / 512 would not fit registers either).
// - `joint_attention_hd{384,512}_compact`: the same kernel with 2 warps and 16-key tiles, for
//   devices whose CTAs may have 99 KB of shared memory (sm_86, sm_89, sm_120): the default tiles
//   take 117,760 / 150,528 B there, these 58,880 / 75,264 B. More barriers and softmax steps per
//   key; the launcher picks them only where the default does not fit.
//
// Shared memory (dynamic, bf16, rows padded by JA_ROW_PAD elements so the 8 row addresses of an
// ldmatrix fall in 8 different 16-byte bank groups: a row of hd + 8 bf16 is 16 mod 128 bytes):
//   q_s [BLOCK_Q][hd + PAD], k_s [2][BLOCK_K][hd + PAD], v_s [2][BLOCK_K][DV + PAD].
#define JA_ROW_PAD 8
#define JA_LARGE_HD_WARPS 4
#define JA_LARGE_HD_BLOCK_K 32
#define JA_LARGE_HD_CHUNK 128
#define JA_COMPACT_WARPS 2
#define JA_COMPACT_BLOCK_K 16
#define JA_CONVERT_THREADS 256

extern "C" __global__ void __launch_bounds__(JA_CONVERT_THREADS)
    joint_attention_to_bf16(const float* __restrict__ q, const float* __restrict__ k,
                            const float* __restrict__ v, u16* __restrict__ q16,
                            u16* __restrict__ k16, u16* __restrict__ v16, long long n_quads) {
    griddep_wait();
    griddep_launch_dependents();
    const float* src = blockIdx.y == 0 ? q : (blockIdx.y == 1 ? k : v);
    u16* dst = blockIdx.y == 0 ? q16 : (blockIdx.y == 1 ? k16 : v16);
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n_quads; i += stride) {
        const float4 x = reinterpret_cast<const float4*>(src)[i];
        uint2 y;
        y.x = pack_b16(f32_to_bf16_rn(x.x), f32_to_bf16_rn(x.y));
        y.y = pack_b16(f32_to_bf16_rn(x.z), f32_to_bf16_rn(x.w));
        reinterpret_cast<uint2*>(dst)[i] = y;
    }
}

// Copies rows row0..row0+ROWS of a [seq, WIDTH] bf16 matrix, columns col0..col0+COLS, into
// dst[ROWS][COLS + JA_ROW_PAD] with 16-byte cp.async pieces; rows >= seq are zero-filled.
template <int ROWS, int COLS, int WIDTH, int THREADS>
__device__ __forceinline__ void ja_stage_rows(u16* dst, const u16* __restrict__ src, int row0,
                                              int col0, int seq) {
    constexpr int PIECES = COLS / 8;  // 8 bf16 per 16-byte piece
    constexpr int ROUNDS = (ROWS * PIECES + THREADS - 1) / THREADS;
    if constexpr (THREADS % PIECES == 0) {
        // Each thread keeps one column and steps down whole rows: one pointer, constant strides.
        constexpr int ROWS_PER_ROUND = THREADS / PIECES;
        const int r = threadIdx.x / PIECES, c = (threadIdx.x % PIECES) * 8;
        const u16* from = src + (long long)(row0 + r) * WIDTH + col0 + c;
        u16* to = dst + r * (COLS + JA_ROW_PAD) + c;
        if (row0 + ROWS <= seq) {  // every tile but the last: no predicates
#pragma unroll
            for (int round = 0; round < ROUNDS; ++round)
                cp_async16(to + round * ROWS_PER_ROUND * (COLS + JA_ROW_PAD),
                           from + round * ROWS_PER_ROUND * WIDTH);
        } else {
#pragma unroll
            for (int round = 0; round < ROUNDS; ++round) {
                const bool valid = row0 + r + round * ROWS_PER_ROUND < seq;
                // An invalid piece reads nothing, but its address must still be mappable.
                cp_async16_zfill(to + round * ROWS_PER_ROUND * (COLS + JA_ROW_PAD),
                                 valid ? from + round * ROWS_PER_ROUND * WIDTH : src, valid);
            }
        }
    } else {
#pragma unroll
        for (int round = 0; round < ROUNDS; ++round) {
            const int i = round * THREADS + threadIdx.x;
            if ((ROWS * PIECES) % THREADS != 0 && i >= ROWS * PIECES) break;
            const int r = i / PIECES, c = (i % PIECES) * 8;
            const bool valid = row0 + r < seq;
            const u16* from = valid ? src + (long long)(row0 + r) * WIDTH + col0 + c : src;
            cp_async16_zfill(dst + r * (COLS + JA_ROW_PAD) + c, from, valid);
        }
    }
}

// Two f32 -> one register of two bf16, `lo` in the low half (the lower column of a fragment).
__device__ __forceinline__ u32 ja_pack_bf16(float lo, float hi) {
    return pack_b16(f32_to_bf16_rn(lo), f32_to_bf16_rn(hi));
}

// Keys past seq in one S block (S_BLOCKS column blocks of 8 keys from key0, the m16n8 C layout:
// element e of block j is key 8j + 2t + (e & 1)) get -inf: zero-filled keys must get no weight.
template <int S_BLOCKS>
__device__ __forceinline__ void ja_mask_tail(float (&s)[S_BLOCKS][4], int key0, int seq, int t) {
#pragma unroll
    for (int j = 0; j < S_BLOCKS; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e)
            if (key0 + 8 * j + 2 * t + (e & 1) >= seq) s[j][e] = neg_inf();
}

// The weights of S block j (keys 8j..8j+7) rounded to bf16 into the A-fragment layout of
// O += P V: the low (j even) or high (j odd) half of P's k-step j / 2.
template <int P_STEPS>
__device__ __forceinline__ void ja_pack_p_block(const float (&s_block)[4], u32 (&p_frag)[P_STEPS][4], int j) {
    p_frag[j / 2][(j % 2) * 2 + 0] = ja_pack_bf16(s_block[0], s_block[1]);
    p_frag[j / 2][(j % 2) * 2 + 1] = ja_pack_bf16(s_block[2], s_block[3]);
}

// Output rows g and g + 8 of a 16-row block (query rows from row0), its 8 O_BLOCKS columns from
// col0 of head `head`: O over the row's total weight (the 4 lanes t of a row group hold its
// partial sums), token-major [seq, heads * HD]. Rows past seq are not stored.
template <int HD, int O_BLOCKS>
__device__ __forceinline__ void ja_store_rows(const float (&o)[O_BLOCKS][4], const float (&row_sum)[2],
                                              float* __restrict__ out, int row0, int head, int col0, int heads,
                                              int seq, int g, int t) {
    const long long out_row = (long long)heads * HD;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const float total = quad_sum(row_sum[r]);
        const int query = row0 + g + 8 * r;
        if (query >= seq) continue;
        float* dst = out + query * out_row + (long long)head * HD + col0 + 2 * t;
#pragma unroll
        for (int j = 0; j < O_BLOCKS; ++j) {
            float2 pair;
            pair.x = o[j][2 * r] / total;
            pair.y = o[j][2 * r + 1] / total;
            *reinterpret_cast<float2*>(dst + 8 * j) = pair;
        }
    }
}

// The signature of every flash entry point of the op: q (QT: bf16 as u16, or f32), bf16 k, v
// [H, seq, hd], f32 out [seq, H * hd], scale_log2 = log2(e) / sqrt(hd).
#define JA_FLASH_PARAMS(QT)                                                                            \
    const QT *__restrict__ q, const u16 *__restrict__ k, const u16 *__restrict__ v, float *__restrict__ out, \
        int heads, int seq, float scale_log2
#define JA_FLASH_ARGS q, k, v, out, heads, seq, scale_log2

template <int HD, int DV, int WARPS, int BLOCK_K>
__device__ __forceinline__ void joint_attention_flash(JA_FLASH_PARAMS(u16)) {
    constexpr int THREADS = WARPS * WARP_SIZE;
    constexpr int BLOCK_Q = WARPS * 16;
    constexpr int QK_STRIDE = HD + JA_ROW_PAD;
    constexpr int V_STRIDE = DV + JA_ROW_PAD;
    constexpr int K_STEPS = HD / 16;        // k-steps of S = Q K^T
    constexpr int S_BLOCKS = BLOCK_K / 8;   // 8-key column blocks of S
    constexpr int P_STEPS = BLOCK_K / 16;   // k-steps of O += P V
    constexpr int O_BLOCKS = DV / 8;        // 8-dim column blocks of O
    static_assert(HD % 16 == 0 && DV % 16 == 0 && BLOCK_K % 16 == 0, "mma tile multiples");
    static_assert(HD > 128, "hd 64 / 128 have their own kernels (joint_attention_qreg.cu, _wgmma.cu)");

    extern __shared__ __align__(16) u16 ja_smem[];
    u16* q_s = ja_smem;
    u16* k_s = q_s + BLOCK_Q * QK_STRIDE;
    u16* v_s = k_s + 2 * BLOCK_K * QK_STRIDE;

    const int lane = threadIdx.x % WARP_SIZE;
    const int warp = threadIdx.x / WARP_SIZE;
    const int g = lane / 4, t = lane % 4;  // fragment row group and column pair (ptx.cuh)
    const int q0 = blockIdx.x * BLOCK_Q;
    const int head = blockIdx.y;
    const int d0 = blockIdx.z * DV;
    const long long head_base = (long long)head * seq * HD;
    const u16* q_head = q + head_base;
    const u16* k_head = k + head_base;
    const u16* v_head = v + head_base;
    const int n_tiles = (seq + BLOCK_K - 1) / BLOCK_K;

    // K and V tile `tile` (V's columns d0..) into buffer b.
    ja_stage_rows<BLOCK_Q, HD, HD, THREADS>(q_s, q_head, q0, 0, seq);
    ja_stage_rows<BLOCK_K, HD, HD, THREADS>(k_s, k_head, 0, 0, seq);
    ja_stage_rows<BLOCK_K, DV, HD, THREADS>(v_s, v_head, 0, d0, seq);
    cp_async_commit();

    int a_offset, k_offset, v_offset;
    flash_ldsm_offsets<QK_STRIDE, V_STRIDE, 16>(a_offset, k_offset, v_offset);

    // Rows g and g + 8 of this warp's 16: running max (raw score units) and this thread's
    // partial sum of exp2 weights over its own columns.
    float o[O_BLOCKS][4], row_max[2], row_sum[2];
    flash_init_rows(o, row_max, row_sum);

    for (int tile = 0; tile < n_tiles; ++tile) {
        const int buf = tile & 1;
        if (flash_tile_ready(tile, n_tiles)) {  // (at tile 0 the barrier also makes Q visible)
            const int next = buf ^ 1;
            ja_stage_rows<BLOCK_K, HD, HD, THREADS>(k_s + next * BLOCK_K * QK_STRIDE, k_head,
                                                    (tile + 1) * BLOCK_K, 0, seq);
            ja_stage_rows<BLOCK_K, DV, HD, THREADS>(v_s + next * BLOCK_K * V_STRIDE, v_head,
                                                    (tile + 1) * BLOCK_K, d0, seq);
            cp_async_commit();
        }

        const u16* k_tile = k_s + buf * BLOCK_K * QK_STRIDE;
        float s[S_BLOCKS][4];
        zero_fill(s);
#pragma unroll
        for (int kk = 0; kk < K_STEPS; ++kk) {
            u32 a[4];
            ldmatrix_x4(a, q_s + a_offset + kk * 16);
#pragma unroll
            for (int pair = 0; pair < S_BLOCKS / 2; ++pair) {
                u32 b[4];
                ldmatrix_x4(b, k_tile + k_offset + pair * 16 * QK_STRIDE + kk * 16);
                mma_bf16_16x8x16(s[2 * pair], a, b[0], b[1]);
                mma_bf16_16x8x16(s[2 * pair + 1], a, b[2], b[3]);
            }
        }

        const int key0 = tile * BLOCK_K;
        if (key0 + BLOCK_K > seq) ja_mask_tail(s, key0, seq, t);  // the tail tile
        float max_scaled[2], correction[2];
        flash_online_max(s, row_max, row_sum, correction, max_scaled, scale_log2);
        u32 p_frag[P_STEPS][4];
#pragma unroll
        for (int j = 0; j < S_BLOCKS; ++j) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                s[j][e] = exp2_ftz(fmaf(s[j][e], scale_log2, -max_scaled[e / 2]));
                row_sum[e / 2] += s[j][e];
            }
            ja_pack_p_block(s[j], p_frag, j);
        }
        // Once the running maxima settle most tiles leave them unchanged: skip the O rescale
        // (exact: the factor is then 1) unless some row of the warp moved.
        flash_rescale_rows(o, correction);

        const u16* v_tile = v_s + buf * BLOCK_K * V_STRIDE;
        flash_mma_bf16<true, V_STRIDE>(o, p_frag, v_tile + v_offset);
    }

    ja_store_rows<HD>(o, row_sum, out, q0 + warp * 16, head, d0, heads, seq, g, t);
}

// One entry point per head_dim; both take bf16 q (JA_FLASH_PARAMS).
extern "C" __global__ void __launch_bounds__(JA_LARGE_HD_WARPS * WARP_SIZE, 1) joint_attention_hd384(JA_FLASH_PARAMS(u16)) {
    griddep_wait();
    griddep_launch_dependents();
    joint_attention_flash<384, JA_LARGE_HD_CHUNK, JA_LARGE_HD_WARPS, JA_LARGE_HD_BLOCK_K>(JA_FLASH_ARGS);
}
extern "C" __global__ void __launch_bounds__(JA_LARGE_HD_WARPS * WARP_SIZE, 1) joint_attention_hd512(JA_FLASH_PARAMS(u16)) {
    griddep_wait();
    griddep_launch_dependents();
    joint_attention_flash<512, JA_LARGE_HD_CHUNK, JA_LARGE_HD_WARPS, JA_LARGE_HD_BLOCK_K>(JA_FLASH_ARGS);
}
extern "C" __global__ void __launch_bounds__(JA_COMPACT_WARPS * WARP_SIZE)
    joint_attention_hd384_compact(JA_FLASH_PARAMS(u16)) {
    griddep_wait();
    griddep_launch_dependents();
    joint_attention_flash<384, JA_LARGE_HD_CHUNK, JA_COMPACT_WARPS, JA_COMPACT_BLOCK_K>(JA_FLASH_ARGS);
}
extern "C" __global__ void __launch_bounds__(JA_COMPACT_WARPS * WARP_SIZE)
    joint_attention_hd512_compact(JA_FLASH_PARAMS(u16)) {
    griddep_wait();
    griddep_launch_dependents();
    joint_attention_flash<512, JA_LARGE_HD_CHUNK, JA_COMPACT_WARPS, JA_COMPACT_BLOCK_K>(JA_FLASH_ARGS);
}

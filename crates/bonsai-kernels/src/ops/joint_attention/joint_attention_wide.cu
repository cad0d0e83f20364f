// Joint attention for hd 64 / 128 with 32 query rows per warp (FlashAttention-2's warp shape).
// Contract and accuracy bound: ops/joint_attention/mod.rs; launcher: ops/joint_attention/cuda.rs.
// Shares ja_stage_rows / ja_pack_bf16 and the bf16 conversion pass with joint_attention.cu
// (concatenated before this file); the per-row arithmetic is identical to
// joint_attention_flash's (same 64-key tiles, same mma k order, same softmax), so the
// accuracy bound and tensor_core_model.rs cover both.
//
// Why 32 rows per warp. The 16-row kernel (joint_attention_hd128) loads every K and V fragment
// from shared memory for one 16-row mma block: per 64-key tile a warp issues 64 ldmatrix.x4
// (32 KB) for 128 HMMA.16816. At 8 warps per SM that is 512 x 512 B = 256 KB of shared reads
// per tile, 2,048 cycles at 128 B/clk, against ~1,536 cycles of mma.sync work (1,024 HMMA at
// ~6 cycles per SM sub-partition, 4 sub-partitions): shared-memory bound, measured 227 TF/s.
// Here each K / V fragment feeds two 16-row blocks (rows 0-15 and 16-31 of the warp):
// per tile and warp 256 HMMA for 80 ldmatrix.x4 (K 32, V 32, Q 16; Q does not fit registers
// next to the 128-float O block, so its A fragments are re-read each tile), i.e. 160 B of
// shared reads per HMMA instead of 256. Per SM (2 CTAs x 4 warps): 640 x 512 B = 2,560 cycles
// of ldmatrix + 512 cycles of cp.async writes, against 2,048 HMMA = 3,072 cycles: the tensor
// pipe, not shared memory, now sets the pace (barely; the Q re-read is the next thing to cut).
//
// CTA: 4 warps x 32 rows = 128 queries of one head (BLOCK_Q), 64-key K/V tiles through a
// cp.async double buffer, one barrier per tile. Shared: q [128][hd + 8], k and v [2][64][hd + 8]
// bf16 = 104,448 B at hd 128, so two CTAs share an SM (8 warps, 255 registers each).
// Registers per thread at hd 128: O 2 x 16 x 4 = 128 f32, S 2 x 8 x 4 = 64 f32 (packed in place
// into 32 bf16x2 P fragments), A 8, B 4, row state 8.
//
// Speed of light (H200, H 24, seq 4608, hd 128: 4·H·seq²·hd = 261 GFLOP): dense bf16 ~990
// TF/s (wgmma) = 264 us; mma.sync reaches ~60-70% of it (~600-690 TF/s). FlashAttention-2
// (this design) typically reaches ~55-60% of the mma.sync rate once softmax, barriers and the
// 3.3-wave tail (864 CTAs on 264 slots) are paid. Prediction: 380-430 TF/s flash-only
// (610-690 us), against 227 TF/s for the 16-row kernel: 1.7-1.9x. Unmeasured when written.
#define JA_WIDE_WARPS 4
#define JA_WIDE_ROW_BLOCKS 2
#define JA_WIDE_BLOCK_K 64

template <int HD, int WARPS, int BLOCK_K>
__device__ __forceinline__ void joint_attention_flash_wide(const u16* __restrict__ q,
                                                           const u16* __restrict__ k,
                                                           const u16* __restrict__ v,
                                                           float* __restrict__ out, int heads,
                                                           int seq, float scale_log2) {
    constexpr int RB = JA_WIDE_ROW_BLOCKS;  // 16-row mma blocks per warp
    constexpr int THREADS = WARPS * WARP_SIZE;
    constexpr int WARP_ROWS = 16 * RB;
    constexpr int BLOCK_Q = WARPS * WARP_ROWS;
    constexpr int STRIDE = HD + JA_ROW_PAD;
    constexpr int K_STEPS = HD / 16;       // k-steps of S = Q K^T
    constexpr int S_BLOCKS = BLOCK_K / 8;  // 8-key column blocks of S
    constexpr int P_STEPS = BLOCK_K / 16;  // k-steps of O += P V
    constexpr int O_BLOCKS = HD / 8;       // 8-dim column blocks of O
    static_assert(HD % 16 == 0 && BLOCK_K % 16 == 0, "mma tile multiples");

    extern __shared__ __align__(16) u16 ja_smem[];
    u16* q_s = ja_smem;
    u16* k_s = q_s + BLOCK_Q * STRIDE;
    u16* v_s = k_s + 2 * BLOCK_K * STRIDE;

    const int lane = threadIdx.x % WARP_SIZE;
    const int warp = threadIdx.x / WARP_SIZE;
    const int g = lane / 4, t = lane % 4;  // fragment row group and column pair (ptx.cuh)
    const int q0 = blockIdx.x * BLOCK_Q;
    const int head = blockIdx.y;
    const long long head_base = (long long)head * seq * HD;
    const u16* q_head = q + head_base;
    const u16* k_head = k + head_base;
    const u16* v_head = v + head_base;
    const int n_tiles = (seq + BLOCK_K - 1) / BLOCK_K;

    ja_stage_rows<BLOCK_Q, HD, HD, THREADS>(q_s, q_head, q0, 0, seq);
    ja_stage_rows<BLOCK_K, HD, HD, THREADS>(k_s, k_head, 0, 0, seq);
    ja_stage_rows<BLOCK_K, HD, HD, THREADS>(v_s, v_head, 0, 0, seq);
    cp_async_commit();

    // Per-lane ldmatrix row offsets (elements), as in joint_attention_flash; row block rb of
    // the A operand adds 16 rb rows.
    const int mat = lane / 8, mat_row = lane % 8;
    const int a_offset = (warp * WARP_ROWS + (mat % 2) * 8 + mat_row) * STRIDE + (mat / 2) * 8;
    const int k_offset = ((mat / 2) * 8 + mat_row) * STRIDE + (mat % 2) * 8;
    const int v_offset = ((mat % 2) * 8 + mat_row) * STRIDE + (mat / 2) * 8;

    float o[RB][O_BLOCKS][4];
#pragma unroll
    for (int rb = 0; rb < RB; ++rb)
#pragma unroll
        for (int j = 0; j < O_BLOCKS; ++j) o[rb][j][0] = o[rb][j][1] = o[rb][j][2] = o[rb][j][3] = 0.0f;
    // Rows g and g + 8 of each row block: running max (raw score units) and this thread's
    // partial sum of exp2 weights over its own columns.
    float row_max[RB][2], row_sum[RB][2];
#pragma unroll
    for (int rb = 0; rb < RB; ++rb) {
        row_max[rb][0] = row_max[rb][1] = neg_inf();
        row_sum[rb][0] = row_sum[rb][1] = 0.0f;
    }

    for (int tile = 0; tile < n_tiles; ++tile) {
        const int buf = tile & 1;
        cp_async_wait<0>();
        // Tile `tile` (and Q) visible to all; every warp is done with tile - 1, whose buffer
        // the next load reuses.
        __syncthreads();
        if (tile + 1 < n_tiles) {
            const int next = buf ^ 1;
            ja_stage_rows<BLOCK_K, HD, HD, THREADS>(k_s + next * BLOCK_K * STRIDE, k_head,
                                                    (tile + 1) * BLOCK_K, 0, seq);
            ja_stage_rows<BLOCK_K, HD, HD, THREADS>(v_s + next * BLOCK_K * STRIDE, v_head,
                                                    (tile + 1) * BLOCK_K, 0, seq);
            cp_async_commit();
        }

        const u16* k_tile = k_s + buf * BLOCK_K * STRIDE;
        float s[RB][S_BLOCKS][4];
#pragma unroll
        for (int rb = 0; rb < RB; ++rb)
#pragma unroll
            for (int j = 0; j < S_BLOCKS; ++j) s[rb][j][0] = s[rb][j][1] = s[rb][j][2] = s[rb][j][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < K_STEPS; ++kk) {
            u32 a[RB][4];
#pragma unroll
            for (int rb = 0; rb < RB; ++rb)
                ldmatrix_x4(a[rb], q_s + a_offset + rb * 16 * STRIDE + kk * 16);
#pragma unroll
            for (int pair = 0; pair < S_BLOCKS / 2; ++pair) {
                u32 b[4];
                ldmatrix_x4(b, k_tile + k_offset + pair * 16 * STRIDE + kk * 16);
#pragma unroll
                for (int rb = 0; rb < RB; ++rb) {
                    mma_bf16_16x8x16(s[rb][2 * pair], a[rb], b[0], b[1]);
                    mma_bf16_16x8x16(s[rb][2 * pair + 1], a[rb], b[2], b[3]);
                }
            }
        }

        const int key0 = tile * BLOCK_K;
        if (key0 + BLOCK_K > seq) {  // the tail tile
#pragma unroll
            for (int rb = 0; rb < RB; ++rb) ja_mask_tail(s[rb], key0, seq, t);
        }

        u32 p_frag[RB][P_STEPS][4];
#pragma unroll
        for (int rb = 0; rb < RB; ++rb) {
            float max_scaled[2], correction[2];
            ja_online_max(s[rb], row_max[rb], row_sum[rb], correction, max_scaled, scale_log2);
#pragma unroll
            for (int j = 0; j < S_BLOCKS; ++j) {
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    s[rb][j][e] = exp2_ftz(fmaf(s[rb][j][e], scale_log2, -max_scaled[e / 2]));
                    row_sum[rb][e / 2] += s[rb][j][e];
                }
                // S block j holds keys 8j..8j+7: the low (j even) or high (j odd) half of the
                // A fragment of P-V k-step j / 2.
                p_frag[rb][j / 2][(j % 2) * 2 + 0] = ja_pack_bf16(s[rb][j][0], s[rb][j][1]);
                p_frag[rb][j / 2][(j % 2) * 2 + 1] = ja_pack_bf16(s[rb][j][2], s[rb][j][3]);
            }
            // Once the running maxima settle most tiles leave them unchanged: skip this row
            // block's O rescale (exact: the factor is then 1) unless one of its rows moved.
            flash_rescale_rows(o[rb], correction);
        }

        const u16* v_tile = v_s + buf * BLOCK_K * STRIDE;
#pragma unroll
        for (int kc = 0; kc < P_STEPS; ++kc) {
#pragma unroll
            for (int pair = 0; pair < O_BLOCKS / 2; ++pair) {
                u32 b[4];
                ldmatrix_x4_trans(b, v_tile + v_offset + kc * 16 * STRIDE + pair * 16);
#pragma unroll
                for (int rb = 0; rb < RB; ++rb) {
                    mma_bf16_16x8x16(o[rb][2 * pair], p_frag[rb][kc], b[0], b[1]);
                    mma_bf16_16x8x16(o[rb][2 * pair + 1], p_frag[rb][kc], b[2], b[3]);
                }
            }
        }
    }

    const long long out_row = (long long)heads * HD;
#pragma unroll
    for (int rb = 0; rb < RB; ++rb) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            float total = row_sum[rb][r];
            total += __shfl_xor_sync(FULL_MASK, total, 1);
            total += __shfl_xor_sync(FULL_MASK, total, 2);
            const int query = q0 + warp * WARP_ROWS + rb * 16 + g + 8 * r;
            if (query >= seq) continue;
            float* dst = out + query * out_row + (long long)head * HD + 2 * t;
#pragma unroll
            for (int j = 0; j < O_BLOCKS; ++j) {
                float2 pair;
                pair.x = o[rb][j][2 * r] / total;
                pair.y = o[rb][j][2 * r + 1] / total;
                *reinterpret_cast<float2*>(dst + 8 * j) = pair;
            }
        }
    }
}

// Same signature as joint_attention_hd{64,128}: bf16 q, k, v [H, seq, hd], f32 out
// [seq, H * hd], scale_log2 = log2(e) / sqrt(hd). Two CTAs per SM (255 registers each).
extern "C" __global__ void __launch_bounds__(JA_WIDE_WARPS * WARP_SIZE, 2)
    joint_attention_hd64_wide_warp(const u16* __restrict__ q, const u16* __restrict__ k,
                                   const u16* __restrict__ v, float* __restrict__ out, int heads,
                                   int seq, float scale_log2) {
    griddep_wait();
    griddep_launch_dependents();
    joint_attention_flash_wide<64, JA_WIDE_WARPS, JA_WIDE_BLOCK_K>(q, k, v, out, heads, seq,
                                                                  scale_log2);
}
extern "C" __global__ void __launch_bounds__(JA_WIDE_WARPS * WARP_SIZE, 2)
    joint_attention_hd128_wide_warp(const u16* __restrict__ q, const u16* __restrict__ k,
                                    const u16* __restrict__ v, float* __restrict__ out, int heads,
                                    int seq, float scale_log2) {
    griddep_wait();
    griddep_launch_dependents();
    joint_attention_flash_wide<128, JA_WIDE_WARPS, JA_WIDE_BLOCK_K>(q, k, v, out, heads, seq,
                                                                   scale_log2);
}

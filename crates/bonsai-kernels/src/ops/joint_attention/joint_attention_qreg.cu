// Joint attention for hd 64 / 128: 32 query rows per warp with Q's A fragments held in
// registers for the whole key loop, and (at hd 128) the online softmax run per 32-key half of
// each 64-key K/V tile. Contract and accuracy bound: ops/joint_attention/mod.rs; launcher:
// ops/joint_attention/cuda.rs. Shares joint_attention.cu's helpers (concatenated before this
// file) and ops/attention/flash.cuh's.
//
// The kernel for hd 64 / 128 on every device without wgmma (and for hd 64 on Hopper).
//
// Why Q in registers. With 32 rows per warp each K / V fragment loaded by ldmatrix feeds two
// 16-row mma blocks; O (128 f32 at hd 128) and a 64-key S block (64 f32) would then leave no
// room for Q's A fragments (64 registers at hd 128), which would have to be re-read from shared
// memory every tile (80 ldmatrix.x4 per 64-key tile and warp: Q 16, K 32, V 32). Here S covers
// 32 keys at a time (32 registers), which frees the room: O 128 + Q 64 + S 32 = 224. Per tile
// and warp: 64 ldmatrix.x4 (K 32, V 32) for 256 HMMA.16816.
//
// The cost: a 32-key softmax step does its row-max shuffles, correction exp2 and the
// (vote-skipped) O rescale twice per 64-key tile instead of once: +8 SHFL, +8 MUFU.EX2, a few
// FMNMX. The accuracy bound is bf16_check's with 32 keys per online-softmax step (twice the
// rescales of a 64-key step; launcher: FlashVariant::softmax_keys).
//
// CTA: 4 warps x 32 rows = 128 queries of one head; K/V 64-key tiles through a cp.async double
// buffer, one barrier per tile. Shared: two K/V buffers, each k [64][hd + 8] then v [64][hd + 8]
// bf16 = 69,632 B at hd 128. Q's tile [128][hd + 8] is read once, into registers, so it is staged
// in the second buffer: tile 1's load overwrites it only after the key loop's first barrier, when
// every warp holds its fragments (a region of its own would make 104,448 B, over the 99 KB an
// sm_86/89/120 CTA may have). Two CTAs per SM.
//
// hd 64 needs no split: O 64 + Q 32 + S 64 registers fit (224-228 in all), so its entry points
// run one 64-key softmax step per tile; only hd 128 takes JA_QREG_SOFTMAX_K.
#define JA_QREG_WARPS 4
#define JA_QREG_ROW_BLOCKS 2
#define JA_QREG_BLOCK_K 64
#define JA_QREG_SOFTMAX_K 32

// Q's A fragments straight from f32 q (the `_f32q` entry points; the conversion pass then skips
// q): rows g and g + 8 of each 16-row block, columns 2t, 2t + 1 (and + 8) of each 16-dim k-step,
// rounded to bf16 as the pass rounds them (nearest even), so the result is bit-identical to the
// bf16 entry point's; rows >= seq are zero, like cp.async's zero fill.
template <int HD, int RB, int K_STEPS>
__device__ __forceinline__ void ja_q_frags_from_f32(u32 (&q_frag)[RB][K_STEPS][4],
                                                    const float* __restrict__ q_head, int row0,
                                                    int seq, int g, int t) {
#pragma unroll
    for (int rb = 0; rb < RB; ++rb) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const int row = row0 + rb * 16 + g + 8 * r;
            const bool valid = row < seq;
            const float* src = q_head + (long long)(valid ? row : 0) * HD + 2 * t;
#pragma unroll
            for (int kk = 0; kk < K_STEPS; ++kk) {
#pragma unroll
                for (int c = 0; c < 2; ++c) {
                    float2 x;
                    x.x = x.y = 0.0f;
                    if (valid) x = *reinterpret_cast<const float2*>(src + kk * 16 + 8 * c);
                    // Fragment register r + 2c: row half r, column half c (ptx.cuh's A layout).
                    q_frag[rb][kk][r + 2 * c] = ja_pack_bf16(x.x, x.y);
                }
            }
        }
    }
}

// QT: u16 (bf16 q, staged through shared memory and read with ldmatrix) or float (f32 q read
// straight into registers; q's shared region is then unused).
template <int HD, int WARPS, int BLOCK_K, int SOFTMAX_K, typename QT>
__device__ __forceinline__ void joint_attention_flash_q_regs(JA_FLASH_PARAMS(QT)) {
    constexpr int RB = JA_QREG_ROW_BLOCKS;  // 16-row mma blocks per warp
    constexpr int THREADS = WARPS * WARP_SIZE;
    constexpr int WARP_ROWS = 16 * RB;
    constexpr int BLOCK_Q = WARPS * WARP_ROWS;
    constexpr int STRIDE = HD + JA_ROW_PAD;
    constexpr int K_STEPS = HD / 16;         // k-steps of S = Q K^T
    constexpr int STEPS = BLOCK_K / SOFTMAX_K;  // online-softmax steps per K/V tile
    constexpr int S_BLOCKS = SOFTMAX_K / 8;  // 8-key column blocks of one step's S
    constexpr int P_STEPS = SOFTMAX_K / 16;  // k-steps of one step's O += P V
    constexpr int O_BLOCKS = HD / 8;         // 8-dim column blocks of O
    constexpr bool Q_F32 = sizeof(QT) == sizeof(float);
    static_assert(HD % 16 == 0 && SOFTMAX_K % 16 == 0 && BLOCK_K % SOFTMAX_K == 0,
                  "mma tile multiples");

    // K/V buffer b: k at k_s + b * KV_BUF, v at v_s + b * KV_BUF; Q's tile in buffer 1.
    constexpr int KV_BUF = 2 * BLOCK_K * STRIDE;
    static_assert(BLOCK_Q * STRIDE <= KV_BUF, "Q's tile fits the second K/V buffer");
    extern __shared__ __align__(16) u16 ja_smem[];
    u16* k_s = ja_smem;
    u16* v_s = ja_smem + BLOCK_K * STRIDE;
    u16* q_s = ja_smem + KV_BUF;

    const int lane = threadIdx.x % WARP_SIZE;
    const int warp = threadIdx.x / WARP_SIZE;
    const int g = lane / 4, t = lane % 4;  // fragment row group and column pair (ptx.cuh)
    const int q0 = blockIdx.x * BLOCK_Q;
    const int head = blockIdx.y;
    const long long head_base = (long long)head * seq * HD;
    const QT* q_head = q + head_base;
    const u16* k_head = k + head_base;
    const u16* v_head = v + head_base;
    const int n_tiles = (seq + BLOCK_K - 1) / BLOCK_K;

    if constexpr (!Q_F32) {
        // Q in its own group so its fragments load while tile 0's K / V are still in flight.
        ja_stage_rows<BLOCK_Q, HD, HD, THREADS>(q_s, q_head, q0, 0, seq);
        cp_async_commit();
    }
    // K and V tile `tile` into buffer b.
        ja_stage_rows<BLOCK_K, HD, HD, THREADS>(k_s, k_head, 0, 0, seq);
    ja_stage_rows<BLOCK_K, HD, HD, THREADS>(v_s, v_head, 0, 0, seq);
    cp_async_commit();

    int a_offset, k_offset, v_offset;
    flash_ldsm_offsets<STRIDE, STRIDE, WARP_ROWS>(a_offset, k_offset, v_offset);

    // Q's A fragments for the whole key loop (64 registers at hd 128).
    u32 q_frag[RB][K_STEPS][4];
    if constexpr (Q_F32) {
        ja_q_frags_from_f32<HD, RB, K_STEPS>(q_frag, q_head, q0 + warp * WARP_ROWS, seq, g, t);
    } else {
        cp_async_wait<1>();
        __syncthreads();  // every thread's Q pieces visible; q_s is next written by tile 1's load
#pragma unroll
        for (int rb = 0; rb < RB; ++rb)
#pragma unroll
            for (int kk = 0; kk < K_STEPS; ++kk)
                ldmatrix_x4(q_frag[rb][kk], q_s + a_offset + rb * 16 * STRIDE + kk * 16);
    }

    // Rows g and g + 8 of each row block: running max (raw score units) and this thread's
    // partial sum of exp2 weights over its own columns.
    float o[RB][O_BLOCKS][4], row_max[RB][2], row_sum[RB][2];
#pragma unroll
    for (int rb = 0; rb < RB; ++rb) flash_init_rows(o[rb], row_max[rb], row_sum[rb]);

    for (int tile = 0; tile < n_tiles; ++tile) {
        // (At tile 0 the barrier also says every warp holds Q's fragments: buffer 1 is free.)
        const int buf = tile & 1;
        // (At tile 0 the barrier also says every warp holds Q's fragments: buffer 1 is free.)
        if (flash_tile_ready(tile, n_tiles)) {
            const int next = buf ^ 1;
            ja_stage_rows<BLOCK_K, HD, HD, THREADS>(k_s + next * KV_BUF, k_head, (tile + 1) * BLOCK_K, 0, seq);
            ja_stage_rows<BLOCK_K, HD, HD, THREADS>(v_s + next * KV_BUF, v_head, (tile + 1) * BLOCK_K, 0, seq);
            cp_async_commit();
        }

#pragma unroll 1
        for (int step = 0; step < STEPS; ++step) {
            const int key0 = tile * BLOCK_K + step * SOFTMAX_K;
            // Only the last tile's second step can start past the end (the first step of
            // every tile holds a valid key); uniform across the CTA.
            if (key0 >= seq) break;
            const u16* k_step = k_s + buf * KV_BUF + step * SOFTMAX_K * STRIDE;
            float s[RB][S_BLOCKS][4];
            zero_fill(s);
            flash_mma_bf16<false, STRIDE>(s, q_frag, k_step + k_offset);

            if (key0 + SOFTMAX_K > seq) {  // the tail
#pragma unroll
                for (int rb = 0; rb < RB; ++rb) ja_mask_tail(s[rb], key0, seq, t);
            }

            u32 p_frag[RB][P_STEPS][4];
#pragma unroll
            for (int rb = 0; rb < RB; ++rb) {
                // Every step holds a valid key (key0 < seq).
                float max_scaled[2], correction[2];
                flash_online_max(s[rb], row_max[rb], row_sum[rb], correction, max_scaled, scale_log2);
#pragma unroll
                for (int j = 0; j < S_BLOCKS; ++j) {
#pragma unroll
                    for (int e = 0; e < 4; ++e)
                        s[rb][j][e] = exp2_ftz(fmaf(s[rb][j][e], scale_log2, -max_scaled[e / 2]));
                    ja_pack_p_block(s[rb][j], p_frag[rb], j);
                }
                // This thread's f32 weights of the step, summed as a tree (depth 3 instead of
                // a chain of 8 dependent adds, so each weight dies soon after its exp2); the
                // add count, and so the bound's gamma term, is the same as a chain's.
#pragma unroll
                for (int r = 0; r < 2; ++r) {
                    float pair_sum[S_BLOCKS];
#pragma unroll
                    for (int j = 0; j < S_BLOCKS; ++j)
                        pair_sum[j] = s[rb][j][2 * r] + s[rb][j][2 * r + 1];
#pragma unroll
                    for (int width = S_BLOCKS / 2; width > 0; width /= 2)
#pragma unroll
                        for (int j = 0; j < width; ++j) pair_sum[j] += pair_sum[j + width];
                    row_sum[rb][r] += pair_sum[0];
                }
                // Skip this row block's O rescale (exact: the factor is then 1) unless one of
                // its rows' maxima moved.
                flash_rescale_rows(o[rb], correction);
            }

            const u16* v_step = v_s + buf * KV_BUF + step * SOFTMAX_K * STRIDE;
            flash_mma_bf16<true, STRIDE>(o, p_frag, v_step + v_offset);
        }
    }

#pragma unroll
    for (int rb = 0; rb < RB; ++rb)
        ja_store_rows<HD>(o[rb], row_sum[rb], out, q0 + warp * WARP_ROWS + rb * 16, head, 0, heads, seq, g, t);
}

// JA_FLASH_PARAMS with bf16 q, or f32 q (same layout, the `_f32q` ones) rounded to bf16 here. Two
// CTAs per SM.
#define JA_QREG_ENTRY_POINTS(HD, SOFTMAX_K)                                                              \
    extern "C" __global__ void __launch_bounds__(JA_QREG_WARPS * WARP_SIZE, 2)                           \
        joint_attention_hd##HD##_q_regs(JA_FLASH_PARAMS(u16)) {                                          \
        griddep_wait();                                                                                  \
        griddep_launch_dependents();                                                                     \
        joint_attention_flash_q_regs<HD, JA_QREG_WARPS, JA_QREG_BLOCK_K, SOFTMAX_K>(JA_FLASH_ARGS);      \
    }                                                                                                    \
    extern "C" __global__ void __launch_bounds__(JA_QREG_WARPS * WARP_SIZE, 2)                           \
        joint_attention_hd##HD##_q_regs_f32q(JA_FLASH_PARAMS(float)) {                                   \
        griddep_wait();                                                                                  \
        griddep_launch_dependents();                                                                     \
        joint_attention_flash_q_regs<HD, JA_QREG_WARPS, JA_QREG_BLOCK_K, SOFTMAX_K>(JA_FLASH_ARGS);      \
    }
JA_QREG_ENTRY_POINTS(64, JA_QREG_BLOCK_K)
JA_QREG_ENTRY_POINTS(128, JA_QREG_SOFTMAX_K)

// The pieces every flash-attention kernel on mma.sync / wgmma fragments shares: the causal GQA
// prefill (attention_prefill_mma.cu) and the joint attention kernels (ops/joint_attention/).
// Concatenated before them. Fragment layouts: ptx.cuh (g = lane / 4, t = lane % 4).

// This lane's ldmatrix row offsets (elements) into row-major bf16 / f16 tiles padded to QK_STRIDE
// (Q, K) and V_STRIDE (V) elements per row. A (Q, the warp's WARP_ROWS rows from warp *
// WARP_ROWS): matrix i = lane / 8 holds rows 8 (i % 2).., k 8 (i / 2)..; B from K
// (non-transposed): keys 8 (i / 2).., k 8 (i % 2)..; B from V (transposed): keys 8 (i % 2)..,
// dims 8 (i / 2).. (fragment order of ptx.cuh).
template <int QK_STRIDE, int V_STRIDE, int WARP_ROWS>
__device__ __forceinline__ void flash_ldsm_offsets(int& a_offset, int& k_offset, int& v_offset) {
    const int lane = threadIdx.x % WARP_SIZE;
    const int warp = threadIdx.x / WARP_SIZE;
    const int mat = lane / 8, mat_row = lane % 8;
    a_offset = (warp * WARP_ROWS + (mat % 2) * 8 + mat_row) * QK_STRIDE + (mat / 2) * 8;
    k_offset = ((mat / 2) * 8 + mat_row) * QK_STRIDE + (mat % 2) * 8;
    v_offset = ((mat % 2) * 8 + mat_row) * V_STRIDE + (mat / 2) * 8;
}

// The online-softmax state of rows g and g + 8 before the first key: O zero, running max -inf,
// partial sum 0.
template <int O_BLOCKS>
__device__ __forceinline__ void flash_init_rows(float (&o)[O_BLOCKS][4], float (&row_max)[2], float (&row_sum)[2]) {
    zero_fill(o);
    row_max[0] = row_max[1] = neg_inf();
    row_sum[0] = row_sum[1] = 0.0f;
}

// C += A B for a warp's RB 16-row blocks over K_STEPS k16 steps and N_BLOCKS 8-column blocks of
// C, bf16 operands: A's fragments in registers, B's read by ldmatrix.x4 from a row-major tile of
// STRIDE elements a row at this lane's row address b_lane (flash_ldsm_offsets), each load the B
// of two adjacent column blocks. Not TRANS: tile rows are C's columns (B from K, for S = Q K^T);
// TRANS: tile rows are the k index (B from V, for O += P V).
template <bool TRANS, int STRIDE, int RB, int K_STEPS, int N_BLOCKS>
__device__ __forceinline__ void flash_mma_bf16(float (&c)[RB][N_BLOCKS][4], const u32 (&a)[RB][K_STEPS][4],
                                               const u16* b_lane) {
#pragma unroll
    for (int ks = 0; ks < K_STEPS; ++ks) {
#pragma unroll
        for (int pair = 0; pair < N_BLOCKS / 2; ++pair) {
            u32 b[4];
            if constexpr (TRANS) {
                ldmatrix_x4_trans(b, b_lane + ks * 16 * STRIDE + pair * 16);
            } else {
                ldmatrix_x4(b, b_lane + pair * 16 * STRIDE + ks * 16);
            }
#pragma unroll
            for (int rb = 0; rb < RB; ++rb) {
                mma_bf16_16x8x16(c[rb][2 * pair], a[rb][ks], b[0], b[1]);
                mma_bf16_16x8x16(c[rb][2 * pair + 1], a[rb][ks], b[2], b[3]);
            }
        }
    }
}

// The same for one 16-row block (C [N_BLOCKS][4], A [K_STEPS][4]).
template <bool TRANS, int STRIDE, int K_STEPS, int N_BLOCKS>
__device__ __forceinline__ void flash_mma_bf16(float (&c)[N_BLOCKS][4], const u32 (&a)[K_STEPS][4], const u16* b_lane) {
    flash_mma_bf16<TRANS, STRIDE>(reinterpret_cast<float(&)[1][N_BLOCKS][4]>(c),
                                  reinterpret_cast<const u32(&)[1][K_STEPS][4]>(a), b_lane);
}

// The top of iteration `tile` over a cp.async double buffer of K/V tiles: waits for this thread's
// copies, then a CTA barrier (tile `tile` visible to all; every warp is done with tile - 1, whose
// buffer the next copies reuse). True when a next tile exists: the caller then issues its copies
// into the other buffer as one commit group. (The copies stay in the caller: issued through a
// callback here, they compiled to different code.)
__device__ __forceinline__ bool flash_tile_ready(int tile, int n_tiles) {
    cp_async_wait<0>();
    __syncthreads();
    return tile + 1 < n_tiles;
}

// The max step of the online softmax for rows g and g + 8 (elements 0-1 and 2-3 of each block)
// over one S block: the rows' running max moves to include it, their partial sums and O take
// `correction` (exp2 of old max minus new, scaled: 0 on the first step, whose state is 0), and
// `max_scaled` is what the exponent subtracts. Scores in log2 units take scale_log2 = 1 (the
// multiplications fold away). Every step holds a valid key, so the new maxima are finite. The 4
// lanes t of a row group hold its columns.
template <int S_BLOCKS>
__device__ __forceinline__ void flash_online_max(const float (&s)[S_BLOCKS][4], float (&row_max)[2],
                                                 float (&row_sum)[2], float (&correction)[2],
                                                 float (&max_scaled)[2], float scale_log2) {
    float step_max[2] = {neg_inf(), neg_inf()};
#pragma unroll
    for (int j = 0; j < S_BLOCKS; ++j) {
        step_max[0] = fmaxf(step_max[0], fmaxf(s[j][0], s[j][1]));
        step_max[1] = fmaxf(step_max[1], fmaxf(s[j][2], s[j][3]));
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        step_max[r] = fmaxf(step_max[r], __shfl_xor_sync(FULL_MASK, step_max[r], 1));
        step_max[r] = fmaxf(step_max[r], __shfl_xor_sync(FULL_MASK, step_max[r], 2));
        const float new_max = fmaxf(row_max[r], step_max[r]);
        correction[r] = exp2_ftz((row_max[r] - new_max) * scale_log2);
        row_max[r] = new_max;
        max_scaled[r] = new_max * scale_log2;
        row_sum[r] *= correction[r];
    }
}

// Scales an m16n8 accumulator block's rows (elements 0-1: row g, 2-3: row g + 8) by their
// online-softmax corrections. Skipped unless some row of the warp moved its max: the factor is
// then exactly 1, so skipping changes nothing.
template <int BLOCKS>
__device__ __forceinline__ void flash_rescale_rows(float (&o)[BLOCKS][4], const float (&correction)[2]) {
    if (!__any_sync(FULL_MASK, correction[0] != 1.0f || correction[1] != 1.0f)) return;
#pragma unroll
    for (int j = 0; j < BLOCKS; ++j) {
        o[j][0] *= correction[0];
        o[j][1] *= correction[0];
        o[j][2] *= correction[1];
        o[j][3] *= correction[1];
    }
}

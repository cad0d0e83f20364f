// Joint attention at hd 128 on Hopper's warpgroup MMA (wgmma, sm_90a): `joint_attention_hd128_wgmma`
// and its `_f32q` form. Contract and accuracy bound: ops/joint_attention/mod.rs (bf16 operands,
// f32 accumulation, the online softmax in f32 with P rounded to bf16; one softmax step per
// 128-key tile); launcher: ops/joint_attention/cuda.rs + variant.rs (picked on compute
// capability 9.0). Shares joint_attention.cu's helpers (concatenated before this file) and
// ops/attention/flash.cuh's.
//
// Why. The mma.sync kernels (joint_attention_qreg.cu) stay far below the tensor peak: every
// warp feeds the tensor cores 16 x 8 x 16 at a time from registers it loaded with ldmatrix, and
// the shared-memory reads of K and V sit next to the MMAs on the critical path. wgmma reads B
// straight from shared memory in m64 x n128 x k16 steps, one instruction per warpgroup, which is
// where cuDNN's speed (torch's bf16 SDPA on this chip) comes from. Figures: docs/kernel-notes.md,
// "Joint attention".
//
// The two products, per warpgroup of 64 query rows and 128-key tile:
// - S = Q K^T: Q is A from registers (its fragments loaded once, 32 registers), K is B read in
//   place: key rows of hd are K-major for N = keys, staged as two 64-dim halves of 128-byte rows
//   in the 128-byte swizzle (8 wgmma m64n128k16, the first with accumulate = 0).
// - O += P V: the wgmma D layout of S is exactly the A-fragment layout of P (rows g / g + 8,
//   keys 8j + 2t..), so the softmax and the bf16 rounding of P stay in registers. V [key][dim]
//   is MN-major for this product (K = keys, N = dims) and is read in place through the
//   transposed-B descriptor (wgmma_bf16_m64n128k16_rs_mn), staged exactly like K.
// K and V tiles share one layout and one copy routine; no ldmatrix, no transpose.
//
// CTA = 2 warpgroups (256 threads) = 128 queries of one head, one CTA per SM (243 registers a
// thread: O 64 + S 64 + Q 32 + P 32 at peak). K/V tiles go through a 3-stage cp.async ring
// (3 x 64 KB), one CTA barrier per tile; each warpgroup waits for its own wgmmas, and the two run
// half a tile apart (below), so while one runs its softmax the other's products keep the tensor
// cores busy.
//
// Speed of light: 4 H seq^2 hd = 261 GFLOP at h24 seq 4608; dense bf16 ~990 TFLOP/s on paper
// -> 264 us. The exp2 per score (16 per clock per SM) costs ~45% of the MMA time per tile: hidden
// only while the other warpgroup multiplies.
#define JW_WARPGROUPS 2
#define JW_THREADS (128 * JW_WARPGROUPS)
#define JW_BLOCK_Q (64 * JW_WARPGROUPS)
#define JW_BLOCK_K 128
#define JW_HD 128
// The 128-byte swizzle repeats every 8 rows = 1024 bytes: tiles start on that boundary.
#define JW_ALIGN 1024
// One 64-dim half of a K or V tile: JW_BLOCK_K rows of 128 bytes.
#define JW_HALF_BYTES (JW_BLOCK_K * 128)
#define JW_TILE_BYTES (2 * JW_HALF_BYTES)
// A ring stage: the K tile, then the V tile.
#define JW_STAGE_BYTES (2 * JW_TILE_BYTES)
// The ring: tile j - 1's V (still read by warpgroup 1), tile j, tile j + 1 landing.
#define JW_STAGES 3

// cp.async copies of keys key0 .. key0 + JW_BLOCK_K - 1 of one head's [seq][128] bf16 rows into a
// tile: 16-byte chunk c of key row r goes to half c / 8, row r, chunk position (c % 8) ^ (r % 8).
// Keys past seq are zero-filled (their scores are masked; zero V rows keep 0 * V finite).
__device__ __forceinline__ void jw_stage_tile(unsigned char* tile, const u16* __restrict__ src, int key0, int seq) {
    constexpr int CHUNKS = JW_BLOCK_K * (JW_HD / 8);
    static_assert(CHUNKS % JW_THREADS == 0, "whole rounds of copies");
#pragma unroll
    for (int round = 0; round < CHUNKS / JW_THREADS; ++round) {
        const int i = threadIdx.x + round * JW_THREADS;
        const int r = i / 16, c = i % 16;  // 16 consecutive threads copy one 256-byte key row
        const bool valid = key0 + r < seq;
        const u16* from = valid ? src + (long long)(key0 + r) * JW_HD + c * 8 : src;
        cp_async16_zfill(tile + (c / 8) * JW_HALF_BYTES + r * 128 + (((c % 8) ^ (r & 7)) * 16), from, valid);
    }
}

// This thread's Q A-fragments for its warp's 16 rows (row0 ..): rows g / g + 8, dims 2t, 2t + 1
// (+ 8) of each 16-dim step, read straight from global memory (once per CTA). f32 q is rounded
// to bf16 here as the conversion pass would round it (nearest even): bit-identical to the bf16
// entry's fragments. Rows past seq are zero.
template <typename QT>
__device__ __forceinline__ void jw_q_frags(u32 (&frag)[JW_HD / 16][4], const QT* __restrict__ q_head, int row0,
                                           int seq, int g, int t) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int row = row0 + g + 8 * r;
        const bool valid = row < seq;
        const QT* src = q_head + (long long)(valid ? row : 0) * JW_HD + 2 * t;
#pragma unroll
        for (int ks = 0; ks < JW_HD / 16; ++ks)
#pragma unroll
            for (int c = 0; c < 2; ++c) {
                u32 packed = 0u;
                if (valid) {
                    if constexpr (sizeof(QT) == sizeof(float)) {
                        const float2 x = *reinterpret_cast<const float2*>(src + ks * 16 + 8 * c);
                        packed = ja_pack_bf16(x.x, x.y);
                    } else {
                        packed = *reinterpret_cast<const u32*>(src + ks * 16 + 8 * c);
                    }
                }
                frag[ks][r + 2 * c] = packed;  // register r + 2c: row half r, dim half c
            }
    }
}

// Row half r's (row g or g + 8) share of a 128-key S block's weights: this thread's 32 f32
// weights summed as a tree (depth 5; the add count, and so the bound's gamma term, is a chain's).
// Spelled out: nvcc 13.0 does not unroll a halving-width loop here, and the partial sums then
// live in local memory.
__device__ __forceinline__ float jw_tree_sum16(const float (&s)[JW_BLOCK_K / 8][4], int r) {
    static_assert(JW_BLOCK_K / 8 == 16, "a tree of 16 pair sums");
    float pair_sum[16];
#pragma unroll
    for (int j = 0; j < 16; ++j) pair_sum[j] = s[j][2 * r] + s[j][2 * r + 1];
#pragma unroll
    for (int j = 0; j < 8; ++j) pair_sum[j] += pair_sum[j + 8];
#pragma unroll
    for (int j = 0; j < 4; ++j) pair_sum[j] += pair_sum[j + 4];
    pair_sum[0] += pair_sum[2];
    pair_sum[1] += pair_sum[3];
    return pair_sum[0] + pair_sum[1];
}

// The online softmax of one 128-key tile, in place on its S block (raw scores of keys key0 ..):
// keys past seq masked, the rows' running max and sum updated, `correction` = the factor O must
// be scaled by (exp2 of the old max minus the new, scaled; 0 on the first tile), and s = the f32
// weights. Every tile holds a valid key, so the new maxima are finite.
__device__ __forceinline__ void jw_softmax(float (&s)[JW_BLOCK_K / 8][4], float (&correction)[2], float (&row_max)[2],
                                           float (&row_sum)[2], int key0, int seq, int t, float scale_log2) {
    constexpr int S_BLOCKS = JW_BLOCK_K / 8;
    if (key0 + JW_BLOCK_K > seq) ja_mask_tail(s, key0, seq, t);  // the tail
    float max_scaled[2];
    flash_online_max(s, row_max, row_sum, correction, max_scaled, scale_log2);
#pragma unroll
    for (int j = 0; j < S_BLOCKS; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[j][e] = exp2_ftz(fmaf(s[j][e], scale_log2, -max_scaled[e / 2]));
#pragma unroll
    for (int r = 0; r < 2; ++r) row_sum[r] += jw_tree_sum16(s, r);
}

// S = Q K^T of one tile (8 wgmma k16 steps over the two 64-dim halves; the first ignores s's old
// values) and O += P V (8 steps over the tile's keys, V through the MN-major descriptor). The
// caller fences before and commits after.
__device__ __forceinline__ void jw_issue_s(float (&s)[JW_BLOCK_K / 8][4], u32 (&q_frag)[JW_HD / 16][4],
                                           const unsigned char* k_tile) {
#pragma unroll
    for (int ks = 0; ks < JW_HD / 16; ++ks)
        wgmma_bf16_m64n128k16_rs(&s[0][0], q_frag[ks], k_tile + (ks / 4) * JW_HALF_BYTES, 2 * (ks % 4), ks > 0);
}
__device__ __forceinline__ void jw_issue_pv(float (&o)[JW_HD / 8][4], u32 (&p_frag)[JW_BLOCK_K / 16][4],
                                            const unsigned char* v_tile) {
#pragma unroll
    for (int kc = 0; kc < JW_BLOCK_K / 16; ++kc)
        wgmma_bf16_m64n128k16_rs_mn(&o[0][0], p_frag[kc], v_tile + kc * 16 * 128, JW_HALF_BYTES);
}

// Tile `tile`'s products up to P, in place on s: wgmma S = Q K^T (after, with PV_FIRST, O += P V
// of the previous tile's P on its V, in one commit group), its wait, the online softmax, O's
// rescale and P packed into p_frag. k_tile / v_tile: a tile's K / V in the ring.
template <bool PV_FIRST, typename KTile, typename VTile>
__device__ __forceinline__ void jw_tile_to_p(float (&o)[JW_HD / 8][4], float (&s)[JW_BLOCK_K / 8][4],
                                             u32 (&p_frag)[JW_BLOCK_K / 16][4], u32 (&q_frag)[JW_HD / 16][4],
                                             KTile k_tile, VTile v_tile, int tile, float (&row_max)[2],
                                             float (&row_sum)[2], int seq, int t, float scale_log2) {
    float correction[2];
    wgmma_fence();
    if constexpr (PV_FIRST) jw_issue_pv(o, p_frag, v_tile(tile > 0 ? tile - 1 : 0));
    jw_issue_s(s, q_frag, k_tile(tile));
    wgmma_commit();
    wgmma_wait<0>();
    jw_softmax(s, correction, row_max, row_sum, tile * JW_BLOCK_K, seq, t, scale_log2);
    // Skip the O rescale (exact: the factor is then 1) unless one of the warp's maxima moved.
    flash_rescale_rows(o, correction);
#pragma unroll
    for (int j = 0; j < JW_BLOCK_K / 8; ++j) ja_pack_p_block(s[j], p_frag, j);
}

// The two warpgroups run half a tile apart. Run in step (each doing S_j, softmax, PV_j inside
// the barrier interval of tile j) both multiply, then both compute exp2 while the tensor cores
// idle. Here warpgroup 1 is half a step behind: in interval j it issues PV_{j-1} (P kept from the
// previous interval) together with S_j, then runs softmax_j, so its products overlap warpgroup
// 0's softmax and the other way round (faster than in step: docs/kernel-notes.md, "Joint
// attention", evidence). PV_{j-1} reads tile j - 1's V during interval j, so the ring has JW_STAGES = 3
// slots (tile j + 1 lands in the third). In interval 0 it issues PV with P = 0 on tile 0's V
// (adds exact zeros), so no wgmma is issued under a condition (ptxas serializes those).
template <typename QT>
__device__ __forceinline__ void joint_attention_flash_wgmma(JA_FLASH_PARAMS(QT)) {
    constexpr int S_BLOCKS = JW_BLOCK_K / 8;  // 8-key column blocks of S
    constexpr int P_STEPS = JW_BLOCK_K / 16;  // k16 steps of O += P V
    constexpr int O_BLOCKS = JW_HD / 8;       // 8-dim column blocks of O
    constexpr int STAGES = JW_STAGES;
    extern __shared__ float4 jw_smem_raw[];
    // The dynamic window is only 16-byte aligned by contract: round up (the launcher allocates
    // JW_ALIGN extra bytes).
    unsigned char* smem = reinterpret_cast<unsigned char*>(
        (reinterpret_cast<unsigned long long>(jw_smem_raw) + JW_ALIGN - 1) & ~(unsigned long long)(JW_ALIGN - 1));

    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const int g = lane / 4, t = lane % 4;
    const int q0 = blockIdx.x * JW_BLOCK_Q;
    const int head = blockIdx.y;
    const long long head_base = (long long)head * seq * JW_HD;
    const u16* k_head = k + head_base;
    const u16* v_head = v + head_base;
    const int n_tiles = (seq + JW_BLOCK_K - 1) / JW_BLOCK_K;
    // Warpgroup warp / 4 owns rows 64 (warp / 4) .., its warp warp % 4 rows 16 (warp % 4) ..
    const int warp_row0 = q0 + 16 * warp;
    const bool behind = warp >= 4;  // warpgroup 1, half a tile behind

    auto k_tile = [&](int tile) { return smem + (tile % STAGES) * JW_STAGE_BYTES; };
    auto v_tile = [&](int tile) { return smem + (tile % STAGES) * JW_STAGE_BYTES + JW_TILE_BYTES; };
    jw_stage_tile(k_tile(0), k_head, 0, seq);
    jw_stage_tile(v_tile(0), v_head, 0, seq);
    cp_async_commit();

    u32 q_frag[JW_HD / 16][4];
    jw_q_frags<QT>(q_frag, q + head_base, warp_row0, seq, g, t);

    float o[O_BLOCKS][4], s[S_BLOCKS][4];
    zero_fill(o);
    zero_fill(s);
    // P of warpgroup 1's previous tile: zero before the first.
    u32 p_frag[P_STEPS][4];
    zero_fill(p_frag);
    // Rows g and g + 8: running max (raw score units) and this thread's partial sum of weights.
    float row_max[2] = {neg_inf(), neg_inf()}, row_sum[2] = {0.0f, 0.0f};

#pragma unroll 1
    for (int tile = 0; tile < n_tiles; ++tile) {
        cp_async_wait<0>();
        // This thread's copies of the tile are done; the proxy fence makes them visible to the
        // tensor cores' reads after the barrier, which also says every warpgroup is done with
        // the tiles before the slot the next copies reuse (it waited for its wgmmas).
        fence_proxy_async_smem();
        __syncthreads();
        if (tile + 1 < n_tiles) {
            jw_stage_tile(k_tile(tile + 1), k_head, (tile + 1) * JW_BLOCK_K, seq);
            jw_stage_tile(v_tile(tile + 1), v_head, (tile + 1) * JW_BLOCK_K, seq);
        }
        cp_async_commit();

        if (behind) {
            // PV of the previous tile (P = 0 and tile 0's V in interval 0), then S of this one.
            jw_tile_to_p<true>(o, s, p_frag, q_frag, k_tile, v_tile, tile, row_max, row_sum, seq, t, scale_log2);
        } else {
            jw_tile_to_p<false>(o, s, p_frag, q_frag, k_tile, v_tile, tile, row_max, row_sum, seq, t, scale_log2);
            wgmma_fence();
            jw_issue_pv(o, p_frag, v_tile(tile));
            wgmma_commit();
            // P's registers (rewritten next tile) and the slot (refilled after a later barrier)
            // are reused only after this.
            wgmma_wait<0>();
        }
    }
    if (behind) {  // the last tile's PV (its slot is never refilled)
        wgmma_fence();
        jw_issue_pv(o, p_frag, v_tile(n_tiles - 1));
        wgmma_commit();
        wgmma_wait<0>();
    }

    ja_store_rows<JW_HD>(o, row_sum, out, warp_row0, head, 0, heads, seq, g, t);
}

// JA_FLASH_PARAMS at hd 128, like joint_attention_hd128_q_regs: bf16 q, or f32 q (same layout,
// `_f32q`) rounded here. Grid (ceil(seq / 128), H); JW_STAGES * JW_STAGE_BYTES + JW_ALIGN bytes of
// dynamic shared memory.
extern "C" __global__ void __launch_bounds__(JW_THREADS, 1) joint_attention_hd128_wgmma(JA_FLASH_PARAMS(u16)) {
    griddep_wait();
    griddep_launch_dependents();
    joint_attention_flash_wgmma(JA_FLASH_ARGS);
}
extern "C" __global__ void __launch_bounds__(JW_THREADS, 1) joint_attention_hd128_wgmma_f32q(JA_FLASH_PARAMS(float)) {
    griddep_wait();
    griddep_launch_dependents();
    joint_attention_flash_wgmma(JA_FLASH_ARGS);
}

// Joint attention at hd 128 on wgmma with each warpgroup's softmax running under its own P V
// product: `joint_attention_hd128_wgmma_pipe` and its `_f32q` form. Same contract, arithmetic
// and bound as joint_attention_hd128_wgmma (joint_attention_wgmma.cu, concatenated before this
// file: its tile layout, copies, softmax and epilogue), so both are checked against one bound.
//
// Why. In joint_attention_hd128_wgmma a warpgroup waits for S_j, runs the softmax, issues PV_j
// and waits for it: while it computes exp2 only the other warpgroup's products keep the tensor
// cores busy, and the exp2 of a 128-key tile costs ~45% of its MMA time (16 MUFU per clock per
// SM). Here (FlashAttention-3's intra-warpgroup overlap) a warpgroup issues S_{j+1} and PV_j
// back to back, waits only for S_{j+1}, and runs the softmax of tile j + 1 while PV_j is still
// in the tensor pipe. The O rescale by tile j + 1's correction waits for PV_j: O is PV's
// accumulator, and ptxas serializes every wgmma (C7515) when a non-wgmma instruction writes an
// accumulator inside a pipeline stage; likewise P_{j+1} is packed into P's registers only after
// PV_j (ptxas: C7513): the softmax leaves f32 weights in S, packed after the wait. Registers:
// O 64 + S 64 + P 32 + Q 32 would not leave room for the pipeline's extra live ranges, so Q moves
// to shared memory (wgmma's "ss" form reads A from a swizzled tile like B).
//
// Ring: tile j + 1's slot must stay untouched while PV_j reads tile j's V, and tile j + 2 lands
// meanwhile: three stages of 64 KB after the 32 KB Q tile (230,400 bytes with the alignment
// slack), one CTA per SM.
//
// Per step j < last of a warpgroup (its pending wgmma groups in brackets):
//   CTA barrier (tile j + 1 landed; every warpgroup finished PV_{j-1}, so tile j - 1's slot is
//   free) and the copies of tile j + 2 into it; issue S_{j+1} and PV_j [S, PV]; wait for S_{j+1}
//   [PV]; its softmax (weights and correction); wait for PV_j [ ]; rescale O, pack P_{j+1}.
#define JWP_STAGES 3

// Q's 128 rows as bf16 in the swizzled two-half layout of a K tile (rows past seq zero): plain
// loads and stores, once per CTA (f32 q is rounded to nearest even here, as the conversion pass
// rounds it, so both entry points compute the same).
template <typename QT>
__device__ __forceinline__ void jwp_stage_q(unsigned char* q_tile, const QT* __restrict__ q_head, int q0, int seq) {
    constexpr int CHUNKS = JW_BLOCK_Q * (JW_HD / 8);
    static_assert(CHUNKS % JW_THREADS == 0 && JW_BLOCK_Q == JW_BLOCK_K, "the Q tile is laid out as a K tile");
#pragma unroll
    for (int round = 0; round < CHUNKS / JW_THREADS; ++round) {
        const int i = threadIdx.x + round * JW_THREADS;
        const int r = i / 16, c = i % 16;
        uint4 packed = make_uint4(0u, 0u, 0u, 0u);
        if (q0 + r < seq) {
            const QT* src = q_head + (long long)(q0 + r) * JW_HD + c * 8;
            if constexpr (sizeof(QT) == sizeof(float)) {
                const float4 lo = *reinterpret_cast<const float4*>(src);
                const float4 hi = *reinterpret_cast<const float4*>(src + 4);
                packed = make_uint4(ja_pack_bf16(lo.x, lo.y), ja_pack_bf16(lo.z, lo.w), ja_pack_bf16(hi.x, hi.y),
                                    ja_pack_bf16(hi.z, hi.w));
            } else {
                packed = *reinterpret_cast<const uint4*>(src);
            }
        }
        *reinterpret_cast<uint4*>(q_tile + (c / 8) * JW_HALF_BYTES + r * 128 + (((c % 8) ^ (r & 7)) * 16)) = packed;
    }
}

// S = Q K^T of one tile with Q from shared memory: `q_rows` is the warpgroup's 64 rows of the Q
// tile's first half. The caller fences before and commits after.
__device__ __forceinline__ void jwp_issue_s(float (&s)[JW_BLOCK_K / 8][4], const unsigned char* q_rows,
                                            const unsigned char* k_tile) {
#pragma unroll
    for (int ks = 0; ks < JW_HD / 16; ++ks) {
        const int half = (ks / 4) * JW_HALF_BYTES;
        wgmma_bf16_m64n128k16_ss(&s[0][0], q_rows + half, k_tile + half, 2 * (ks % 4), ks > 0);
    }
}

template <typename QT>
__device__ __forceinline__ void joint_attention_flash_wgmma_pipe(const QT* __restrict__ q, const u16* __restrict__ k,
                                                                 const u16* __restrict__ v, float* __restrict__ out,
                                                                 int heads, int seq, float scale_log2) {
    constexpr int S_BLOCKS = JW_BLOCK_K / 8, P_STEPS = JW_BLOCK_K / 16, O_BLOCKS = JW_HD / 8;
    extern __shared__ float4 jwp_smem_raw[];
    // The dynamic window is only 16-byte aligned by contract: round up (the launcher allocates
    // JW_ALIGN extra bytes).
    unsigned char* smem = reinterpret_cast<unsigned char*>(
        (reinterpret_cast<unsigned long long>(jwp_smem_raw) + JW_ALIGN - 1) & ~(unsigned long long)(JW_ALIGN - 1));
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const int g = lane / 4, t = lane % 4;
    const int q0 = blockIdx.x * JW_BLOCK_Q, head = blockIdx.y;
    const long long head_base = (long long)head * seq * JW_HD;
    const u16* k_head = k + head_base;
    const u16* v_head = v + head_base;
    const int n_tiles = (seq + JW_BLOCK_K - 1) / JW_BLOCK_K;
    const int warp_row0 = q0 + 16 * warp;
    // The Q tile, then the ring.
    // The warpgroup index through a shuffle, so the compiler knows it is warp-uniform and keeps
    // the A descriptors in uniform registers (computed in ordinary registers between two wgmmas
    // they count as input registers defined inside the pipeline stage: C7513).
    const int warpgroup = __shfl_sync(FULL_MASK, warp / 4, 0);
    const unsigned char* q_rows = smem + warpgroup * 64 * 128;
    unsigned char* ring = smem + JW_TILE_BYTES;
    auto k_tile = [&](int tile) { return ring + (tile % JWP_STAGES) * JW_STAGE_BYTES; };
    auto v_tile = [&](int tile) { return ring + (tile % JWP_STAGES) * JW_STAGE_BYTES + JW_TILE_BYTES; };
    auto stage = [&](int tile) {
        if (tile < n_tiles) {
            jw_stage_tile(k_tile(tile), k_head, tile * JW_BLOCK_K, seq);
            jw_stage_tile(v_tile(tile), v_head, tile * JW_BLOCK_K, seq);
        }
        cp_async_commit();  // one group per tile, empty past the end: the wait counts stay fixed
    };
    stage(0);
    stage(1);

    jwp_stage_q<QT>(smem, q + head_base, q0, seq);
    float o[O_BLOCKS][4], s[S_BLOCKS][4];
#pragma unroll
    for (int j = 0; j < O_BLOCKS; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[j][e] = 0.0f;
#pragma unroll
    for (int j = 0; j < S_BLOCKS; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[j][e] = 0.0f;
    float row_max[2] = {neg_inf(), neg_inf()}, row_sum[2] = {0.0f, 0.0f};

    // Tile 0: its S and softmax (O is still zero: no rescale). The proxy fence makes this
    // thread's Q stores and tile-0 copies visible to the tensor cores after the barrier.
    cp_async_wait<1>();
    fence_proxy_async_smem();
    __syncthreads();
    wgmma_fence();
    jwp_issue_s(s, q_rows, k_tile(0));
    wgmma_commit();
    wgmma_wait<0>();
    register_fence(s);
    u32 p_frag[P_STEPS][4];
    float correction[2];
    jw_softmax(s, correction, row_max, row_sum, 0, seq, t, scale_log2);
    jw_pack_p(s, p_frag);

    // Every tile but the last: the next tile's S goes out with this tile's PV. (The last tile is
    // peeled off: an S issue under a condition made ptxas serialize every wgmma, C7515.)
#pragma unroll 1
    for (int tile = 0; tile + 1 < n_tiles; ++tile) {
        // Tile + 1 landed (the newest group in flight); the proxy fence makes this thread's
        // copies visible to the tensor cores after the barrier, which also says every
        // warpgroup finished PV of tile - 1, whose slot tile + 2 reuses.
        cp_async_wait<0>();
        fence_proxy_async_smem();
        __syncthreads();
        stage(tile + 2);
        // One arrive per product, every operand fenced before the first (register_fence,
        // ptx.cuh: nothing may define a wgmma's registers between its stage's arrive and wait).
        register_fence(s);
        register_fence(o);
        register_fence(p_frag);
        wgmma_fence();
        jwp_issue_s(s, q_rows, k_tile(tile + 1));
        wgmma_commit();
        wgmma_fence();
        jw_issue_pv(o, p_frag, v_tile(tile));
        wgmma_commit();
        wgmma_wait<1>();  // S of tile + 1; PV of this tile may still run
        register_fence(s);
        jw_softmax(s, correction, row_max, row_sum, (tile + 1) * JW_BLOCK_K, seq, t, scale_log2);
        // The fence uses the weights, so the softmax stays before the wait (the compiler would
        // otherwise sink its register-only work below it, and nothing would overlap PV).
        register_fence(s);
        wgmma_wait<0>();
        // PV read P and wrote O until here; only now may P's registers take the next tile's P
        // (written while PV still runs they made ptxas serialize every wgmma, C7513).
        register_fence(p_frag);
        register_fence(o);
        flash_rescale_rows(o, correction);
        jw_pack_p(s, p_frag);
    }
    // The last tile's PV (it landed before the last barrier).
    register_fence(o);
    register_fence(p_frag);
    wgmma_fence();
    jw_issue_pv(o, p_frag, v_tile(n_tiles - 1));
    wgmma_commit();
    wgmma_wait<0>();
    register_fence(o);

    jw_store_rows(o, row_sum, out, warp_row0, head, heads, seq, g, t);
}

// Signatures as joint_attention_hd128_wgmma[_f32q]; JW_TILE_BYTES + JWP_STAGES * JW_STAGE_BYTES +
// JW_ALIGN bytes of dynamic shared memory.
extern "C" __global__ void __launch_bounds__(JW_THREADS, 1)
    joint_attention_hd128_wgmma_pipe(const u16* __restrict__ q, const u16* __restrict__ k,
                                     const u16* __restrict__ v, float* __restrict__ out, int heads, int seq,
                                     float scale_log2) {
    griddep_wait();
    griddep_launch_dependents();
    joint_attention_flash_wgmma_pipe<u16>(q, k, v, out, heads, seq, scale_log2);
}
extern "C" __global__ void __launch_bounds__(JW_THREADS, 1)
    joint_attention_hd128_wgmma_pipe_f32q(const float* __restrict__ q, const u16* __restrict__ k,
                                          const u16* __restrict__ v, float* __restrict__ out, int heads, int seq,
                                          float scale_log2) {
    griddep_wait();
    griddep_launch_dependents();
    joint_attention_flash_wgmma_pipe<float>(q, k, v, out, heads, seq, scale_log2);
}

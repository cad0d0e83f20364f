// Causal GQA prefill attention on mma.sync m16n8k16 f16 tensor cores (flash-attention-2 style),
// for m > 8 query tokens where it fits the head shape and the device (launcher: ops/attention/cuda.rs).
// Same contract as attention_split_keys: query head h of token i (position p = pos0[0] + i)
// attends to cache positions 0..=p of kv head h / G; qkv [m, (n_q + 2 n_kv) hd] f32, the paged f16
// cache (prelude.cuh: pools [blocks][n_kv][KV_BLOCK][hd], position j in block
// block_table[j / KV_BLOCK]), out [m, n_q hd] f32; a position >= max_seq gives NaN output.
//
// CTA: 4 warps x 16 rows = APM_ROWS = 64 query rows of one kv head: 64 / G tokens x the G heads
// sharing it (row r = token r / G, head r % G), so every K/V tile is read once for all G heads.
// The `_any_group` entry points take any G <= 64: floor(64 / G) tokens per CTA, the rows past
// them idle (zero q, never stored); the others assume G divides 64 and compile without that test.
// Grid (n_kv, ceil(m G / 64)), the y index reversed so the latest (longest) blocks start first.
// K/V tiles of 64 keys stream through a cp.async double buffer; tiles past the block's last
// position are never loaded, keys past it (or past max_seq) are zero-filled and masked. A tile
// starts at a multiple of 64 = KV_BLOCK, so it is the rows of one cache block: one table read
// per tile (a broadcast load before its cp.async pieces; the cache traffic is unchanged).
//
// Precision: K and V are f16 in the cache, so their fragments are exact. q is pre-scaled by
// log2(e)/sqrt(hd) in f32 and split q = hi + lo (hi = f16(q), lo = f16(q - hi)), two mma per
// S = Q K^T step (lo first); the probabilities p in [0, 1] are split the same way for O += P V.
// f32 accumulators, online softmax in the exp2 domain; the denominator sums the f32 p.
// The error bound and its derivation sit next to the check (verify/attention.rs, mma rows).
//
// Work and speed of light (Bonsai-8B, m = 512, pos0 = 0, 32 q heads, 8 kv heads, hd 128): causal
// QK^T + PV is 4 n_q hd m (m + 1) / 2 = 2.15 GFLOP of useful work per layer. Issued: per kv head
// 32 CTAs of 16 tokens, CTA b runs b / 4 + 1 tiles (144 CTA-tiles per kv head, 1,152 in all), each
// 4 warps x 256 HMMA.16816 (128 for S, 128 for O: the hi/lo split doubles both) x 4,096 FLOP =
// 4.8 GFLOP of mma.sync, 4.9 us at the dense f16 peak (~990 TFLOP/s). The 256 CTAs
// fit one wave (132 SMs x 2), launched longest first so each long CTA shares its SM with a short
// one; the critical path is the 8-tile CTA next to a ~4-tile one: ~12 tile-steps of ~1,700 clk
// (256 HMMA at ~6.5 clk per sub-partition) = ~20k clk = ~11 us at 1.9 GHz, plus the q staging.
// Measured against it: docs/kernel-notes.md, "Prefill attention".
// SASS (sm_90, nvcc 13.0, contiguous cache): hd128 180 registers, hd64 142, no spills; the hd128
// tile loop is 1,004 instructions per warp (256 HMMA = 25%, 80 LDSM, 32 MUFU.EX2, 8 LDGSTS), ~890
// on tiles that need neither the causal mask nor an O rescale. The paged cache adds one table load
// and its address math per tile; ptxas -v (NVRTC 13.0, sm_90a) then gives hd128 210 registers,
// hd64 156, no spills, the same CTAs per SM (shared memory limits them).
// Head_dim 256 (Bonsai 2's attention, G 6: the `_any_group` entry point, 10 tokens = 60 rows per
// CTA): the same body; its shared memory, (2 * 64 + 4 * 64) rows of 264 halves = 198 KB, leaves
// one CTA per SM (sm_90's 227 KB per CTA; sm_80's 163 KB and the 99 KB parts do not hold it and
// run attention_split_keys), and its O accumulator takes 128 registers per thread (launch bounds
// of one CTA per SM: up to 255; SASS of the contiguous cache: 254 registers, the `_any_group` one
// 255 and one 8-byte spill store and load per tile, in the next tile's staging; with the paged
// cache's staging ptxas -v gives 255 and no spill for both). At m = 512, pos0 = 0, 24 q / 4 kv
// heads: causal useful work 3.2 GFLOP; issued 4 x 52 CTAs, 964 CTA-tiles of 4 warps x 512 HMMA.16816 (256 for S, 256 for
// O) = 8.1 GFLOP of mma.sync, ~8 us at the dense f16 peak; the 208 CTAs take two waves of 132
// SMs, longest first, and the critical path is the 9-tile CTA: 9 x 512 HMMA per warp at ~8 clk
// (one warp per sub-partition) = ~37k clk = ~20 us.
#define APM_WARPS 4
#define APM_ROWS 64
#define APM_BLOCK_K 64
#define APM_PAD 8
static_assert(KV_BLOCK % APM_BLOCK_K == 0, "a K/V tile must lie in one cache block");

// The first `keys` of a tile's APM_BLOCK_K consecutive cache rows into a [APM_BLOCK_K][HD +
// APM_PAD] tile; the rows past them are zero-filled (nothing read).
template <int HD>
__device__ __forceinline__ void apm_stage_tile(u16* dst, const u16* __restrict__ tile_rows, int keys) {
    constexpr int PIECES = HD / 8;  // 16-byte pieces per row
    constexpr int THREADS = APM_WARPS * WARP_SIZE;
    constexpr int ROWS_PER_ROUND = THREADS / PIECES;
    constexpr int ROUNDS = APM_BLOCK_K / ROWS_PER_ROUND;
    static_assert(THREADS % PIECES == 0 && APM_BLOCK_K % ROWS_PER_ROUND == 0, "tile staging shape");
    const int r = threadIdx.x / PIECES, c = (threadIdx.x % PIECES) * 8;
#pragma unroll
    for (int round = 0; round < ROUNDS; ++round) {
        const int row = r + round * ROWS_PER_ROUND;
        const bool valid = row < keys;
        // An invalid piece reads nothing, but its address must still be mappable.
        cp_async16_zfill(dst + row * (HD + APM_PAD) + c, valid ? tile_rows + row * HD + c : tile_rows, valid);
    }
}

// Splits x into f16 hi + lo (hi = f16(x), lo = f16(x - hi); x - hi is exact in f32).
__device__ __forceinline__ void apm_split(float x, u16& hi, u16& lo) {
    hi = f32_to_f16(x);
    lo = f32_to_f16(x - f16_to_f32(hi));
}

#define APM_PARAMS                                                                                     \
    const float *__restrict__ qkv, int m, int n_q, int n_kv, const u32 *__restrict__ pos0_ptr, int max_seq,   \
        const u32 *__restrict__ block_table, const u16 *__restrict__ k_cache, const u16 *__restrict__ v_cache,   \
        float *__restrict__ out, float scale_log2
#define APM_ARGS qkv, m, n_q, n_kv, pos0_ptr, max_seq, block_table, k_cache, v_cache, out, scale_log2

template <int HD, bool ANY_GROUP = false>
__device__ __forceinline__ void attention_prefill_mma_body(APM_PARAMS) {
    constexpr int THREADS = APM_WARPS * WARP_SIZE;
    constexpr int STRIDE = HD + APM_PAD;      // rows stay 16-byte aligned, ldmatrix rows spread banks
    constexpr int K_STEPS = HD / 16;          // k-steps of S = Q K^T
    constexpr int S_BLOCKS = APM_BLOCK_K / 8; // 8-key column blocks of S
    constexpr int P_STEPS = APM_BLOCK_K / 16; // k-steps of O += P V
    constexpr int O_BLOCKS = HD / 8;          // 8-dim column blocks of O
    static_assert(HD % 16 == 0 && APM_ROWS == APM_WARPS * 16, "mma tile multiples");

    extern __shared__ __align__(16) u16 apm_smem[];
    u16* q_hi = apm_smem;
    u16* q_lo = q_hi + APM_ROWS * STRIDE;
    u16* k_s = q_lo + APM_ROWS * STRIDE;
    u16* v_s = k_s + 2 * APM_BLOCK_K * STRIDE;

    const int lane = threadIdx.x % WARP_SIZE;
    const int warp = threadIdx.x / WARP_SIZE;
    const int g = lane / 4, t = lane % 4;  // fragment row group and column pair (ptx.cuh)
    const int kv_head = blockIdx.x;
    const int block = gridDim.y - 1 - blockIdx.y;  // longest blocks first
    const int group = n_q / n_kv;
    const int tokens_per_cta = APM_ROWS / group;
    const int used_rows = tokens_per_cta * group;  // rows past it idle (ANY_GROUP only)
    const int token0 = block * tokens_per_cta;
    const long long pos0 = pos0_ptr[0];
    const int last_token = min(m, token0 + tokens_per_cta) - 1;
    const long long cta_min_pos = pos0 + token0;
    const long long cta_max_pos = pos0 + last_token;
    const int key_end = (int)min((long long)max_seq, cta_max_pos + 1);  // >= 1
    const int n_tiles = (key_end + APM_BLOCK_K - 1) / APM_BLOCK_K;
    // K and V tile `tile` (< n_tiles: its first key is below key_end, a live position whose table
    // entry is valid) into the buffers at k_dst, v_dst.
    auto stage_tiles = [&](int tile, u16* k_dst, u16* v_dst) {
        const int key0 = tile * APM_BLOCK_K;
        const long long rows = kv_row(block_table, n_kv, kv_head, key0, HD);
        apm_stage_tile<HD>(k_dst, k_cache + rows, key_end - key0);
        apm_stage_tile<HD>(v_dst, v_cache + rows, key_end - key0);
        cp_async_commit();
    };
    stage_tiles(0, k_s, v_s);

    // Q, pre-scaled into log2 units and split, while tile 0 is in flight. Idle rows (token >= m)
    // stage zeros.
    const long long qkv_row = (long long)(n_q + 2 * n_kv) * HD;
    constexpr int QUADS = HD / 4;
    for (int i = threadIdx.x; i < APM_ROWS * QUADS; i += THREADS) {
        const int r = i / QUADS, d = (i % QUADS) * 4;
        const int token = token0 + r / group;
        const int head = kv_head * group + r % group;
        float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (token < m && (!ANY_GROUP || r < used_rows))
            x = *reinterpret_cast<const float4*>(qkv + token * qkv_row + (long long)head * HD + d);
        u16 h0, h1, h2, h3, l0, l1, l2, l3;
        apm_split(x.x * scale_log2, h0, l0);
        apm_split(x.y * scale_log2, h1, l1);
        apm_split(x.z * scale_log2, h2, l2);
        apm_split(x.w * scale_log2, h3, l3);
        *reinterpret_cast<uint2*>(q_hi + r * STRIDE + d) = make_uint2(pack_b16(h0, h1), pack_b16(h2, h3));
        *reinterpret_cast<uint2*>(q_lo + r * STRIDE + d) = make_uint2(pack_b16(l0, l1), pack_b16(l2, l3));
    }

    // Positions of this thread's rows g and g + 8 of the warp's 16; an idle row takes the CTA's
    // last position, so key 0 is visible to every row and no running max stays -inf past tile 0.
    long long row_pos[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int row = warp * 16 + g + 8 * r;
        const int token = token0 + row / group;
        row_pos[r] = token < m && (!ANY_GROUP || row < used_rows) ? pos0 + token : cta_max_pos;
    }

    int a_offset, k_offset, v_offset;
    flash_ldsm_offsets<STRIDE, STRIDE, 16>(a_offset, k_offset, v_offset);

    // Rows g and g + 8: running max (log2 units) and this thread's partial sum of its columns' p.
    float o[O_BLOCKS][4], row_max[2], row_sum[2];
    flash_init_rows(o, row_max, row_sum);

    for (int tile = 0; tile < n_tiles; ++tile) {
        const int buf = tile & 1;
        if (flash_tile_ready(tile, n_tiles)) {  // (at tile 0 the barrier also makes Q visible)
            const int next = buf ^ 1;
            stage_tiles(tile + 1, k_s + next * APM_BLOCK_K * STRIDE, v_s + next * APM_BLOCK_K * STRIDE);
        }

        const u16* k_tile = k_s + buf * APM_BLOCK_K * STRIDE;
        float s[S_BLOCKS][4];
        zero_fill(s);
#pragma unroll
        for (int kk = 0; kk < K_STEPS; ++kk) {
            u32 a_hi[4], a_lo[4];
            ldmatrix_x4(a_hi, q_hi + a_offset + kk * 16);
            ldmatrix_x4(a_lo, q_lo + a_offset + kk * 16);
#pragma unroll
            for (int pair = 0; pair < S_BLOCKS / 2; ++pair) {
                u32 b[4];
                ldmatrix_x4(b, k_tile + k_offset + pair * 16 * STRIDE + kk * 16);
                mma_f16_16x8x16(s[2 * pair], a_lo, b[0], b[1]);
                mma_f16_16x8x16(s[2 * pair], a_hi, b[0], b[1]);
                mma_f16_16x8x16(s[2 * pair + 1], a_lo, b[2], b[3]);
                mma_f16_16x8x16(s[2 * pair + 1], a_hi, b[2], b[3]);
            }
        }

        const int key0 = tile * APM_BLOCK_K;
        if (key0 + APM_BLOCK_K - 1 > cta_min_pos) {  // some key of the tile is past some row's position
#pragma unroll
            for (int j = 0; j < S_BLOCKS; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int key = key0 + 8 * j + 2 * t + (e % 2);
                    if ((long long)key > row_pos[e / 2]) s[j][e] = neg_inf();
                }
        }

        // Scores are in log2 units already (q pre-scaled): scale 1. The new maxima are finite:
        // key 0 is in tile 0 and visible to every row.
        float correction[2], max_scaled[2];
        flash_online_max(s, row_max, row_sum, correction, max_scaled, 1.0f);
        u32 p_hi[P_STEPS][4], p_lo[P_STEPS][4];
#pragma unroll
        for (int j = 0; j < S_BLOCKS; ++j) {
            u16 hi[4], lo[4];
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const float p = exp2_ftz(s[j][e] - row_max[e / 2]);
                row_sum[e / 2] += p;
                apm_split(p, hi[e], lo[e]);
            }
            // S block j holds keys 8j..8j+7: the low (j even) or high (j odd) half of the A
            // fragment of P-V k-step j / 2.
            p_hi[j / 2][(j % 2) * 2 + 0] = pack_b16(hi[0], hi[1]);
            p_hi[j / 2][(j % 2) * 2 + 1] = pack_b16(hi[2], hi[3]);
            p_lo[j / 2][(j % 2) * 2 + 0] = pack_b16(lo[0], lo[1]);
            p_lo[j / 2][(j % 2) * 2 + 1] = pack_b16(lo[2], lo[3]);
        }
        // Skip the O rescale (exact: the factor is 1) unless some row's max moved.
        flash_rescale_rows(o, correction);

        const u16* v_tile = v_s + buf * APM_BLOCK_K * STRIDE;
#pragma unroll
        for (int kc = 0; kc < P_STEPS; ++kc) {
#pragma unroll
            for (int pair = 0; pair < O_BLOCKS / 2; ++pair) {
                u32 b[4];
                ldmatrix_x4_trans(b, v_tile + v_offset + kc * 16 * STRIDE + pair * 16);
                mma_f16_16x8x16(o[2 * pair], p_lo[kc], b[0], b[1]);
                mma_f16_16x8x16(o[2 * pair], p_hi[kc], b[0], b[1]);
                mma_f16_16x8x16(o[2 * pair + 1], p_lo[kc], b[2], b[3]);
                mma_f16_16x8x16(o[2 * pair + 1], p_hi[kc], b[2], b[3]);
            }
        }
    }

#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const float total = quad_sum(row_sum[r]);
        const int row = warp * 16 + g + 8 * r;
        const int token = token0 + row / group;
        if (token >= m || (ANY_GROUP && row >= used_rows)) continue;
        const int head = kv_head * group + row % group;
        const bool beyond = pos0 + token >= max_seq;
        float* dst = out + ((long long)token * n_q + head) * HD + 2 * t;
#pragma unroll
        for (int j = 0; j < O_BLOCKS; ++j) {
            float2 pair;
            pair.x = beyond ? __int_as_float(0x7fc00000) : o[j][2 * r] / total;
            pair.y = beyond ? __int_as_float(0x7fc00000) : o[j][2 * r + 1] / total;
            *reinterpret_cast<float2*>(dst + 8 * j) = pair;
        }
    }
}

// qkv [m, (n_q + 2 n_kv) hd] f32 (16-byte aligned), pos0 on the device, the block table and the
// f16 pools [blocks][n_kv][KV_BLOCK][hd] (16-byte aligned), out [m, n_q hd] f32, scale_log2 =
// log2(e) / sqrt(hd).
// Dynamic shared memory: (2 APM_ROWS + 4 APM_BLOCK_K) (hd + APM_PAD) u16. No early
// griddep_launch_dependents(): prefill grids are multi-wave (see attention.cu).
extern "C" __global__ void __launch_bounds__(APM_WARPS * WARP_SIZE, 2) attention_prefill_mma_hd64(APM_PARAMS) {
    griddep_wait();
    attention_prefill_mma_body<64>(APM_ARGS);
}
extern "C" __global__ void __launch_bounds__(APM_WARPS * WARP_SIZE, 2) attention_prefill_mma_hd128(APM_PARAMS) {
    griddep_wait();
    attention_prefill_mma_body<128>(APM_ARGS);
}
// Any GQA group up to 64 (floor(64 / G) tokens per CTA, idle rows past them); same arguments and
// shared memory as the entry points above.
extern "C" __global__ void __launch_bounds__(APM_WARPS * WARP_SIZE, 2)
    attention_prefill_mma_hd64_any_group(APM_PARAMS) {
    griddep_wait();
    attention_prefill_mma_body<64, true>(APM_ARGS);
}
extern "C" __global__ void __launch_bounds__(APM_WARPS * WARP_SIZE, 2)
    attention_prefill_mma_hd128_any_group(APM_PARAMS) {
    griddep_wait();
    attention_prefill_mma_body<128, true>(APM_ARGS);
}
// Head_dim 256: one CTA per SM (its shared memory), so the launch bounds leave it every register.
extern "C" __global__ void __launch_bounds__(APM_WARPS * WARP_SIZE, 1) attention_prefill_mma_hd256(APM_PARAMS) {
    griddep_wait();
    attention_prefill_mma_body<256>(APM_ARGS);
}
extern "C" __global__ void __launch_bounds__(APM_WARPS * WARP_SIZE, 1)
    attention_prefill_mma_hd256_any_group(APM_PARAMS) {
    griddep_wait();
    attention_prefill_mma_body<256, true>(APM_ARGS);
}

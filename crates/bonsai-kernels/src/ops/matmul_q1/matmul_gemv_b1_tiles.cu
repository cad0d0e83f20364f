// The one-token binary GEMV for matrices of many waves (the LM head: 9,480 tiles of 16 rows):
// `gemv_b1_tiles`, one CTA per SM, each warp streaming whole tiles one after another with its
// register ring running on across tile boundaries. Why: the plain `gemv_b1` gives each warp one
// tile (8 units at K = 4096) and each CTA 16 tiles, so the LM head is 593 CTAs in 4.5 waves, and
// every CTA pays the planes copy, its barrier and the ring's first DRAM round trip for 8 units of
// work (docs/kernel-notes.md, "The LM head: `gemv_b1_tiles`").
//
// Same arithmetic as gemv_b1 with one K split (b1_unit_sums / b1_unit_finish in unit order, the
// quad swap, then 0 + acc times 1 / rms as gemv_store_outputs does), so y is bit-identical to
// gemv_b1's (verify `gemv_b1_tiles`, tolerance 0). Store epilogue only; all of x's planes staged
// once (the launcher uses it only when they fit: chunk_groups == groups).
//
// Speed of light: the weights at 4.8 TB/s, 85 MB -> 18 us for the Bonsai-8B LM head. Faster
// than the plain GEMV in the decode trace, still far from that: the loop's issue rate, not DRAM,
// is the limit, as for every binary GEMV (docs/kernel-notes.md, "The decode GEMV (binary tensor
// core)" and "The LM head: `gemv_b1_tiles`").
template <int BITS, int NB>
__device__ __forceinline__ void gemv_b1_tiles_body(const u16* __restrict__ scales, const u32* __restrict__ payload,
                                                   const u32* planes, const u32* gsx_all, const float* group_sq,
                                                   float* __restrict__ y, int n_out, int k, int norm,
                                                   float norm_eps) {
    constexpr int AHEAD = TC_AHEAD(BITS);
    constexpr int UNIT_WORDS = NB * LAYOUT_LANES * BITS;
    constexpr int PAIRS = (NB + 1) / 2;
    extern __shared__ uint4 b1_smem[];
    const int groups_per_row = k / GROUP_SIZE, units = groups_per_row / NB;
    const int lane = threadIdx.x % WARP_SIZE, warps = blockDim.x / WARP_SIZE;
    const int g = lane / 4, t = lane % 4;
    const int tiles = (n_out + TC_TILE_ROWS - 1) / TC_TILE_ROWS;
    // Warp gw of `stride` takes tiles gw, gw + stride, ...: its work is a run of `total` units.
    const int stride = gridDim.x * warps, first_tile = blockIdx.x * warps + threadIdx.x / WARP_SIZE;
    const int total = first_tile < tiles ? ((tiles - 1 - first_tile) / stride + 1) * units : 0;
    u32* xb = reinterpret_cast<u32*>(b1_smem);
    u32* gsx = xb + groups_per_row * B1_GROUP_WORDS;
    u32 top;
    int lane_shift;
    b1_lane_plane_weights<BITS>(t, top, lane_shift);

    // The loader's position: tile `load_tile`, unit `load_unit`, and its pointers.
    int load_tile = first_tile, load_unit = 0;
    const u32* wnext[2];
    const u16* snext[2];
    auto point_at = [&](int tile) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = tc_weight_row<MATMUL_STORE>(tile, g + 8 * h, n_out);
            wnext[h] = layout_row<BITS>(payload, row, groups_per_row) + t * NB * BITS;
            snext[h] = scales + (long long)row * groups_per_row;
        }
    };
    auto advance = [&]() {
#pragma unroll
        for (int h = 0; h < 2; ++h) { wnext[h] += UNIT_WORDS; snext[h] += NB; }
        if (++load_unit == units) {
            load_unit = 0;
            load_tile += stride;
            if (load_tile < tiles) point_at(load_tile);
        }
    };
    if (total > 0) point_at(first_tile);
    TcUnit<BITS, NB> ring[AHEAD + 1];
    int loaded = 0;
#pragma unroll
    for (int a = 0; a <= AHEAD; ++a) {
        if (loaded < total) {
            tc_load(ring[a], wnext, snext);
            advance();
        }
        ++loaded;
    }

    // Weights never change: the ring fills before the wait for the prepare (programmatic
    // dependent launch); the planes are the dependent data.
    griddep_wait();
    const uint4* src = reinterpret_cast<const uint4*>(planes);
    for (int i = threadIdx.x; i < groups_per_row * B1_GROUP_WORDS / 4; i += blockDim.x) cp_async16(b1_smem + i, src + i);
    for (int i = threadIdx.x; i < 2 * groups_per_row; i += blockDim.x) cp_async4(gsx + i, gsx_all + i);
    cp_async_commit();
    // The fused RMSNorm's 1 / rms, every warp with gemv_b1's sum (there its warp 0's; the other
    // warps' zero slots leave that sum unchanged in gemv_store_outputs).
    const float inv_rms = norm ? rsqrtf(b1_norm_sum_sq(group_sq, groups_per_row, lane) / (float)k + norm_eps) : 1.0f;
    cp_async_wait<0>();
    __syncthreads();

    float acc = 0.0f;
    int tile = first_tile, unit = 0, phase = 0;
    for (int q = 0; q < total; ++q) {
        const int gl0 = unit * NB;
        u32 sums[PAIRS][2][2];
        float d[PAIRS][2];
        b1_ring_unit_sums<BITS, NB, AHEAD>(ring, phase, xb + gl0 * B1_GROUP_WORDS + lane * B1_WORDS, top, lane_shift, t,
                                           sums, d, [&](TcUnit<BITS, NB>& r) {
                                               if (loaded < total) {
                                                   tc_load(r, wnext, snext);
                                                   advance();
                                               }
                                           });
        ++loaded;
        acc = b1_unit_finish<NB>(sums, d, gsx + 2 * gl0, t, acc);
        phase = phase == AHEAD ? 0 : phase + 1;
        if (++unit == units) {  // the tile is done: lanes t < 2 hold rows g + 8 t
            acc += __shfl_xor_sync(FULL_MASK, acc, 2);
            const int o = tile * TC_TILE_ROWS + g + 8 * t;
            if (t < 2 && o < n_out) {
                float v = 0.0f + acc;  // gemv_store_outputs' sum over the one split
                if (norm) v *= inv_rms;
                y[o] = v;
            }
            acc = 0.0f;
            unit = 0;
            tile += stride;
        }
    }
}

#define DEFINE_B1_TILES_ENTRY_POINT(PREFIX, BITS)                                                 \
    extern "C" __global__ void __launch_bounds__(B1_MAX_THREADS)                                  \
        PREFIX##_gemv_b1_tiles(const u16* scales, const u32* payload, const u32* planes,          \
                               const u32* gsx, const float* group_sq, float* y, int n_out, int k, \
                               int norm, float norm_eps) {                                        \
        griddep_launch_dependents(); /* griddep_wait: in the body, after the ring's first loads */ \
        if (layout_block_groups(k / GROUP_SIZE) == LAYOUT_BLOCK_GROUPS)                           \
            gemv_b1_tiles_body<BITS, LAYOUT_BLOCK_GROUPS>(scales, payload, planes, gsx, group_sq, y, \
                                                          n_out, k, norm, norm_eps);              \
        else                                                                                      \
            gemv_b1_tiles_body<BITS, 1>(scales, payload, planes, gsx, group_sq, y, n_out, k, norm, \
                                        norm_eps);                                                \
    }
DEFINE_B1_TILES_ENTRY_POINT(matmul_q1, 1)
DEFINE_B1_TILES_ENTRY_POINT(matmul_q2, 2)

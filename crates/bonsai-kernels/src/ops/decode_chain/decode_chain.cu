// The persistent decode chain: one launch runs, for one token, everything of a layer after its
// attention and the next layer's qkv projection:
//
//   A  x += Wo . attn                  (gemv_b1 on the planes the decode attention wrote)
//   B  planes of x * ffn_norm          (b1_prepare_group, a warp per 128-group)
//   C  ffn = swiglu(Wgate|up . xn)     (gemv_b1, the RMSNorm's 1 / rms from B's sums of squares)
//   D  planes of ffn
//   E  x += Wdown . ffn
//   F  planes of x * next attn_norm    (only when a next layer follows)
//   G  qkv = Wqkv . xn                 (the next layer's, idem)
//
// Why (docs/kernel-notes.md, round 9): a decode step of Bonsai-8B was ~10 launches per layer and
// each launch boundary costs 2-4 us of launch, ramp, drain and flush, more than the ~7 us the
// layer's 27 MB take at copy speed. Here the stages are separated by grid barriers instead
// (scripts/lab/persistent_chain.cu measured ~1 us per barrier on the H200, 132 CTAs), so a layer
// is 3 launches (qk_norm_rope_kv_write, attention, this) instead of ~10.
//
// Every stage is the same device code as the separate kernels (gemv_b1_body with the GEMV's own
// launch geometry, looped over its CTAs; b1_prepare_group), in the same order per output, so the
// chain's results are bit-identical to attention + matmul + rms_norm_gate_up_swiglu + matmul +
// rms_norm_matmul with the binary GEMV (verify: decode_chain rows).
//
// The grid must be co-resident (a cooperative launch; the launcher sizes it at most one CTA per
// SM). `counters[0]` counts barrier arrivals and `counters[1]` finished CTAs; both are zero at
// launch, and the last CTA to finish zeroes them for the next launch (no CTA still spins by then).
//
// L2 prefetch (`prefetch` mode): weights do not depend on the token, so before a stage's barrier
// every CTA can ask L2 for its slice of a later GEMV's rows (cp.async.bulk.prefetch.L2): DRAM
// keeps streaming while the chain waits at barriers. 0: off (the default: on the H200 mode 1 cost
// 7% of Bonsai-8B decode speed and mode 2 9%); 1: one GEMV ahead; 2: all four GEMVs' slices at
// launch (27 MB for Bonsai-8B, within the H200's 50 MB L2).

#define CHAIN_THREADS B1_MAX_THREADS
#define CHAIN_O 0
#define CHAIN_GATE_UP 1
#define CHAIN_DOWN 2
#define CHAIN_QKV 3
#define CHAIN_GEMVS 4
#define CHAIN_ATTN_PLANES 0
#define CHAIN_HIDDEN_PLANES 1
#define CHAIN_FFN_PLANES 2
#define CHAIN_PLANE_SETS 3
// Largest single bulk prefetch request.
#define CHAIN_PREFETCH_CHUNK (64 * 1024)

// Kernel parameter block (mirrored by `ChainParams` in ops/decode_chain/cuda.rs: same order, all
// pointers first).
struct ChainParams {
    const u16* scales[CHAIN_GEMVS];
    const u32* payload[CHAIN_GEMVS];
    u32* planes[CHAIN_PLANE_SETS];
    u32* gsx[CHAIN_PLANE_SETS];
    float* group_sq[CHAIN_PLANE_SETS];
    float* x;
    float* ffn;
    float* qkv;
    const float* ffn_norm;
    const float* next_attn_norm;
    unsigned* counters;
    int n_out[CHAIN_GEMVS];
    int k[CHAIN_GEMVS];
    int tiles_per_cta[CHAIN_GEMVS];
    int splits[CHAIN_GEMVS];
    int chunk_groups[CHAIN_GEMVS];
    int ctas[CHAIN_GEMVS];  // 0 for the qkv stage when no layer follows
    float eps;
    int prefetch;
    int stages;  // run stages [0, stages) of A..G (a bench knob; the launcher passes all of them)
};

// Asks L2 for the weight rows CTA `cta` of GEMV `i` reads (its tiles' payload and scales; for
// SwiGLU the gate rows and the matching up rows).
template <int BITS, int MODE>
__device__ __forceinline__ void chain_prefetch_cta(const ChainParams& p, int i, int cta) {
    const int outs = MODE == MATMUL_SWIGLU ? TC_TILE_ROWS / 2 : TC_TILE_ROWS;
    const int first = cta * p.tiles_per_cta[i] * outs;
    const int rows = min(p.tiles_per_cta[i] * outs, p.n_out[i] - first);
    if (rows <= 0) return;
    const int groups = p.k[i] / GROUP_SIZE;
    const long long row_bytes = (long long)groups * LAYOUT_LANES * BITS * 4, scale_bytes = (long long)groups * 2;
    for (int half = 0; half < (MODE == MATMUL_SWIGLU ? 2 : 1); ++half) {
        const long long row = first + (long long)half * p.n_out[i];
        const char* w = reinterpret_cast<const char*>(p.payload[i]) + row * row_bytes;
        const char* s = reinterpret_cast<const char*>(p.scales[i]) + row * scale_bytes;
        const long long wb = rows * row_bytes, sb = rows * scale_bytes;  // multiples of 16 (see cuda.rs)
        // The bulk prefetch needs 16-byte aligned starts and sizes: payload rows always are
        // (K / 8 * BITS bytes, K a multiple of 128); scales only where the row count allows.
        for (long long off = (long long)threadIdx.x * CHAIN_PREFETCH_CHUNK; off < wb; off += (long long)blockDim.x * CHAIN_PREFETCH_CHUNK)
            prefetch_l2_bulk(w + off, (unsigned)min((long long)CHAIN_PREFETCH_CHUNK, wb - off));
        if (threadIdx.x == 0 && sb >= 16 && reinterpret_cast<unsigned long long>(s) % 16 == 0)
            prefetch_l2_bulk(s, (unsigned)(sb / 16 * 16));
    }
}

template <int BITS, int MODE>
__device__ __forceinline__ void chain_prefetch(const ChainParams& p, int i) {
    for (int cta = blockIdx.x; cta < p.ctas[i]; cta += gridDim.x) chain_prefetch_cta<BITS, MODE>(p, i, cta);
}

// GEMV `i` of the chain on plane set `src` into y: every CTA of its own launch geometry, looped.
template <int BITS, int MODE>
__device__ __forceinline__ void chain_gemv(const ChainParams& p, int i, int src, float* y, int norm) {
    for (int cta = blockIdx.x; cta < p.ctas[i]; cta += gridDim.x) {
        gemv_b1<BITS, MODE, B1NoOut>(p.scales[i], p.payload[i], p.planes[src], p.gsx[src], p.group_sq[src], y,
                                     p.n_out[i], p.k[i], p.tiles_per_cta[i], p.splits[i], p.chunk_groups[i], norm,
                                     p.eps, cta, B1NoOut{});
        __syncthreads();  // the next iteration's start rewrites shared memory the epilogue reads
    }
}

// x (k floats, times norm_w when given) -> plane set `dst`: a warp per 128-group over the grid.
__device__ __forceinline__ void chain_prepare(const ChainParams& p, const float* x, const float* norm_w, int k, int dst) {
    const int warps = gridDim.x * (blockDim.x / WARP_SIZE);
    for (int g = blockIdx.x * (blockDim.x / WARP_SIZE) + threadIdx.x / WARP_SIZE; g < k / GROUP_SIZE; g += warps) {
        const long long first = (long long)g * GROUP_SIZE;
        b1_prepare_group(x + first, norm_w != nullptr ? norm_w + first : nullptr, p.planes[dst] + (long long)g * B1_GROUP_WORDS,
                         p.gsx[dst] + 2 * g, p.group_sq[dst] + g);
    }
}

template <int BITS>
__device__ __forceinline__ void decode_chain(const ChainParams& p) {
    const bool next = p.ctas[CHAIN_QKV] > 0;
    unsigned barriers = 0;
    const unsigned ctas = gridDim.x;
    if (p.prefetch == 2) {
        chain_prefetch<BITS, MATMUL_ADD>(p, CHAIN_O);
        chain_prefetch<BITS, MATMUL_SWIGLU>(p, CHAIN_GATE_UP);
        chain_prefetch<BITS, MATMUL_ADD>(p, CHAIN_DOWN);
        if (next) chain_prefetch<BITS, MATMUL_STORE>(p, CHAIN_QKV);
    } else if (p.prefetch == 1) {
        chain_prefetch<BITS, MATMUL_ADD>(p, CHAIN_O);
        chain_prefetch<BITS, MATMUL_SWIGLU>(p, CHAIN_GATE_UP);
    }
    // Stage s runs when s < p.stages (uniform over the grid, so every CTA meets the same barriers).
    // A (its gemv_b1_body waits for the attention launch after its first weight loads).
    if (p.stages > 0) chain_gemv<BITS, MATMUL_ADD>(p, CHAIN_O, CHAIN_ATTN_PLANES, p.x, 0);
    if (p.prefetch == 1) chain_prefetch<BITS, MATMUL_ADD>(p, CHAIN_DOWN);
    // B, C
    if (p.stages > 1) {
        grid_sync(p.counters, ++barriers * ctas);
        chain_prepare(p, p.x, p.ffn_norm, p.k[CHAIN_GATE_UP], CHAIN_HIDDEN_PLANES);
    }
    if (p.stages > 2) {
        grid_sync(p.counters, ++barriers * ctas);
        chain_gemv<BITS, MATMUL_SWIGLU>(p, CHAIN_GATE_UP, CHAIN_HIDDEN_PLANES, p.ffn, 1);
    }
    if (p.prefetch == 1 && next) chain_prefetch<BITS, MATMUL_STORE>(p, CHAIN_QKV);
    // D, E
    if (p.stages > 3) {
        grid_sync(p.counters, ++barriers * ctas);
        chain_prepare(p, p.ffn, nullptr, p.k[CHAIN_DOWN], CHAIN_FFN_PLANES);
    }
    if (p.stages > 4) {
        grid_sync(p.counters, ++barriers * ctas);
        chain_gemv<BITS, MATMUL_ADD>(p, CHAIN_DOWN, CHAIN_FFN_PLANES, p.x, 0);
    }
    // F, G
    if (next && p.stages > 5) {
        grid_sync(p.counters, ++barriers * ctas);
        chain_prepare(p, p.x, p.next_attn_norm, p.k[CHAIN_QKV], CHAIN_HIDDEN_PLANES);
    }
    if (next && p.stages > 6) {
        grid_sync(p.counters, ++barriers * ctas);
        chain_gemv<BITS, MATMUL_STORE>(p, CHAIN_QKV, CHAIN_HIDDEN_PLANES, p.qkv, 1);
    }
    // The last CTA out resets both counters: every other CTA has passed its last barrier.
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        if (atomicAdd(&p.counters[1], 1u) == ctas - 1) {
            p.counters[0] = 0;
            p.counters[1] = 0;
        }
    }
}

// No griddep_launch_dependents: the next kernel must not take SM resources before this grid is
// done (its CTAs would sit in griddep_wait; the chain's own grid is already resident anyway).
extern "C" __global__ void __launch_bounds__(CHAIN_THREADS, 1) decode_chain_q1(const ChainParams p) {
    decode_chain<1>(p);
}
extern "C" __global__ void __launch_bounds__(CHAIN_THREADS, 1) decode_chain_q2(const ChainParams p) {
    decode_chain<2>(p);
}

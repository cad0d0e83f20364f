// 1-bit matmul entry points, and the macro every quantized matmul file instantiates. The kernel
// templates are in matmul_gemv_tc.cu + matmul_gemv_b1.cu (decode) and matmul_gemm.cu + matmul_gemm_f16.cu (prefill),
// concatenated before.

// Entry points. `n_out` is N for plain/add and F (features) for SwiGLU; y is [m, n_out].
// gemv_b1: one token on the binary tensor core (matmul_gemv_b1.cu, the default; x's planes from
// gemv_b1_prepare); gemv_tc: one token (3 B columns; Q2 matrices with code 3). Both take an
// optional RMSNorm of x (norm_w non-null: x * rsqrt(mean(x^2) + eps) * norm_w). gemv_b1_t2 / t4 /
// t8: 2..8 tokens on gemv_b1's weight stream; gemm_small: 2..32 tokens (matmul_gemm_small.cu); the
// GEMMs past that.
// The prefill GEMMs (many waves of CTAs) do not trigger their dependents early: with
// programmatic dependent launch the next kernel's CTAs would sit in griddep_wait on SMs the
// GEMM's later waves need (prefill measured slower that way: docs/kernel-notes.md, "Outside the
// layers: host loop, step ends, PDL"); they trigger at exit.
// The parameters every one-token binary GEMV entry point starts with (the launcher's argument
// order: cuda_b1.rs); the epilogue variants add their block after them.
#define GEMV_B1_ENTRY_PARAMS                                                                     \
    const u16 *scales, const u32 *payload, const u32 *planes, const u32 *gsx, const float *group_sq, \
        float *y, int n_out, int k, int tiles_per_cta, int splits, int chunk_groups, int norm, float norm_eps
// The second matrix of a pair launch (two Store matmuls of one K on the same input, a mixer's
// projections: `_gemv_b1_pair` on one token's planes, `_gemm_wgmma*_pair` on a prefill's f16
// rows): CTAs whose blockIdx.x is `first_ctas` or more run this matrix, as CTA blockIdx.x -
// first_ctas of its own launch. Mirrored by `PairArgs` in ops/matmul_q1/cuda_b1.rs.
struct PairSecond {
    const u16* scales;
    const u32* payload;
    float* y;
    int n_out;
    int first_ctas;
};
#define DEFINE_MATMUL_ENTRY_POINTS(PREFIX, BITS, MODE)                                           \
    extern "C" __global__ void __launch_bounds__(TC_MAX_THREADS_M1)                              \
        PREFIX##_gemv_tc(const u16* scales, const u32* payload, const float* x, int m, float* y, \
                         int n_out, int k, int tiles_per_cta, int splits, int chunk_groups,      \
                         const float* norm_w, float norm_eps) {                                  \
        griddep_launch_dependents(); /* griddep_wait: in gemv_tc_body, after the weight prefetch */ \
        gemv_tc<BITS, MODE>(scales, payload, x, m, y, n_out, k, tiles_per_cta, splits,           \
                            chunk_groups, norm_w, norm_eps);                                     \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(B1_MAX_THREADS)                                 \
        PREFIX##_gemv_b1(GEMV_B1_ENTRY_PARAMS) {                                                 \
        griddep_launch_dependents(); /* griddep_wait: in gemv_b1_body, after the weight prefetch */ \
        gemv_b1<BITS, MODE, B1NoOut>(scales, payload, planes, gsx, group_sq, y, n_out, k,         \
                                     tiles_per_cta, splits, chunk_groups, norm, norm_eps,        \
                                     blockIdx.x, B1NoOut{});                                      \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(B1_MAX_THREADS)                                 \
        PREFIX##_gemv_b1_out(GEMV_B1_ENTRY_PARAMS, const B1PlanesOut planes_out) {               \
        griddep_launch_dependents(); /* griddep_wait: in gemv_b1_body, after the weight prefetch */ \
        gemv_b1<BITS, MODE, B1PlanesOut>(scales, payload, planes, gsx, group_sq, y, n_out, k,     \
                                  tiles_per_cta, splits, chunk_groups, norm, norm_eps,           \
                                  blockIdx.x, planes_out);                                        \
    }                                                                                            \
    /* 2, 3..4 and 5..8 tokens on the one-token weight stream (gemv_b1_body, TOKENS) */               \
    extern "C" __global__ void __launch_bounds__(B1_MAX_THREADS)                                 \
        PREFIX##_gemv_b1_t2(GEMV_B1_ENTRY_PARAMS, int m) {                                       \
        griddep_launch_dependents(); /* griddep_wait: in gemv_b1_body, after the weight prefetch */ \
        gemv_b1<BITS, MODE, B1NoOut, 2>(scales, payload, planes, gsx, group_sq, y, n_out, k,      \
                                        tiles_per_cta, splits, chunk_groups, norm, norm_eps,     \
                                        blockIdx.x, B1NoOut{}, m);                                \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(B1_MAX_THREADS)                                 \
        PREFIX##_gemv_b1_t4(GEMV_B1_ENTRY_PARAMS, int m) {                                       \
        griddep_launch_dependents(); /* griddep_wait: in gemv_b1_body, after the weight prefetch */ \
        gemv_b1<BITS, MODE, B1NoOut, 4>(scales, payload, planes, gsx, group_sq, y, n_out, k,      \
                                        tiles_per_cta, splits, chunk_groups, norm, norm_eps,     \
                                        blockIdx.x, B1NoOut{}, m);                                \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(B1_MAX_THREADS)                                 \
        PREFIX##_gemv_b1_t8(GEMV_B1_ENTRY_PARAMS, int m) {                                       \
        griddep_launch_dependents(); /* griddep_wait: in gemv_b1_body, after the weight prefetch */ \
        gemv_b1<BITS, MODE, B1NoOut, 8>(scales, payload, planes, gsx, group_sq, y, n_out, k,      \
                                        tiles_per_cta, splits, chunk_groups, norm, norm_eps,     \
                                        blockIdx.x, B1NoOut{}, m);                                \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(B1_MAX_THREADS)                                 \
        PREFIX##_gemv_b1_t2_out(GEMV_B1_ENTRY_PARAMS, int m, const B1PlanesOut planes_out) {     \
        griddep_launch_dependents(); /* griddep_wait: in gemv_b1_body, after the weight prefetch */ \
        gemv_b1<BITS, MODE, B1PlanesOut, 2>(scales, payload, planes, gsx, group_sq, y, n_out, k, \
                                             tiles_per_cta, splits, chunk_groups, norm, norm_eps, \
                                             blockIdx.x, planes_out, m);                          \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(B1_MAX_THREADS)                                 \
        PREFIX##_gemv_b1_t4_out(GEMV_B1_ENTRY_PARAMS, int m, const B1PlanesOut planes_out) {     \
        griddep_launch_dependents(); /* griddep_wait: in gemv_b1_body, after the weight prefetch */ \
        gemv_b1<BITS, MODE, B1PlanesOut, 4>(scales, payload, planes, gsx, group_sq, y, n_out, k, \
                                             tiles_per_cta, splits, chunk_groups, norm, norm_eps, \
                                             blockIdx.x, planes_out, m);                          \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(B1_MAX_THREADS)                                 \
        PREFIX##_gemv_b1_t8_out(GEMV_B1_ENTRY_PARAMS, int m, const B1PlanesOut planes_out) {     \
        griddep_launch_dependents(); /* griddep_wait: in gemv_b1_body, after the weight prefetch */ \
        gemv_b1<BITS, MODE, B1PlanesOut, 8>(scales, payload, planes, gsx, group_sq, y, n_out, k, \
                                             tiles_per_cta, splits, chunk_groups, norm, norm_eps, \
                                             blockIdx.x, planes_out, m);                          \
    }                                                                                            \
    /* 2..SM_MAX_TOKENS tokens (matmul_gemm_small.cu): 1, 2 or 4 n-tiles of 8 tokens */         \
    extern "C" __global__ void __launch_bounds__(SM_THREADS)                                     \
        PREFIX##_gemm_small8(const u16* scales, const u32* payload, const u16* xh,              \
                             const float* row_unscale, int m, float* y, int n_out, int k,        \
                             float* partials, unsigned* counters, int split_units) {             \
        griddep_launch_dependents(); /* griddep_wait: in gemm_small_body, after the weight prefetch */ \
        gemm_small<BITS, MODE, 1>(scales, payload, xh, row_unscale, m, y, n_out, k, partials,    \
                                  counters, split_units);                                        \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(SM_THREADS)                                     \
        PREFIX##_gemm_small16(const u16* scales, const u32* payload, const u16* xh,             \
                              const float* row_unscale, int m, float* y, int n_out, int k,       \
                              float* partials, unsigned* counters, int split_units) {            \
        griddep_launch_dependents(); /* griddep_wait: in gemm_small_body, after the weight prefetch */ \
        gemm_small<BITS, MODE, 2>(scales, payload, xh, row_unscale, m, y, n_out, k, partials,    \
                                  counters, split_units);                                        \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(SM_THREADS)                                     \
        PREFIX##_gemm_small32(const u16* scales, const u32* payload, const u16* xh,             \
                              const float* row_unscale, int m, float* y, int n_out, int k,       \
                              float* partials, unsigned* counters, int split_units) {            \
        griddep_launch_dependents(); /* griddep_wait: in gemm_small_body, after the weight prefetch */ \
        gemm_small<BITS, MODE, 4>(scales, payload, xh, row_unscale, m, y, n_out, k, partials,    \
                                  counters, split_units);                                        \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(MMA_THREADS)                                    \
        PREFIX##_gemm_mma_bf16x3(const u16* scales, const u32* payload, const float* x, int m,   \
                                 float* y, int n_out, int k) {                                   \
        griddep_wait();                                                                  \
        gemm_mma_bf16x3<BITS, MODE>(scales, payload, x, m, y, n_out, k);                         \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(QG_WARPS_M * 2 * WARP_SIZE)                     \
        PREFIX##_gemm_f16_128x128(const u16* scales, const u32* payload, const u16* xh,          \
                                  const float* row_unscale, int m, float* y, int n_out, int k) { \
        griddep_wait();                                                                          \
        gemm_f16_mma<BITS, MODE, 2, false>(scales, payload, xh, row_unscale, m, y, n_out, k,     \
                                           nullptr, nullptr, 0);                                 \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(QG_WARPS_M * 2 * WARP_SIZE)                     \
        PREFIX##_gemm_f16_128x128_split(const u16* scales, const u32* payload, const u16* xh,    \
                                        const float* row_unscale, int m, float* y, int n_out,    \
                                        int k, float* partials, unsigned* tile_counters,         \
                                        int split_groups) {                                      \
        griddep_wait();                                                                          \
        gemm_f16_mma<BITS, MODE, 2, true>(scales, payload, xh, row_unscale, m, y, n_out, k,      \
                                          partials, tile_counters, split_groups);                \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(QG_WARPS_M * 4 * WARP_SIZE)                     \
        PREFIX##_gemm_f16_128x256(const u16* scales, const u32* payload, const u16* xh,          \
                                  const float* row_unscale, int m, float* y, int n_out, int k) { \
        griddep_wait();                                                                          \
        gemm_f16_mma<BITS, MODE, 4, false>(scales, payload, xh, row_unscale, m, y, n_out, k,     \
                                           nullptr, nullptr, 0);                                 \
    }                                                                                            \
    /* wgmma tiles (matmul_gemm_wgmma.cu): 256 weight rows x 128 or 64 tokens, ring stages */    \
    extern "C" __global__ void __launch_bounds__(QW_THREADS, 1)                                  \
        PREFIX##_gemm_wgmma(const u16* scales, const u32* payload, const u16* xh,                \
                       const float* row_unscale, int m, float* y, int n_out, int k) {            \
        griddep_wait();                                                                          \
        gemm_wgmma<BITS, MODE, 128, (BITS == 1 ? 6 : 5)>(scales, payload, xh, row_unscale, m, y, n_out, k); \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(QW_THREADS, 1)                                  \
        PREFIX##_gemm_wgmma_n64(const u16* scales, const u32* payload, const u16* xh,            \
                       const float* row_unscale, int m, float* y, int n_out, int k) {            \
        griddep_wait();                                                                          \
        gemm_wgmma<BITS, MODE, 64, 8>(scales, payload, xh, row_unscale, m, y, n_out, k);         \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(QW_THREADS, 1)                                  \
        PREFIX##_gemm_wgmma_n64_split(const u16* scales, const u32* payload, const u16* xh,      \
                       const float* row_unscale, int m, float* y, int n_out, int k,              \
                       float* partials, unsigned* tile_counters, int split_groups,               \
                       int row_tiles, int tile0) {                                               \
        griddep_wait();                                                                          \
        gemm_wgmma<BITS, MODE, 64, 8, true>(scales, payload, xh, row_unscale, m, y, n_out, k,    \
                                            partials, tile_counters, split_groups, row_tiles,    \
                                            -1, tile0);                                          \
    }                                                                                            \
    /* the wide tile: 128 weight rows x 256 tokens, 2 warpgroups, 3 stages (the ring's limit) */ \
    extern "C" __global__ void __launch_bounds__(QW_WIDE_THREADS, 1)                             \
        PREFIX##_gemm_wgmma_n256(const u16* scales, const u32* payload, const u16* xh,           \
                       const float* row_unscale, int m, float* y, int n_out, int k) {            \
        griddep_wait();                                                                          \
        gemm_wgmma<BITS, MODE, 256, 3, false, QW_WIDE_WARPGROUPS>(scales, payload, xh, row_unscale, \
                                                                  m, y, n_out, k);               \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(QW_WIDE_THREADS, 1)                             \
        PREFIX##_gemm_wgmma_n256_split(const u16* scales, const u32* payload, const u16* xh,     \
                       const float* row_unscale, int m, float* y, int n_out, int k,              \
                       float* partials, unsigned* tile_counters, int split_groups,               \
                       int row_tiles, int tile0) {                                               \
        griddep_wait();                                                                          \
        gemm_wgmma<BITS, MODE, 256, 3, true, QW_WIDE_WARPGROUPS>(scales, payload, xh, row_unscale, \
                                                                 m, y, n_out, k, partials,       \
                                                                 tile_counters, split_groups,    \
                                                                 row_tiles, -1, tile0);          \
    }

DEFINE_MATMUL_ENTRY_POINTS(matmul_q1, 1, MATMUL_STORE)
DEFINE_MATMUL_ENTRY_POINTS(matmul_q1_add, 1, MATMUL_ADD)
// The decode qkv projection with qk_norm_rope_kv_write's work in its epilogue (b1_rope_epilogue
// in matmul_gemv_b1.cu): one launch per layer fewer.
// It triggers the decode attention after its epilogue, not at its start as the other GEMVs do:
// the attention's grid then launches once this one is done, its 8 CTAs (a whole SM each) taking
// the SMs this grid leaves. Triggered at the start, it launched during the previous layer's
// output projection, and half of its CTAs got SMs only as this grid's CTAs left. This epilogue with
// the late trigger beats two launches on both models (docs/kernel-notes.md, "Planes epilogues and
// the decode layer's launches", `BONSAI_QKV_ROPE=0`).
#define DEFINE_B1_ROPE_ENTRY_POINT(PREFIX, BITS)                                                 \
    extern "C" __global__ void __launch_bounds__(B1_MAX_THREADS)                                 \
        PREFIX##_gemv_b1_rope(GEMV_B1_ENTRY_PARAMS, const B1RopeOut rope_out) {                  \
        /* griddep_wait: in gemv_b1_body, after the weight prefetch */                          \
        gemv_b1<BITS, MATMUL_STORE, B1RopeOut>(scales, payload, planes, gsx, group_sq, y, n_out, k, \
                                               tiles_per_cta, splits, chunk_groups, norm,        \
                                               norm_eps, blockIdx.x, rope_out);                  \
        griddep_launch_dependents(); /* after the epilogue: see above */                         \
    }
DEFINE_B1_ROPE_ENTRY_POINT(matmul_q1, 1)
// Two Store GEMVs of one K on the same planes in one launch (a mixer's projections: qkv and z,
// or q and its gate): the first matrix's CTAs, then the second's (PairSecond), each CTA computing
// what the same CTA of that matrix's own launch with this grid would (bit for bit; a matrix's own
// launch may pick other K splits, which sum in another order). One launch boundary fewer per
// layer.
#define DEFINE_B1_PAIR_ENTRY_POINT(PREFIX, BITS)                                                 \
    extern "C" __global__ void __launch_bounds__(B1_MAX_THREADS)                                 \
        PREFIX##_gemv_b1_pair(GEMV_B1_ENTRY_PARAMS, const PairSecond second) {                     \
        griddep_launch_dependents(); /* griddep_wait: in gemv_b1_body, after the weight prefetch */ \
        const bool s = (int)blockIdx.x >= second.first_ctas;                                     \
        gemv_b1<BITS, MATMUL_STORE, B1NoOut>(s ? second.scales : scales, s ? second.payload : payload, \
                                             planes, gsx, group_sq, s ? second.y : y,            \
                                             s ? second.n_out : n_out, k, tiles_per_cta, splits, \
                                             chunk_groups, norm, norm_eps,                       \
                                             s ? (int)blockIdx.x - second.first_ctas : (int)blockIdx.x, \
                                             B1NoOut{});                                         \
    }
DEFINE_B1_PAIR_ENTRY_POINT(matmul_q1, 1)
// Two Store GEMMs of one K on the same f16 rows in one launch (a mixer's projections in a
// prefill): the grid's row tiles are the first matrix's, then the second's, each CTA computing
// what the same tile of that matrix's own unsplit launch of this tile computes (bit for bit).
// Two grids of part of a wave each run as one grid of about whole waves (Bonsai 2's DeltaNet qkv
// and z at 512 tokens: 160 and 96 CTAs of the wide tile on 132 SMs, as 256 CTAs in two waves).
#define DEFINE_WGMMA_PAIR_ENTRY_POINTS(PREFIX, BITS)                                             \
    extern "C" __global__ void __launch_bounds__(QW_THREADS, 1)                                  \
        PREFIX##_gemm_wgmma_pair(const u16* scales, const u32* payload, const u16* xh,           \
                       const float* row_unscale, int m, float* y, int n_out, int k,              \
                       const PairSecond second) {                                                \
        griddep_wait();                                                                          \
        const bool s = (int)blockIdx.x >= second.first_ctas;                                     \
        gemm_wgmma<BITS, MATMUL_STORE, 128, (BITS == 1 ? 6 : 5)>(                                \
            s ? second.scales : scales, s ? second.payload : payload, xh, row_unscale, m,        \
            s ? second.y : y, s ? second.n_out : n_out, k, nullptr, nullptr, 0, 0,               \
            s ? (int)blockIdx.x - second.first_ctas : (int)blockIdx.x);                          \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(QW_WIDE_THREADS, 1)                             \
        PREFIX##_gemm_wgmma_n256_pair(const u16* scales, const u32* payload, const u16* xh,      \
                       const float* row_unscale, int m, float* y, int n_out, int k,              \
                       const PairSecond second) {                                                \
        griddep_wait();                                                                          \
        const bool s = (int)blockIdx.x >= second.first_ctas;                                     \
        gemm_wgmma<BITS, MATMUL_STORE, 256, 3, false, QW_WIDE_WARPGROUPS>(                       \
            s ? second.scales : scales, s ? second.payload : payload, xh, row_unscale, m,        \
            s ? second.y : y, s ? second.n_out : n_out, k, nullptr, nullptr, 0, 0,               \
            s ? (int)blockIdx.x - second.first_ctas : (int)blockIdx.x);                          \
    }
DEFINE_WGMMA_PAIR_ENTRY_POINTS(matmul_q1, 1)

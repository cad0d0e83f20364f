// The kernel library's own proof of life: fills `out[0..n)` with `value`. `bonsai kernels info`
// launches it after loading, so a module that loads but cannot run is caught there.
extern "C" __global__ void bonsai_selftest_fill(u32* __restrict__ out, u32 n, u32 value) {
    griddep_wait();
    griddep_launch_dependents();
    const u32 stride = gridDim.x * blockDim.x;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = value;
    }
}

// ---- ptx.cuh probe ----
// Runs every wrapper of ptx.cuh once on the caller's data (one warp, one CTA); `bonsai kernels
// verify` (check `ptx_wrappers`) compares the results with a Rust model of the documented PTX
// semantics. On the GPU that proves the wrappers' fragment layouts; on the CPU emulator, that
// the emulator implements the same ones. Layouts of the buffers: verify/ptx_wrappers.rs.
#define PROBE_CONVERSIONS 256
#define PROBE_OUT_F16 0
#define PROBE_OUT_BF16 256
#define PROBE_OUT_TF32 512
#define PROBE_OUT_F16_TO_F32 768
#define PROBE_OUT_LDMATRIX_X4 1024
#define PROBE_OUT_LDMATRIX_X4_TRANS 1152
#define PROBE_OUT_LDMATRIX_X2 1280
#define PROBE_OUT_LDMATRIX_X2_TRANS 1344
#define PROBE_OUT_MMA_BF16 1408
#define PROBE_OUT_MMA_F16 1536
#define PROBE_OUT_MMA_TF32 1664
#define PROBE_OUT_CP_ZFILL 1792
#define PROBE_OUT_CP4 1920
#define PROBE_OUT_MMA_B1 1952
// The b1 mma's fragments follow the three float kinds' in `frags` (same A / B word layout).
#define PROBE_MMA_B1_FRAGS 576
// Per mma kind in `frags`: A fragments (lane*4 + i), then B fragments (128 + lane*2 + j).
#define PROBE_FRAG_WORDS_PER_MMA 192
#define PROBE_B_FRAGS 128

__device__ __forceinline__ void probe_store(u32* out, int lane, const u32* r, int n) {
    for (int i = 0; i < n; ++i) out[lane * n + i] = r[i];
}

extern "C" __global__ void __launch_bounds__(WARP_SIZE) bonsai_ptx_probe(
    const float* __restrict__ floats, const u16* __restrict__ halves, const u32* __restrict__ frags,
    u32* __restrict__ out) {
    griddep_wait();
    griddep_launch_dependents();
    const int lane = threadIdx.x;
    for (int i = lane; i < PROBE_CONVERSIONS; i += WARP_SIZE) {
        out[PROBE_OUT_F16 + i] = f32_to_f16(floats[i]);
        out[PROBE_OUT_BF16 + i] = f32_to_bf16_rn(floats[i]);
        out[PROBE_OUT_TF32 + i] = f32_to_tf32(floats[i]);
        out[PROBE_OUT_F16_TO_F32 + i] = __float_as_uint(f16_to_f32(halves[i]));
    }

    // Four 8x8 b16 matrices, one 16-byte row per lane: lane l copies row l % 8 of matrix l / 8.
    __shared__ __align__(16) u16 tile[4 * 8 * 8];
    __shared__ __align__(16) u16 zfilled[4 * 8 * 8];
    __shared__ __align__(16) u32 words[WARP_SIZE];
    cp_async16(&tile[lane * 8], &halves[lane * 8]);
    cp_async16_zfill(&zfilled[lane * 8], &halves[lane * 8], lane % 2 == 0);  // odd lanes: zeros
    cp_async4(&words[lane], &halves[lane * 2]);
    cp_async_commit();
    cp_async_wait<0>();
    __syncwarp();

    u32 r[4];
    ldmatrix_x4(r, &tile[lane * 8]);
    probe_store(out + PROBE_OUT_LDMATRIX_X4, lane, r, 4);
    ldmatrix_x4_trans(r, &tile[lane * 8]);
    probe_store(out + PROBE_OUT_LDMATRIX_X4_TRANS, lane, r, 4);
    // x2 reads the row addresses of lanes 0..15 only; the others still pass valid ones.
    ldmatrix_x2(r, &tile[(lane % 16) * 8]);
    probe_store(out + PROBE_OUT_LDMATRIX_X2, lane, r, 2);
    ldmatrix_x2_trans(r, &tile[(lane % 16) * 8]);
    probe_store(out + PROBE_OUT_LDMATRIX_X2_TRANS, lane, r, 2);

    const float* c_in = floats + PROBE_CONVERSIONS + lane * 4;
    const int outs[3] = {PROBE_OUT_MMA_BF16, PROBE_OUT_MMA_F16, PROBE_OUT_MMA_TF32};
    for (int kind = 0; kind < 3; ++kind) {
        const u32* f = frags + kind * PROBE_FRAG_WORDS_PER_MMA;
        float c[4] = {c_in[0], c_in[1], c_in[2], c_in[3]};
        const u32 b0 = f[PROBE_B_FRAGS + lane * 2], b1 = f[PROBE_B_FRAGS + lane * 2 + 1];
        if (kind == 0) mma_bf16_16x8x16(c, f + lane * 4, b0, b1);
        if (kind == 1) mma_f16_16x8x16(c, f + lane * 4, b0, b1);
        if (kind == 2) mma_tf32_16x8x8(c, f + lane * 4, b0, b1);
        for (int i = 0; i < 4; ++i) out[outs[kind] + lane * 4 + i] = __float_as_uint(c[i]);
    }

    {
        const u32* f = frags + PROBE_MMA_B1_FRAGS;
        int c[4];
        for (int i = 0; i < 4; ++i) c[i] = lane * 4 + i - 64;  // both signs: s32 accumulators
        mma_b1_and_popc_16x8x128(c, f[lane * 4], f[lane * 4 + 1], f[PROBE_B_FRAGS + lane * 2]);
        for (int i = 0; i < 4; ++i) out[PROBE_OUT_MMA_B1 + lane * 4 + i] = (u32)c[i];
    }

    const u32* zfilled_words = reinterpret_cast<const u32*>(zfilled);
    for (int w = 0; w < 4; ++w) out[PROBE_OUT_CP_ZFILL + lane * 4 + w] = zfilled_words[lane * 4 + w];
    out[PROBE_OUT_CP4 + lane] = words[lane];
}

// ---- wgmma probe ----
// One warpgroup runs ptx.cuh's wgmma_f16_m64n128k16_rs over 4 k16 steps: d[64 x 128] = a[64 x 64]
// . b[128 x 64]^T (row-major f16 inputs), A fragments built from `a` by the documented m16n8k16
// A layout, B staged into the 128-byte-swizzled tile the wrapper documents, D stored by the
// documented layout. verify/ptx_wrappers.rs feeds small integers (exact sums) and compares
// every element, so the chip proves the layouts and the descriptor. Compute capability 9.0 only.
#define WGMMA_PROBE_K 64

// The two 16-bit probes' common parts. b [128 n][WGMMA_PROBE_K k] row-major into the
// 128-byte-swizzled K-major tile (16-byte chunk c of row n at chunk c ^ (n % 8)).
__device__ __forceinline__ void wgmma_probe_stage_b(u16* tile, const u16* __restrict__ b, int tid) {
    for (int i = tid; i < 128 * 8; i += 128) {
        const int n = i / 8, c = i % 8;  // row of b, 16-byte chunk of its 64 k
        for (int e = 0; e < 8; ++e) tile[n * 64 + ((c ^ (n & 7)) * 8) + e] = b[n * WGMMA_PROBE_K + c * 8 + e];
    }
}
// This lane's m16n8k16 A fragments (rows row, row + 8) of every k16 step of a [64][WGMMA_PROBE_K].
__device__ __forceinline__ void wgmma_probe_a_frags(u32 (&frag)[WGMMA_PROBE_K / 16][4], const u16* __restrict__ a,
                                                    int row, int t) {
    for (int s = 0; s < WGMMA_PROBE_K / 16; ++s)
        for (int i = 0; i < 4; ++i) {
            const int r = row + 8 * (i & 1), k = 16 * s + 2 * t + 8 * (i >> 1);
            frag[s][i] = pack_b16(a[r * WGMMA_PROBE_K + k], a[r * WGMMA_PROBE_K + k + 1]);
        }
}
// This lane's part of rows row, row + 8 of a 64 x 128 D by the documented layout, into d (row-major).
__device__ __forceinline__ void wgmma_probe_store_d(float* __restrict__ d, const float (&acc)[64], int row, int t) {
    for (int j = 0; j < 16; ++j)
        for (int e = 0; e < 2; ++e) {
            d[row * 128 + 8 * j + 2 * t + e] = acc[4 * j + e];
            d[(row + 8) * 128 + 8 * j + 2 * t + e] = acc[4 * j + 2 + e];
        }
}

extern "C" __global__ void __launch_bounds__(128) bonsai_wgmma_probe(const u16* __restrict__ a,
                                                                    const u16* __restrict__ b,
                                                                    float* __restrict__ d) {
    griddep_wait();
    __shared__ __align__(16) u16 tile_storage[128 * WGMMA_PROBE_K + 512];
    u16* tile = reinterpret_cast<u16*>((reinterpret_cast<unsigned long long>(tile_storage) + 1023) & ~1023ull);
    const int tid = threadIdx.x;
    wgmma_probe_stage_b(tile, b, tid);
    fence_proxy_async_smem();
    __syncthreads();
    const int warp = tid / WARP_SIZE, lane = tid % WARP_SIZE, g = lane / 4, t = lane % 4;
    const int row = 16 * warp + g;
    float acc[64];
    for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
    u32 frag[WGMMA_PROBE_K / 16][4];
    wgmma_probe_a_frags(frag, a, row, t);
    wgmma_fence();
    for (int s = 0; s < WGMMA_PROBE_K / 16; ++s) wgmma_f16_m64n128k16_rs(acc, frag[s], tile, 2 * s);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_probe_store_d(d, acc, row, t);
}

// The bf16 forms the joint attention uses, one warpgroup: d[0] = a . b^T by
// wgmma_bf16_m64n128k16_rs over 4 k16 steps, the first with accumulate = 0 onto NaN accumulators
// (so scale-d = 0 must ignore them); d[1] = a . v by wgmma_bf16_m64n128k16_rs_mn, v [64 k][128 n]
// row-major staged as two 64-wide n blocks of 128-byte k rows (the MN-major swizzle ptx.cuh
// documents). a [64 x 64], b [128 x 64]; exact integers again (verify/ptx_wgmma.rs).
extern "C" __global__ void __launch_bounds__(128) bonsai_wgmma_probe_bf16(const u16* __restrict__ a,
                                                                         const u16* __restrict__ b,
                                                                         const u16* __restrict__ v,
                                                                         float* __restrict__ d) {
    griddep_wait();
    constexpr int K = WGMMA_PROBE_K, N = 128, V_BLOCK = K * 64;  // elements of one 64-wide n block
    __shared__ __align__(16) u16 storage[N * K + K * N + 512];
    u16* tile_b = reinterpret_cast<u16*>((reinterpret_cast<unsigned long long>(storage) + 1023) & ~1023ull);
    u16* tile_v = tile_b + N * K;
    const int tid = threadIdx.x;
    wgmma_probe_stage_b(tile_b, b, tid);
    for (int i = tid; i < K * N; i += 128) {
        const int kr = i / N, n = i % N, nn = n % 64;
        tile_v[(n / 64) * V_BLOCK + kr * 64 + (((nn / 8) ^ (kr & 7)) * 8) + nn % 8] = v[i];
    }
    fence_proxy_async_smem();
    __syncthreads();
    const int warp = tid / WARP_SIZE, lane = tid % WARP_SIZE, g = lane / 4, t = lane % 4;
    const int row = 16 * warp + g;
    float acc_kmajor[64], acc_mn[64];
    for (int i = 0; i < 64; ++i) {
        acc_kmajor[i] = __int_as_float(0x7fc00000);
        acc_mn[i] = 0.0f;
    }
    u32 frag[K / 16][4];
    wgmma_probe_a_frags(frag, a, row, t);
    wgmma_fence();
    for (int s = 0; s < K / 16; ++s) wgmma_bf16_m64n128k16_rs(acc_kmajor, frag[s], tile_b, 2 * s, s > 0);
    for (int s = 0; s < K / 16; ++s)
        wgmma_bf16_m64n128k16_rs_mn(acc_mn, frag[s], tile_v + s * 16 * 64, (u32)(V_BLOCK * sizeof(u16)));
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_probe_store_d(d, acc_kmajor, row, t);
    wgmma_probe_store_d(d + 64 * N, acc_mn, row, t);
}

// ---- wgmma tf32 probe ----
// One warpgroup runs ptx.cuh's wgmma_tf32_m64n128k8_ss over 4 k8 steps: d[64 x 128] = a[64 x 32]
// . b[128 x 32]^T (row-major f32 inputs holding tf32 values), both staged into the
// 128-byte-swizzled tiles the wrapper documents, the first step with accumulate = false over a
// NaN-filled D (so an ignored scale-d shows as NaN), D stored by the documented layout.
// verify/ptx_wgmma.rs feeds small integers (exact sums). Compute capability 9.0 only.
#define WGMMA_TF32_PROBE_K 32
extern "C" __global__ void __launch_bounds__(128) bonsai_wgmma_tf32_probe(const float* __restrict__ a,
                                                                         const float* __restrict__ b,
                                                                         float* __restrict__ d) {
    griddep_wait();
    __shared__ __align__(16) float tile_storage[(64 + 128) * WGMMA_TF32_PROBE_K + 256];
    float* a_tile = reinterpret_cast<float*>((reinterpret_cast<unsigned long long>(tile_storage) + 1023) & ~1023ull);
    float* b_tile = a_tile + 64 * WGMMA_TF32_PROBE_K;
    const int tid = threadIdx.x;
    for (int i = tid; i < (64 + 128) * 8; i += 128) {
        const int r = i / 8, c = i % 8;  // row of a then b, 16-byte chunk of its 32 k
        const float* src = r < 64 ? a + r * WGMMA_TF32_PROBE_K : b + (r - 64) * WGMMA_TF32_PROBE_K;
        for (int e = 0; e < 4; ++e) a_tile[r * 32 + ((c ^ (r & 7)) * 4) + e] = src[c * 4 + e];
    }
    fence_proxy_async_smem();
    __syncthreads();
    const int warp = tid / WARP_SIZE, lane = tid % WARP_SIZE, g = lane / 4, t = lane % 4;
    const int row = 16 * warp + g;
    float acc[64];
    for (int i = 0; i < 64; ++i) acc[i] = __uint_as_float(0x7fc00000u);
    wgmma_fence();
    for (int s = 0; s < WGMMA_TF32_PROBE_K / 8; ++s) wgmma_tf32_m64n128k8_ss(acc, a_tile, b_tile, s, s > 0);
    wgmma_commit();
    wgmma_wait<0>();
    for (int j = 0; j < 16; ++j)
        for (int e = 0; e < 2; ++e) {
            d[row * 128 + 8 * j + 2 * t + e] = acc[4 * j + e];
            d[(row + 8) * 128 + 8 * j + 2 * t + e] = acc[4 * j + 2 + e];
        }
}

// Prefill GEMM with 8-bit activations on Hopper's integer warpgroup MMA (wgmma s8, sm_90a):
// `gemm_wgmma_s8`, the `*_gemm_wgmma_s8` entry points (matmul_q1.cu's entry macro). The model
// plan runs it for the matmuls whose input is Hadamard-rotated (Bonsai 2's folded weights): the
// rotation spreads every outlier over its 1024-block, so a 128-group's values sit within a few
// standard deviations of each other and 8 bits per value lose little; the f16 GEMM
// (matmul_gemm_wgmma.cu) serves every other input.
//
// Numerics. The pre-pass (`x_to_s8_groups_q1` / `_q2`, one CTA per token row, a warp per
// 128-group) takes each group's amax, s = amax / 127 (f32, rounded) and q = clamp(rint(x / s),
// -127, 127) (the division correctly rounded), so |x - s q| <= s / 2 + u |x|; it stores q in the
// s8 slot order below and s at [group][token]. The weights' codes are exact s8 (Q1 +-1, Q2 c - 1
// in {-1, 0, 1, 2}). Per group the tensor cores sum P = sum code * q exactly in s32 (|P| <=
// 128 * 127 * 2 < 2^22), and the kernel adds fl(P) * fl(d * s) to the output's f32 accumulator,
// groups in order: an f32 sum of G products. verify (crate::verify::matmul) bounds the result by
// sum_k |w_k| (s_G(k) / 2 + u |x_k|) + gamma_{G+2} sum_k |w_k| |x^_k| (x^ = s q).
//
// Speed. Against the f16 wgmma GEMM the int8 MMA has twice the dense rate and the activations
// half the bytes: a 128 x 128 tile reads 16 KB of activations per 128-group (2.1M MACs), where
// the f16 256-token tile reads 64 KB per 4.2M MACs and is bound by that L2 traffic
// (docs/kernel-notes.md, "The 256-token tile"). Speed of light on the H200: the dense int8 rate
// (~1,980 TOPS on paper); L2 at the f16 tile's measured ~4.1 TB/s would cap this tile near 1,000.
//
// Layout of an s8 group (per token row, 128 bytes): slot P = 32 s + 16 h + 4 t + b (k32 step s,
// half h of the step, quad lane t, byte b) holds x at weight index layout_weight(t, 8 b + 2 s + h)
// of the group (weight_layout.cu). So register rho = 2 s + h of lane t's A fragment is bits rho,
// rho + 8, rho + 16, rho + 24 of the lane's word(s) (s8_weights: Q1 SHF + LOP3 + IMAD, Q2 six
// instructions per 4 weights), with no permutation of the weights.
//
// CTA = 2 warpgroups (256 threads) = 128 weight rows x 128 tokens (m64n128k32 per warpgroup).
// K advances through a QS_STAGES-deep cp.async ring of 128-group stages (the group's activation
// tile, BN rows x 128 B in the 128-byte swizzle, the rows' lane words, the tokens' scales; the row
// scales through registers one group ahead), one CTA barrier per group as in gemm_wgmma. The
// group's four wgmmas accumulate into one of two s32 sets (ping-pong by group parity); each is its
// own commit group, and the decode of step s of group g waits until at most 3 are pending, which
// retires step s of group g - 1 (the last reader of a[s]). After group g's four are issued, all of
// group g - 1's have retired, and the warpgroup promotes that set (P * (d * s) into the f32
// accumulators) while group g's wgmmas run. Registers: 64 f32 + 2 x 64 s32 accumulators, 16 A.

#define QS_WARPGROUPS 2
#define QS_ROWS (64 * QS_WARPGROUPS)
#define QS_THREADS (128 * QS_WARPGROUPS)
#define QS_TOKENS 128
#define QS_STAGES 6
#define QS_PREP_THREADS 256

// Weight index (0..127) within the group of s8 slot `slot` (0..127).
__device__ __forceinline__ int s8_slot_k(int slot) {
    const int s = slot >> 5, h = (slot >> 4) & 1, t = (slot >> 2) & 3, b = slot & 3;
    return layout_weight(t, 8 * b + 2 * s + h);
}

// One CTA per token row, a warp per 128-group: the group's s (stored at group_scale[group * m +
// row]) and its q in slot order (xq[row * k + group * 128 + slot]).
__device__ __forceinline__ void s8_groups(const float* __restrict__ x, int k, int m,
                                               unsigned char* __restrict__ xq, float* __restrict__ group_scale) {
    __shared__ signed char staged[QS_PREP_THREADS / WARP_SIZE][GROUP_SIZE];
    const long long row = blockIdx.x;
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const int groups = k / GROUP_SIZE;
    for (int group = warp; group < groups; group += QS_PREP_THREADS / WARP_SIZE) {
        const float4 v = *reinterpret_cast<const float4*>(x + row * k + group * GROUP_SIZE + 4 * lane);
        float amax = fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
#pragma unroll
        for (int o = WARP_SIZE / 2; o > 0; o /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
        // amax = 0: every q is 0 (and s = 0); non-finite: q = 0 and s = amax, so the products
        // 0 * inf / NaN carry NaN into the outputs.
        const bool finite_nonzero = amax > 0.0f && amax <= 3.402823466e38f;
        const float s = finite_nonzero ? amax / 127.0f : amax;
        const float xs[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const float r = finite_nonzero ? rintf(__fdiv_rn(xs[e], s)) : 0.0f;
            staged[warp][4 * lane + e] = (signed char)(int)fminf(fmaxf(r, -127.0f), 127.0f);
        }
        __syncwarp();
        u32 packed = 0;
#pragma unroll
        for (int b = 0; b < 4; ++b) packed |= (u32)(unsigned char)staged[warp][s8_slot_k(4 * lane + b)] << (8 * b);
        reinterpret_cast<u32*>(xq + row * k + group * GROUP_SIZE)[lane] = packed;
        if (lane == 0) group_scale[(long long)group * m + row] = s;
        __syncwarp();
    }
}

// The s8 A register rho (0..7) of a lane from its lane word(s) of one row and group: bytes b =
// bits rho + 8 b. Q1: bit 1 -> +1 (0x01), 0 -> -1 (0xFF): 0xFFFFFFFF - 0xFE * bit per byte (no
// borrow crosses a byte). Q2: code c = plane0 + 2 plane1, value c - 1 = (c + 0x7F) ^ 0x80 per
// byte (c + 0x7F <= 0x82: no carry crosses a byte). rho must fold to a constant.
template <int BITS>
__device__ __forceinline__ u32 s8_weights(u32 lo, u32 hi, int rho) {
    const u32 c0 = (lo >> rho) & 0x01010101u;
    if (BITS == 1) return c0 * 0xFFFFFF02u + 0xFFFFFFFFu;
    const u32 c1x2 = (rho == 0 ? hi << 1 : hi >> (rho - 1)) & 0x02020202u;
    return (c0 + c1x2 + 0x7F7F7F7Fu) ^ 0x80808080u;
}

// An s32 sum below 2^22 in magnitude as an exact f32: its bits added to those of 1.5 * 2^23 give
// 1.5 * 2^23 + i exactly; one integer and one float add, where I2F issues at a quarter of their rate.
__device__ __forceinline__ float s8_sum_to_f32(int i) { return __int_as_float(i + 0x4B400000) - 12582912.0f; }

template <int BITS>
struct QsStage {
    static constexpr int WORDS = LAYOUT_LANES * BITS;  // lane words per row and group
    static constexpr int X_BYTES = QS_TOKENS * GROUP_SIZE;
    static constexpr int W_BYTES = QS_ROWS * WORDS * 4;
    static constexpr int S_BYTES = QS_TOKENS * 4;
    static constexpr int D_BYTES = QS_ROWS * 2;
    static constexpr int BYTES = (X_BYTES + W_BYTES + S_BYTES + D_BYTES + QW_ALIGN - 1) / QW_ALIGN * QW_ALIGN;
};

template <int BITS, int MODE>
__device__ __forceinline__ void gemm_wgmma_s8(const u16* __restrict__ scales, const u32* __restrict__ payload,
                                              const unsigned char* __restrict__ xq, const float* __restrict__ group_scale,
                                              int m, float* __restrict__ y, int n_out, int k) {
    using S = QsStage<BITS>;
    constexpr int STEPS = GROUP_SIZE / 32;
    // Group it's barrier refills the slot of group it - 2 (its wgmmas retired and its set promoted
    // during iteration it - 1), so AHEAD = STAGES - 2 groups are in flight.
    constexpr int AHEAD = QS_STAGES - 2;
    extern __shared__ float4 qs8_smem[];
    unsigned char* smem = reinterpret_cast<unsigned char*>(qs8_smem) +
                          (QW_ALIGN - smem_addr(qs8_smem) % QW_ALIGN) % QW_ALIGN;

    const int tile = blockIdx.x;
    const int tok0 = blockIdx.y * QS_TOKENS;
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const int g = lane / 4, t = lane % 4;
    const int groups = k / GROUP_SIZE;
    const int lr0 = (warp / 4) * 64 + (warp % 4) * 16 + g, lr1 = lr0 + 8;
    const bool carries_scale = threadIdx.x < QS_ROWS;
    const int my_row = carries_scale ? gemm_weight_row<MODE, QS_ROWS>(tile, threadIdx.x, n_out) : -1;

    auto x_tile = [&](int slot) { return smem + slot * S::BYTES; };
    auto w_tile = [&](int slot) { return reinterpret_cast<u32*>(smem + slot * S::BYTES + S::X_BYTES); };
    auto s_tile = [&](int slot) { return reinterpret_cast<float*>(smem + slot * S::BYTES + S::X_BYTES + S::W_BYTES); };
    auto d_tile = [&](int slot) {
        return reinterpret_cast<u16*>(smem + slot * S::BYTES + S::X_BYTES + S::W_BYTES + S::S_BYTES);
    };
    auto load_scale = [&](int kb) -> u16 {
        return my_row >= 0 ? __ldg(scales + (long long)my_row * groups + kb) : (u16)0;
    };
    // Copies of a group: activation chunk c = threadIdx.x % 8 of token rows r0 + 32 j (r0 =
    // threadIdx.x / 8; rows 32 apart keep the swizzle), lane words i = threadIdx.x + j THREADS (row
    // i / WORDS, word i % WORDS) at held offsets, and the scale of token threadIdx.x (< 128).
    constexpr int X_CHUNKS = QS_TOKENS * 8 / QS_THREADS, W_COPIES = QS_ROWS * S::WORDS / QS_THREADS;
    constexpr int X_ROW_STEP = QS_THREADS / 8;
    static_assert(X_CHUNKS * QS_THREADS == QS_TOKENS * 8 && W_COPIES * QS_THREADS == QS_ROWS * S::WORDS,
                  "every thread copies the same number of chunks and words");
    static_assert(X_ROW_STEP % 8 == 0, "strided chunks keep their row's swizzle");
    const int x_r0 = threadIdx.x / 8, x_c = threadIdx.x % 8;
    const int x_rows_left = m - tok0 - x_r0;
    const long long x_row_stride = (long long)X_ROW_STEP * k;
    const unsigned char* x_base = xq + (x_rows_left > 0 ? (long long)(tok0 + x_r0) * k + x_c * 16 : 0);
    const int x_offset = x_r0 * 128 + ((x_c ^ (x_r0 & 7)) * 16);
    int w_offset[W_COPIES];
#pragma unroll
    for (int j = 0; j < W_COPIES; ++j) {
        const int i = threadIdx.x + j * QS_THREADS, lr = i / S::WORDS, w = i % S::WORDS;
        const int row = gemm_weight_row<MODE, QS_ROWS>(tile, lr, n_out);
        w_offset[j] = row >= 0 ? row * groups * S::WORDS + layout_word<BITS>(groups, 0, w / BITS, w % BITS) : -1;
    }
    const bool token_valid = threadIdx.x < QS_TOKENS && tok0 + (int)threadIdx.x < m;
    auto load_group = [&](int kb, int slot) {
        unsigned char* xs = x_tile(slot);
        const unsigned char* src = x_base + kb * GROUP_SIZE;
#pragma unroll
        for (int j = 0; j < X_CHUNKS; ++j) {
            const bool valid = j * X_ROW_STEP < x_rows_left;
            cp_async16_zfill(xs + x_offset + j * X_ROW_STEP * 128, valid ? src + j * x_row_stride : xq, valid);
        }
        u32* ws = w_tile(slot);
        const int group_word = layout_word<BITS>(groups, kb, 0, 0);
#pragma unroll
        for (int j = 0; j < W_COPIES; ++j) {
            u32* dst = ws + threadIdx.x + j * QS_THREADS;
            if (w_offset[j] >= 0) {
                cp_async4(dst, payload + w_offset[j] + group_word);
            } else {
                *dst = 0u;  // with the zero scale: adds 0
            }
        }
        if (threadIdx.x < QS_TOKENS) {
            float* dst = s_tile(slot) + threadIdx.x;
            if (token_valid) {
                cp_async4(dst, group_scale + (long long)kb * m + tok0 + threadIdx.x);
            } else {
                *dst = 0.0f;
            }
        }
    };

    float acc[64];
    int sum_even[64], sum_odd[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.0f;

#pragma unroll
    for (int s = 0; s < AHEAD; ++s) {
        if (s < groups) {
            load_group(s, s);
            if (carries_scale) d_tile(s)[threadIdx.x] = load_scale(s);
        }
        cp_async_commit();
    }

    u32 a[STEPS][4];
    // Adds group `kb`'s set (all its wgmmas retired) times d (rows lr0, lr1) and s (tokens).
    auto promote = [&](const int(&sums)[64], int kb) {
        const int slot = kb % QS_STAGES;
        const float d0 = f16_to_f32(d_tile(slot)[lr0]), d1 = f16_to_f32(d_tile(slot)[lr1]);
        const float* ts = s_tile(slot);
#pragma unroll
        for (int j = 0; j < 16; ++j) {
            const float2 sv = *reinterpret_cast<const float2*>(ts + 8 * j + 2 * t);
            acc[4 * j + 0] = fmaf(s8_sum_to_f32(sums[4 * j + 0]), d0 * sv.x, acc[4 * j + 0]);
            acc[4 * j + 1] = fmaf(s8_sum_to_f32(sums[4 * j + 1]), d0 * sv.y, acc[4 * j + 1]);
            acc[4 * j + 2] = fmaf(s8_sum_to_f32(sums[4 * j + 2]), d1 * sv.x, acc[4 * j + 2]);
            acc[4 * j + 3] = fmaf(s8_sum_to_f32(sums[4 * j + 3]), d1 * sv.y, acc[4 * j + 3]);
        }
    };
    // Group `it` into `sums`, then the promotion of group it - 1 (in `other`).
    auto run_group = [&](int it, int(&sums)[64], const int(&other)[64]) {
        cp_async_wait<AHEAD - 1>();
        fence_proxy_async_smem();
        __syncthreads();
        const int next = it + AHEAD;
        u16 d_next = 0;
        if (next < groups) {
            load_group(next, next % QS_STAGES);
            if (carries_scale) d_next = load_scale(next);
        }
        cp_async_commit();
        const int slot = it % QS_STAGES;
        const u32* ws = w_tile(slot);
        const u32 lo0 = ws[lr0 * S::WORDS + t * BITS], lo1 = ws[lr1 * S::WORDS + t * BITS];
        const u32 hi0 = BITS == 2 ? ws[lr0 * S::WORDS + t * BITS + 1] : 0u;
        const u32 hi1 = BITS == 2 ? ws[lr1 * S::WORDS + t * BITS + 1] : 0u;
        const unsigned char* xs = x_tile(slot);
#pragma unroll
        for (int s = 0; s < STEPS; ++s) {
            wgmma_wait<STEPS - 1>();
            a[s][0] = s8_weights<BITS>(lo0, hi0, 2 * s);
            a[s][1] = s8_weights<BITS>(lo1, hi1, 2 * s);
            a[s][2] = s8_weights<BITS>(lo0, hi0, 2 * s + 1);
            a[s][3] = s8_weights<BITS>(lo1, hi1, 2 * s + 1);
            wgmma_fence();
            if (s == 0) {
                wgmma_s8_m64n128k32_rs<false>(sums, a[s], xs, 0);
            } else {
                wgmma_s8_m64n128k32_rs<true>(sums, a[s], xs, 2 * s);
            }
            wgmma_commit();
        }
        if (it > 0) promote(other, it - 1);
        // The refilled slot's row scales (group it - 2's) were last read by that promotion,
        // during iteration it - 1.
        if (next < groups && carries_scale) d_tile(next % QS_STAGES)[threadIdx.x] = d_next;
    };
    // At least one group (K is a positive multiple of 128, checked with the weights); the loop is
    // entered unconditionally (see gemm_wgmma on zero-trip paths and ptxas' serialization).
#pragma unroll 1
    for (int it = 0;; it += 2) {
        run_group(it, sum_even, sum_odd);
        if (it + 1 == groups) {
            wgmma_wait<0>();
            promote(sum_even, it);
            break;
        }
        run_group(it + 1, sum_odd, sum_even);
        if (it + 2 == groups) {
            wgmma_wait<0>();
            promote(sum_odd, it + 1);
            break;
        }
    }
    cp_async_wait<0>();

    // Epilogue: acc[4j + e] is (row lr0, token 8j + 2t + e), acc[4j + 2 + e] (row lr1, same token).
    const int row0 = gemm_weight_row<MODE, QS_ROWS>(tile, lr0, n_out);
    const int row1 = gemm_weight_row<MODE, QS_ROWS>(tile, lr1, n_out);
#pragma unroll
    for (int j = 0; j < QS_TOKENS / 8; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const int tok = tok0 + 8 * j + 2 * t + e;
            if (tok >= m) continue;
            float* yrow = y + (long long)tok * n_out;
            const float v0 = acc[4 * j + e], v1 = acc[4 * j + 2 + e];
            if (MODE == MATMUL_SWIGLU) {
                if (row0 >= 0) yrow[row0] = silu_mul(v0, v1);
                continue;
            }
            if (row0 >= 0) yrow[row0] = MODE == MATMUL_ADD ? yrow[row0] + v0 : v0;
            if (row1 >= 0) yrow[row1] = MODE == MATMUL_ADD ? yrow[row1] + v1 : v1;
        }
}

extern "C" __global__ void __launch_bounds__(QS_PREP_THREADS)
    x_to_s8_groups(const float* x, int k, int m, unsigned char* xq, float* group_scale) {
    griddep_wait();
    griddep_launch_dependents();
    s8_groups(x, k, m, xq, group_scale);
}

// C++ twins of every wrapper in src/cuda/ptx.cuh (part of cuda_emu.h), same names and
// signatures. Conversions are bit-exact; ldmatrix and mma are warp collectives that gather all 32
// lanes' operands and apply the PTX ISA fragment layouts documented at the top of ptx.cuh.
// `bonsai kernels verify` (check `ptx_wrappers`) runs each wrapper on hardware and here against
// one Rust model of the same semantics.
#pragma once

// ---- conversions ----
inline float f16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h >> 15) << 31;
    const uint32_t exponent = (h >> 10) & 0x1f;
    const uint32_t mantissa = h & 0x3ff;
    if (exponent == 0) {
        // Zero or subnormal: mantissa * 2^-24, exact in f32.
        const float magnitude = (float)mantissa * 0x1p-24f;
        return sign ? -magnitude : magnitude;
    }
    if (exponent == 0x1f) return __uint_as_float(sign | 0x7f800000u | (mantissa << 13) | (mantissa ? 0x400000u : 0u));
    return __uint_as_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

// f32 -> f16, round to nearest even; NaN becomes the canonical 0x7fff as cvt.rn.f16.f32 gives.
inline uint16_t f32_to_f16(float f) {
    const uint32_t bits = __float_as_uint(f);
    const uint32_t sign = (bits >> 16) & 0x8000u;
    const uint32_t magnitude = bits & 0x7fffffffu;
    if (magnitude > 0x7f800000u) return 0x7fff;
    if (magnitude >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  // >= 65520 rounds to inf
    const uint32_t exponent = magnitude >> 23;
    if (exponent < 113) {
        // Result is an f16 subnormal (or zero): round m * 2^(e-126) to an integer count of 2^-24.
        if (exponent == 0) return (uint16_t)sign;
        const uint32_t m = (magnitude & 0x7fffffu) | 0x800000u;
        const uint32_t shift = 126 - exponent;
        if (shift > 24) return (uint16_t)sign;
        uint32_t q = m >> shift;
        const uint32_t rest = m & ((1u << shift) - 1);
        const uint32_t half = 1u << (shift - 1);
        if (rest > half || (rest == half && (q & 1u))) ++q;
        return (uint16_t)(sign | q);
    }
    uint32_t q = ((exponent - 112) << 10) | ((magnitude & 0x7fffffu) >> 13);
    const uint32_t rest = magnitude & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (q & 1u))) ++q;
    return (uint16_t)(sign | q);
}

// f32 -> bf16, round to nearest even; NaN becomes the canonical 0x7fff.
inline uint16_t f32_to_bf16_rn(float f) {
    const uint32_t bits = __float_as_uint(f);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return 0x7fff;
    return (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

// f32 -> tf32, round to nearest with ties away from zero, low 13 bits cleared.
inline uint32_t f32_to_tf32(float f) {
    const uint32_t bits = __float_as_uint(f);
    if ((bits & 0x7f800000u) == 0x7f800000u) return (bits & 0x7fffffu) ? 0x7fffe000u : bits;
    return (bits + 0x1000u) & 0xffffe000u;
}

// ex2.approx.ftz.f32: subnormal inputs and results become zero of the same sign. The hardware
// result may differ from exp2 by up to 2 ulp; callers must not depend on the last bits.
inline float exp2_ftz(float x) {
    if (std::fpclassify(x) == FP_SUBNORMAL) x = std::copysign(0.0f, x);
    const float r = std::exp2(x);
    return std::fpclassify(r) == FP_SUBNORMAL ? 0.0f : r;
}

// ---- shared-memory addressing and asynchronous copies ----
// Not a real shared-window address: only cp.async/ldmatrix took it, and their twins take pointers.
inline uint32_t smem_addr(const void* p) { return (uint32_t)(uintptr_t)p; }
// Copies are queued per thread and land at the cp_async_wait that covers their group (or when
// the thread exits): reading the destination earlier sees the old contents.
inline void cp_async16(void* dst, const void* src) { emu::t_thread->copies.issue(dst, src, 16); }
inline void cp_async16_zfill(void* dst, const void* src, bool valid) {
    emu::t_thread->copies.issue(dst, valid ? src : nullptr, 16);
}
inline void cp_async4(void* dst, const void* src) { emu::t_thread->copies.issue(dst, src, 4); }
inline void cp_async_commit() { emu::t_thread->copies.commit(); }
template <int N>
inline void cp_async_wait() {
    static_assert(N >= 0, "cp.async.wait_group takes a count of groups");
    emu::t_thread->copies.wait(N);
}

// ---- ldmatrix ----
namespace emu {

struct LdmatrixLane {
    const unsigned char* row_addr;
    uint32_t* r;
};

// Matrix i's row j comes from lane 8i + j. Lane l receives the two b16 of row l/4 at columns
// 2(l%4), 2(l%4)+1 (low half = lower column); transposed: of column l/4 at rows 2(l%4), 2(l%4)+1.
template <int Matrices, bool Transposed>
inline void complete_ldmatrix(void* const* lanes, uint32_t) {
    auto lane = [&](int l) { return static_cast<LdmatrixLane*>(lanes[l]); };
    auto element = [&](int matrix, int row, int col) {
        uint16_t v;
        std::memcpy(&v, lane(8 * matrix + row)->row_addr + 2 * col, 2);
        return (uint32_t)v;
    };
    for (int l = 0; l < kWarpSize; ++l) {
        for (int i = 0; i < Matrices; ++i) {
            const int major = l / 4, minor = 2 * (l % 4);
            const uint32_t lo = Transposed ? element(i, minor, major) : element(i, major, minor);
            const uint32_t hi = Transposed ? element(i, minor + 1, major) : element(i, major, minor + 1);
            lane(l)->r[i] = lo | (hi << 16);
        }
    }
}

template <int Matrices, bool Transposed>
inline void ldmatrix(uint32_t* r, const void* row_addr, const char* what) {
    LdmatrixLane me{static_cast<const unsigned char*>(row_addr), r};
    warp_collective(0xffffffffu, &me, complete_ldmatrix<Matrices, Transposed>, what);
}

// ---- mma ----
struct MmaLane {
    const uint32_t* a;
    uint32_t b0, b1;
    float* c;
};

inline float bf16_bits_to_f32(uint32_t h) { return __uint_as_float((h & 0xffffu) << 16); }
inline float f16_bits_to_f32(uint32_t h) { return f16_to_f32((uint16_t)(h & 0xffffu)); }
// Tensor cores read only the 19 tf32 bits of an operand's f32 pattern.
inline float tf32_bits_to_f32(uint32_t bits) { return __uint_as_float(bits & 0xffffe000u); }

// D = A·B + C for one 16x8 tile: every product is exact in f32 (at most 11x11 significand bits),
// accumulated in f32 in k order starting from C.
template <int K>
inline void mma_accumulate(void* const* lanes, const float (&a)[16][K], const float (&b)[K][8]) {
    for (int l = 0; l < kWarpSize; ++l) {
        MmaLane* me = static_cast<MmaLane*>(lanes[l]);
        const int g = l / 4, t = l % 4;
        for (int i = 0; i < 4; ++i) {
            const int row = g + 8 * (i / 2), col = 2 * t + (i % 2);
            float acc = me->c[i];
            for (int k = 0; k < K; ++k) acc += a[row][k] * b[k][col];
            me->c[i] = acc;
        }
    }
}

// m16n8k16 with 16-bit operands: a[0] = (row g, k 2t..2t+1), a[1] = (g+8, 2t..), a[2] = (g,
// 2t+8..), a[3] = (g+8, 2t+8..); b0 = (k 2t..2t+1, col g), b1 = (k 2t+8..2t+9, col g).
template <float (*Decode)(uint32_t)>
inline void complete_mma_16x8x16(void* const* lanes, uint32_t) {
    float a[16][16], b[16][8];
    for (int l = 0; l < kWarpSize; ++l) {
        const MmaLane* me = static_cast<MmaLane*>(lanes[l]);
        const int g = l / 4, t = l % 4;
        for (int i = 0; i < 4; ++i) {
            const int row = g + 8 * (i % 2), k = 2 * t + 8 * (i / 2);
            a[row][k] = Decode(me->a[i]);
            a[row][k + 1] = Decode(me->a[i] >> 16);
        }
        b[2 * t][g] = Decode(me->b0);
        b[2 * t + 1][g] = Decode(me->b0 >> 16);
        b[2 * t + 8][g] = Decode(me->b1);
        b[2 * t + 9][g] = Decode(me->b1 >> 16);
    }
    mma_accumulate<16>(lanes, a, b);
}

// m16n8k8 tf32: a[0] = (g, t), a[1] = (g+8, t), a[2] = (g, t+4), a[3] = (g+8, t+4);
// b0 = (k t, col g), b1 = (k t+4, col g).
inline void complete_mma_tf32_16x8x8(void* const* lanes, uint32_t) {
    float a[16][8], b[8][8];
    for (int l = 0; l < kWarpSize; ++l) {
        const MmaLane* me = static_cast<MmaLane*>(lanes[l]);
        const int g = l / 4, t = l % 4;
        for (int i = 0; i < 4; ++i) a[g + 8 * (i % 2)][t + 4 * (i / 2)] = tf32_bits_to_f32(me->a[i]);
        b[t][g] = tf32_bits_to_f32(me->b0);
        b[t + 4][g] = tf32_bits_to_f32(me->b1);
    }
    mma_accumulate<8>(lanes, a, b);
}

// m16n8k128 b1 and.popc: D = C + popc(A row AND B column), exact s32 (wrapping).
struct MmaB1Lane {
    const uint32_t* a;
    uint32_t b;
    int* c;
};
// A = a[0] (row g) and a[1] (row g + 8), k word t; B = b (col g, k word t).
inline void complete_mma_b1_16x8x128(void* const* lanes, uint32_t) {
    uint32_t a[16][4], b[8][4];  // [row][32-bit k word], [col][k word]
    for (int l = 0; l < kWarpSize; ++l) {
        const MmaB1Lane* me = static_cast<MmaB1Lane*>(lanes[l]);
        const int g = l / 4, t = l % 4;
        a[g][t] = me->a[0];
        a[g + 8][t] = me->a[1];
        b[g][t] = me->b;
    }
    for (int l = 0; l < kWarpSize; ++l) {
        MmaB1Lane* me = static_cast<MmaB1Lane*>(lanes[l]);
        const int g = l / 4, t = l % 4;
        for (int i = 0; i < 4; ++i) {
            const int row = g + 8 * (i / 2), col = 2 * t + (i % 2);
            uint32_t sum = (uint32_t)me->c[i];
            for (int w = 0; w < 4; ++w) sum += (uint32_t)__builtin_popcount(a[row][w] & b[col][w]);
            me->c[i] = (int)sum;
        }
    }
}

inline void mma(float* c, const uint32_t* a, uint32_t b0, uint32_t b1, CompleteFn complete, const char* what) {
    MmaLane me{a, b0, b1, c};
    warp_collective(0xffffffffu, &me, complete, what);
}

}  // namespace emu

inline void ldmatrix_x4(uint32_t* r, const void* row_addr) { emu::ldmatrix<4, false>(r, row_addr, "ldmatrix_x4"); }
inline void ldmatrix_x4_trans(uint32_t* r, const void* row_addr) {
    emu::ldmatrix<4, true>(r, row_addr, "ldmatrix_x4_trans");
}
inline void ldmatrix_x2(uint32_t* r, const void* row_addr) { emu::ldmatrix<2, false>(r, row_addr, "ldmatrix_x2"); }
inline void ldmatrix_x2_trans(uint32_t* r, const void* row_addr) {
    emu::ldmatrix<2, true>(r, row_addr, "ldmatrix_x2_trans");
}
inline void mma_bf16_16x8x16(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
    emu::mma(c, a, b0, b1, emu::complete_mma_16x8x16<emu::bf16_bits_to_f32>, "mma_bf16_16x8x16");
}
inline void mma_f16_16x8x16(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
    emu::mma(c, a, b0, b1, emu::complete_mma_16x8x16<emu::f16_bits_to_f32>, "mma_f16_16x8x16");
}
inline void mma_b1_and_popc_16x8x128(int* c, uint32_t a0, uint32_t a1, uint32_t b) {
    const uint32_t a[2] = {a0, a1};
    emu::MmaB1Lane me{a, b, c};
    emu::warp_collective(0xffffffffu, &me, emu::complete_mma_b1_16x8x128, "mma_b1_and_popc_16x8x128");
}
inline void mma_tf32_16x8x8(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
    emu::mma(c, a, b0, b1, emu::complete_mma_tf32_16x8x8, "mma_tf32_16x8x8");
}

// The decode trace's phase marks (ptx.cuh, BONSAI_TRACE builds only): nothing here.
#define TRACE_MARKS_BEGIN
#define TRACE_MARK(i)
#define TRACE_MARKS_END
#define TRACE_CTA_ENDS

// Programmatic dependent launch: launches run one after another here, so both are no-ops.
inline void griddep_wait() {}
inline void griddep_launch_dependents() {}

// Release / acquire halves of a grid barrier: the emulator selftest's (selftest/emu_selftest.cpp);
// ptx.cuh has no twin of them, as no kernel of the library uses a grid barrier. CTAs of a
// cooperative launch run at once on their own OS threads (emu_sched.cpp), so these are real
// atomics. A thread that acquire-loads is usually spinning on a value another CTA will write: it
// lets the other fibers of its CTA run, and its OS thread yields the CPU (64 spinning OS threads
// on a 2-core machine must not starve the CTA they wait for). emu::acquire_polled also fails the
// launch when the spin cannot end (emu_runtime.h).
inline void red_release_gpu_add(unsigned* p, unsigned v) { __atomic_fetch_add(p, v, __ATOMIC_RELEASE); }
inline unsigned ld_acquire_gpu(const unsigned* p) {
    const unsigned v = __atomic_load_n(p, __ATOMIC_ACQUIRE);
    emu::acquire_polled(p, v);
    sched_yield();
    return v;
}
// A value and its flag in one 64-bit word (ptx.cuh): real atomics, as other CTAs run on other OS
// threads. The reader usually spins until another CTA's store lands: like ld_acquire_gpu, it lets
// the fibers of its CTA run and fails the launch if the spin cannot end. The stall is keyed on the
// flag alone, not the address: a poller cycles through several words, all unset while it is stuck.
inline void st_relaxed_gpu_u64(unsigned long long* p, unsigned long long v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
inline unsigned long long ld_relaxed_gpu_u64(const unsigned long long* p) {
    static const char flag_polls = 0;  // the stall key's address
    const unsigned long long v = __atomic_load_n(p, __ATOMIC_RELAXED);
    emu::acquire_polled(&flag_polls, (unsigned)(v >> 32));
    sched_yield();
    return v;
}
// An L2 prefetch is only a hint: nothing to do on the CPU.
inline void prefetch_l2_bulk(const void*, unsigned) {}

// wgmma (ptx.cuh): executed synchronously at issue, one warp at a time (each warp's rows of the
// m64 product depend only on its own A registers), as 16 mma_f16_16x8x16 over N / 8 column
// blocks with B read from the 128-byte-swizzled K-major tile. The fence / commit / wait and the
// proxy fence order nothing here. All of them exist on sm_90a only: posed as any other
// architecture (BONSAI_EMU_ARCH) each fails the launch, as the __trap() stubs ptx.cuh compiles
// for other architectures do on the GPU.
inline void wgmma_fence() { emu::require_sm90a("wgmma.fence (wgmma_fence)"); }
inline void wgmma_commit() { emu::require_sm90a("wgmma.commit_group (wgmma_commit)"); }
template <int PENDING>
inline void wgmma_wait() {
    emu::require_sm90a("wgmma.wait_group (wgmma_wait)");
}
inline void fence_proxy_async_smem() { emu::require_sm90a("fence.proxy.async (fence_proxy_async_smem)"); }
// N / 8 m16n8k16 products (MMA: the f16 or bf16 twin) with B's 16 k of column n read from the
// K-major 128-byte-swizzled tile: chunks k_chunk and k_chunk + 1 of row n, at chunk positions
// XORed with n % 8.
template <int N, void (*MMA)(float*, const uint32_t*, uint32_t, uint32_t)>
inline void emu_wgmma_kmajor(float* d, const uint32_t* a, const void* b_block, int k_chunk) {
    if ((reinterpret_cast<uintptr_t>(b_block) & 1023) != 0) emu::kernel_fault("a wgmma B tile must be 1024-byte aligned");
    if (k_chunk < 0 || k_chunk > 6 || (k_chunk & 1)) emu::kernel_fault("a wgmma k_chunk must be 0, 2, 4 or 6");
    const int lane = emu::t_thread->lane, g = lane / 4, t = lane % 4;
    const unsigned char* tile = static_cast<const unsigned char*>(b_block);
    auto word = [&](int n, int chunk) {
        uint32_t w;
        std::memcpy(&w, tile + n * 128 + ((chunk ^ (n & 7)) * 16) + t * 4, 4);
        return w;
    };
    for (int j = 0; j < N / 8; ++j) {
        const int n = 8 * j + g;
        MMA(d + 4 * j, a, word(n, k_chunk), word(n, k_chunk + 1));
    }
}
inline void wgmma_f16_m64n128k16_rs(float* d, const uint32_t* a, const void* b_block, int k_chunk) {
    emu::require_sm90a("wgmma.mma_async m64n128k16 f16 (wgmma_f16_m64n128k16_rs)");
    emu_wgmma_kmajor<128, mma_f16_16x8x16>(d, a, b_block, k_chunk);
}
inline void wgmma_f16_m64n256k16_rs(float* d, const uint32_t* a, const void* b_block, int k_chunk) {
    emu::require_sm90a("wgmma.mma_async m64n256k16 f16 (wgmma_f16_m64n256k16_rs)");
    emu_wgmma_kmajor<256, mma_f16_16x8x16>(d, a, b_block, k_chunk);
}
inline void wgmma_f16_m64n64k16_rs(float* d, const uint32_t* a, const void* b_block, int k_chunk) {
    emu::require_sm90a("wgmma.mma_async m64n64k16 f16 (wgmma_f16_m64n64k16_rs)");
    emu_wgmma_kmajor<64, mma_f16_16x8x16>(d, a, b_block, k_chunk);
}
inline void wgmma_bf16_m64n128k16_rs(float* d, const uint32_t* a, const void* b_block, int k_chunk, int accumulate) {
    emu::require_sm90a("wgmma.mma_async m64n128k16 bf16 (wgmma_bf16_m64n128k16_rs)");
    // scale-d = 0: d = A.B, whatever d held (NaN included).
    if (!accumulate)
        for (int i = 0; i < 64; ++i) d[i] = 0.0f;
    emu_wgmma_kmajor<128, mma_bf16_16x8x16>(d, a, b_block, k_chunk);
}
// MN-major B: element (k, n) at b_rows + (n / 64) n_block_bytes + 128 k, 16-byte chunk
// (n % 64) / 8 swizzled by k % 8 (k 8..15 land in the second 1024-byte block), as ptx.cuh says.
inline void wgmma_bf16_m64n128k16_rs_mn(float* d, const uint32_t* a, const void* b_rows, uint32_t n_block_bytes) {
    emu::require_sm90a("wgmma.mma_async m64n128k16 bf16 MN-major B (wgmma_bf16_m64n128k16_rs_mn)");
    if ((reinterpret_cast<uintptr_t>(b_rows) & 1023) != 0) emu::kernel_fault("a wgmma B tile must be 1024-byte aligned");
    if (n_block_bytes % 1024 != 0) emu::kernel_fault("an MN-major wgmma B needs 1024-byte aligned n blocks");
    const int lane = emu::t_thread->lane, g = lane / 4, t = lane % 4;
    const unsigned char* base = static_cast<const unsigned char*>(b_rows);
    auto elem = [&](int k, int n) -> uint32_t {
        uint16_t h;
        const int nn = n % 64;
        std::memcpy(&h, base + (n / 64) * (size_t)n_block_bytes + k * 128 + (((nn / 8) ^ (k & 7)) * 16) + (nn % 8) * 2, 2);
        return h;
    };
    for (int j = 0; j < 16; ++j) {
        const int n = 8 * j + g;
        const uint32_t b0 = elem(2 * t, n) | (elem(2 * t + 1, n) << 16);
        const uint32_t b1 = elem(2 * t + 8, n) | (elem(2 * t + 9, n) << 16);
        mma_bf16_16x8x16(d + 4 * j, a, b0, b1);
    }
}

// wgmma tf32 "ss" (ptx.cuh): both operands from 128-byte-swizzled K-major tiles, addressed as the
// hardware does: the descriptor's start address (tile + 32 k_step) plus the unswizzled offset of
// (row, k) (rows 128 bytes apart), then address bits 4-6 XORed with bits 7-9. Warp w % 4 of the
// warpgroup supplies A rows 16 (w % 4).., read into the m16n8k8 tf32 A layout; then 16
// mma_tf32_16x8x8 over the N / 8 column blocks (the mma twin reads the top 19 bits of each operand).
namespace emu {
inline uint32_t sw128_word(const unsigned char* start, int row, int k) {
    uintptr_t addr = reinterpret_cast<uintptr_t>(start) + (uintptr_t)row * 128 + (uintptr_t)k * 4;
    addr ^= ((addr >> 7) & 7) << 4;
    uint32_t w;
    std::memcpy(&w, reinterpret_cast<const void*>(addr), 4);
    return w;
}
}  // namespace emu
inline void wgmma_tf32_m64n128k8_ss(float* d, const void* a_block, const void* b_block, int k_step, bool accumulate) {
    emu::require_sm90a("wgmma.mma_async m64n128k8 tf32 (wgmma_tf32_m64n128k8_ss)");
    if (((reinterpret_cast<uintptr_t>(a_block) | reinterpret_cast<uintptr_t>(b_block)) & 1023) != 0)
        emu::kernel_fault("wgmma tf32 A and B tiles must be 1024-byte aligned");
    if (k_step < 0 || k_step > 3) emu::kernel_fault("a wgmma tf32 k_step must be 0..3");
    const int lane = emu::t_thread->lane, g = lane / 4, t = lane % 4;
    const int row0 = 16 * (emu::t_thread->warp % 4);
    const unsigned char* a_start = static_cast<const unsigned char*>(a_block) + 32 * k_step;
    const unsigned char* b_start = static_cast<const unsigned char*>(b_block) + 32 * k_step;
    uint32_t a[4];
    for (int i = 0; i < 4; ++i) a[i] = emu::sw128_word(a_start, row0 + g + 8 * (i % 2), t + 4 * (i / 2));
    if (!accumulate)
        for (int i = 0; i < 64; ++i) d[i] = 0.0f;
    for (int j = 0; j < 16; ++j) {
        const int n = 8 * j + g;
        mma_tf32_16x8x8(d + 4 * j, a, emu::sw128_word(b_start, n, t), emu::sw128_word(b_start, n, t + 4));
    }
}

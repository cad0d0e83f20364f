// Device-side shim of the CPU emulator: compiles bonsai's CUDA kernel sources as plain C++17.
// The kernel translation unit is built with `-DBONSAI_EMU -include cuda_emu.h`; this header gives
// the CUDA keywords, built-in variables, vector types, intrinsics and (emu_ptx.h) a C++ twin of
// every inline-PTX wrapper in src/cuda/ptx.cuh. Execution model (emu_sched.cpp): each CTA runs
// on one OS thread, its threads are cooperative fibers that switch only at __syncthreads and at
// warp collectives (shuffles, ballots, __syncwarp, ldmatrix, mma).
#pragma once

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <sched.h>  // sched_yield, for ld_acquire_gpu (emu_ptx.h)
#include <type_traits>
#include <utility>  // before the keyword macros below: libstdc++ spells __noinline__ itself

#include "emu_device.h"
#include "emu_runtime.h"

// ---- keywords ----
#define __global__
#define __device__
#define __host__
#define __noinline__ __attribute__((noinline))
#define __forceinline__ inline
#define __restrict__ __restrict
#define __launch_bounds__(...)
#define __maxnreg__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __constant__
// Static shared memory: one copy per OS thread, and an OS thread runs one CTA at a time, so all
// fibers of a CTA see the same array and concurrent CTAs on other OS threads see their own.
// (`extern __shared__ T name[];` is rewritten by scripts/emu.sh to a pointer into
// emu_dynamic_smem().)
#define __shared__ static thread_local
// scripts/emu.sh appends EMU_POISON_SHARED(name); to every `__shared__` declaration: the first
// thread of a CTA to pass it fills the array with 0xff bytes (f32 NaN, int -1), so a read of
// shared memory no thread of this CTA wrote shows up, as garbage would on the GPU.
#define EMU_POISON_SHARED(name)                                                   \
    do {                                                                          \
        static thread_local unsigned long long emu_poisoned_in_cta = 0;           \
        if (emu_poisoned_in_cta != ::emu::t_cta->serial) {                        \
            emu_poisoned_in_cta = ::emu::t_cta->serial;                           \
            std::memset((void*)&(name), 0xff, sizeof(name));                      \
        }                                                                         \
    } while (0)
// Device code compiled "for" sm_90, whatever the emulator poses as (BONSAI_EMU_ARCH): the kernels
// never test the architecture themselves (scripts/emu.sh refuses a build where they do); the
// ptx.cuh wrappers that differ by architecture behave here as on the posed one (emu_ptx.h).
#define __CUDA_ARCH__ 900

// ---- built-in variables ----
typedef emu::EmuDim3 uint3;
struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};
#define threadIdx (::emu::t_thread->thread_idx)
#define blockIdx (::emu::t_cta->block_idx)
#define blockDim (::emu::t_cta->block_dim)
#define gridDim (::emu::t_cta->grid_dim)
#define warpSize 32

inline unsigned char* emu_dynamic_smem() { return emu::t_cta->dynamic_smem; }

// ---- vector types (CUDA's sizes and alignments) ----
#define EMU_VEC2(name, T, align) \
    struct __attribute__((aligned(align))) name { T x, y; }; \
    inline name make_##name(T x, T y) { return name{x, y}; }
#define EMU_VEC3(name, T) \
    struct name { T x, y, z; }; \
    inline name make_##name(T x, T y, T z) { return name{x, y, z}; }
#define EMU_VEC4(name, T, align) \
    struct __attribute__((aligned(align))) name { T x, y, z, w; }; \
    inline name make_##name(T x, T y, T z, T w) { return name{x, y, z, w}; }
EMU_VEC2(float2, float, 8)
EMU_VEC3(float3, float)
EMU_VEC4(float4, float, 16)
EMU_VEC2(int2, int, 8)
EMU_VEC3(int3, int)
EMU_VEC4(int4, int, 16)
EMU_VEC2(uint2, unsigned, 8)
EMU_VEC4(uint4, unsigned, 16)
EMU_VEC2(ushort2, unsigned short, 4)
EMU_VEC4(ushort4, unsigned short, 8)
EMU_VEC2(short2, short, 4)
EMU_VEC4(short4, short, 8)
EMU_VEC2(uchar2, unsigned char, 2)
EMU_VEC4(uchar4, unsigned char, 4)
EMU_VEC4(char4, signed char, 4)
EMU_VEC2(double2, double, 16)
EMU_VEC2(longlong2, long long, 16)
EMU_VEC2(ulonglong2, unsigned long long, 16)
#undef EMU_VEC2
#undef EMU_VEC3
#undef EMU_VEC4

// ---- min / max (CUDA overloads them for every arithmetic pair; floats ignore a NaN operand) ----
template <class A, class B>
inline typename std::common_type<A, B>::type min(A a, B b) {
    using C = typename std::common_type<A, B>::type;
    if constexpr (std::is_floating_point<C>::value) return std::fmin((C)a, (C)b);
    else return (C)b < (C)a ? (C)b : (C)a;
}
template <class A, class B>
inline typename std::common_type<A, B>::type max(A a, B b) {
    using C = typename std::common_type<A, B>::type;
    if constexpr (std::is_floating_point<C>::value) return std::fmax((C)a, (C)b);
    else return (C)a < (C)b ? (C)b : (C)a;
}

// ---- math intrinsics (the accurate libm function stands in for each fast approximation; the
// kernels' bounds already allow the approximation's larger error) ----
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __fdividef(float a, float b) { return a / b; }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __frsqrt_rn(float x) { return 1.0f / sqrtf(x); }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : (x == x ? x : 0.0f)); }
inline int __float2int_rn(float x) { return (int)nearbyintf(x); }
inline int __float2int_rz(float x) { return (int)x; }
inline int __float2int_rd(float x) { return (int)floorf(x); }
inline int __float2int_ru(float x) { return (int)ceilf(x); }
inline unsigned __float2uint_rn(float x) { return (unsigned)nearbyintf(x); }
inline float __int2float_rn(int x) { return (float)x; }

// ---- bit reinterpretation and bit tricks ----
inline float __int_as_float(int v) { float f; std::memcpy(&f, &v, 4); return f; }
inline float __uint_as_float(unsigned v) { float f; std::memcpy(&f, &v, 4); return f; }
inline int __float_as_int(float f) { int v; std::memcpy(&v, &f, 4); return v; }
inline unsigned __float_as_uint(float f) { unsigned v; std::memcpy(&v, &f, 4); return v; }
inline double __longlong_as_double(long long v) { double d; std::memcpy(&d, &v, 8); return d; }
inline long long __double_as_longlong(double d) { long long v; std::memcpy(&v, &d, 8); return v; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) {
    unsigned r = 0;
    for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
    return r;
}
// Bytes of {y:x} (x in bytes 0-3) picked by the four selector nibbles of s.
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
    const unsigned long long both = ((unsigned long long)y << 32) | x;
    unsigned r = 0;
    for (int i = 0; i < 4; ++i) r |= (unsigned)((both >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
    return r;
}
// Funnel shifts of the 64-bit {hi:lo}, shift amount taken mod 32 (the clamping forms at 32).
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned shift) {
    return (unsigned)((((unsigned long long)hi << 32) | lo) >> (shift & 31));
}
inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned shift) {
    return (unsigned)(((((unsigned long long)hi << 32) | lo) << (shift & 31)) >> 32);
}
inline unsigned __funnelshift_rc(unsigned lo, unsigned hi, unsigned shift) {
    return (unsigned)((((unsigned long long)hi << 32) | lo) >> (shift > 32 ? 32 : shift));
}
inline unsigned __funnelshift_lc(unsigned lo, unsigned hi, unsigned shift) {
    return (unsigned)(((((unsigned long long)hi << 32) | lo) << (shift > 32 ? 32 : shift)) >> 32);
}
inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
inline int __mul24(int a, int b) { return (int)((long long)(a << 8 >> 8) * (b << 8 >> 8)); }
inline unsigned __umul24(unsigned a, unsigned b) { return (a & 0xffffffu) * (b & 0xffffffu); }

// ---- memory ----
template <class T>
inline T __ldg(const T* p) { return *p; }
template <class T>
inline T __ldcs(const T* p) { return *p; }
template <class T>
inline T __ldcg(const T* p) { return *p; }
template <class T>
inline void __stcs(T* p, T v) { *p = v; }
template <class T>
inline void __stcg(T* p, T v) { *p = v; }
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline long long clock64() { return emu::clock_ns(); }

// ---- atomics: CTAs run on several OS threads, so these are real atomics ----
#define EMU_ATOMIC_RMW(name, op, T) \
    inline T name(T* p, T v) { return __atomic_##op(p, v, __ATOMIC_SEQ_CST); }
EMU_ATOMIC_RMW(atomicAdd, fetch_add, int)
EMU_ATOMIC_RMW(atomicAdd, fetch_add, unsigned)
EMU_ATOMIC_RMW(atomicAdd, fetch_add, unsigned long long)
EMU_ATOMIC_RMW(atomicSub, fetch_sub, int)
EMU_ATOMIC_RMW(atomicSub, fetch_sub, unsigned)
EMU_ATOMIC_RMW(atomicAnd, fetch_and, int)
EMU_ATOMIC_RMW(atomicAnd, fetch_and, unsigned)
EMU_ATOMIC_RMW(atomicOr, fetch_or, int)
EMU_ATOMIC_RMW(atomicOr, fetch_or, unsigned)
EMU_ATOMIC_RMW(atomicXor, fetch_xor, int)
EMU_ATOMIC_RMW(atomicXor, fetch_xor, unsigned)
EMU_ATOMIC_RMW(atomicExch, exchange_n, int)
EMU_ATOMIC_RMW(atomicExch, exchange_n, unsigned)
EMU_ATOMIC_RMW(atomicExch, exchange_n, unsigned long long)
#undef EMU_ATOMIC_RMW
template <class T>
inline T emu_atomic_update(T* p, T (*f)(T, T), T v) {
    T old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (!__atomic_compare_exchange_n(p, &old, f(old, v), false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
    }
    return old;
}
inline int atomicMax(int* p, int v) { return emu_atomic_update<int>(p, [](int a, int b) { return a > b ? a : b; }, v); }
inline unsigned atomicMax(unsigned* p, unsigned v) {
    return emu_atomic_update<unsigned>(p, [](unsigned a, unsigned b) { return a > b ? a : b; }, v);
}
inline unsigned long long atomicMax(unsigned long long* p, unsigned long long v) {
    return emu_atomic_update<unsigned long long>(p, [](unsigned long long a, unsigned long long b) { return a > b ? a : b; }, v);
}
inline int atomicMin(int* p, int v) { return emu_atomic_update<int>(p, [](int a, int b) { return a < b ? a : b; }, v); }
inline unsigned atomicMin(unsigned* p, unsigned v) {
    return emu_atomic_update<unsigned>(p, [](unsigned a, unsigned b) { return a < b ? a : b; }, v);
}
inline unsigned atomicInc(unsigned* p, unsigned limit) {
    return emu_atomic_update<unsigned>(p, [](unsigned a, unsigned l) { return a >= l ? 0u : a + 1; }, limit);
}
template <class T>
inline T emu_atomic_cas(T* p, T expected, T desired) {
    __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return expected;  // the old value, whether or not the swap happened
}
inline int atomicCAS(int* p, int e, int d) { return emu_atomic_cas(p, e, d); }
inline unsigned atomicCAS(unsigned* p, unsigned e, unsigned d) { return emu_atomic_cas(p, e, d); }
inline unsigned long long atomicCAS(unsigned long long* p, unsigned long long e, unsigned long long d) {
    return emu_atomic_cas(p, e, d);
}
inline unsigned short atomicCAS(unsigned short* p, unsigned short e, unsigned short d) { return emu_atomic_cas(p, e, d); }
// Float atomics through the bit pattern (compare-and-swap on the 32-bit word).
inline float emu_atomic_float(float* p, float (*f)(float, float), float v) {
    unsigned* word = reinterpret_cast<unsigned*>(p);
    unsigned old = __atomic_load_n(word, __ATOMIC_SEQ_CST);
    while (!__atomic_compare_exchange_n(word, &old, __float_as_uint(f(__uint_as_float(old), v)), false,
                                        __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
    }
    return __uint_as_float(old);
}
inline float atomicAdd(float* p, float v) { return emu_atomic_float(p, [](float a, float b) { return a + b; }, v); }
inline float atomicExch(float* p, float v) { return __uint_as_float(atomicExch(reinterpret_cast<unsigned*>(p), __float_as_uint(v))); }
inline float atomicMax(float* p, float v) { return emu_atomic_float(p, [](float a, float b) { return fmaxf(a, b); }, v); }
inline float atomicMin(float* p, float v) { return emu_atomic_float(p, [](float a, float b) { return fminf(a, b); }, v); }

#include "emu_warp.h"
#include "emu_ptx.h"

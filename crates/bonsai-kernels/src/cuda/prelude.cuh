// Shared definitions for every bonsai kernel. Concatenated first into the single module.
// No CUDA headers are included: NVRTC ships none, and the kernels need only builtins
// (threadIdx, __shfl_xor_sync, ...), which both nvcc and NVRTC provide without an #include.

typedef signed char i8;
typedef unsigned char u8;
typedef short i16;
typedef unsigned short u16;
typedef int i32;
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;

// Threads per warp on every architecture bonsai targets.
#define BONSAI_WARP_SIZE 32
// Mask naming every lane of a full warp, for the *_sync intrinsics.
#define BONSAI_FULL_WARP 0xffffffffu

// Helpers are `__forceinline__` but not `static`: NVRTC warns about every unreferenced static
// function, and a kernel file uses only some of them.

// ---- half and bfloat16 as raw 16-bit patterns -------------------------------------------
// Device buffers hold f16/bf16 as u16 bit patterns (the host's `half` crate writes the same
// bytes). Conversions use the hardware instructions through inline PTX, so no header is needed.

// f16 bits -> f32, exact (every f16 is representable as f32).
__device__ __forceinline__ float f16_to_f32(u16 bits) {
    float value;
    asm("cvt.f32.f16 %0, %1;" : "=f"(value) : "h"(bits));
    return value;
}

// f32 -> f16 bits, round to nearest even (the rounding the host reference uses).
__device__ __forceinline__ u16 f32_to_f16(float value) {
    u16 bits;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(bits) : "f"(value));
    return bits;
}

// bf16 bits -> f32, exact: bf16 is the top half of an f32.
__device__ __forceinline__ float bf16_to_f32(u16 bits) {
    return __uint_as_float(((u32)bits) << 16);
}

// f32 -> bf16 bits, round to nearest even (sm_80+ instruction).
__device__ __forceinline__ u16 f32_to_bf16(float value) {
    u16 bits;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(bits) : "f"(value));
    return bits;
}

// ---- warp reductions ----------------------------------------------------------------------
// Butterfly reductions: after the loop every lane holds the result for the whole warp.

__device__ __forceinline__ float warp_sum_f32(float value) {
    for (int offset = BONSAI_WARP_SIZE / 2; offset > 0; offset /= 2) {
        value += __shfl_xor_sync(BONSAI_FULL_WARP, value, offset);
    }
    return value;
}

__device__ __forceinline__ float warp_max_f32(float value) {
    for (int offset = BONSAI_WARP_SIZE / 2; offset > 0; offset /= 2) {
        value = fmaxf(value, __shfl_xor_sync(BONSAI_FULL_WARP, value, offset));
    }
    return value;
}

__device__ __forceinline__ i32 warp_sum_i32(i32 value) {
    for (int offset = BONSAI_WARP_SIZE / 2; offset > 0; offset /= 2) {
        value += __shfl_xor_sync(BONSAI_FULL_WARP, value, offset);
    }
    return value;
}

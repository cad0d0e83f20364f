// y = x * sigmoid(x), elementwise; in place when y == x (hence no __restrict__).
//
// Memory-bound (8 bytes per element). Vector path (both pointers 16-byte aligned): each thread
// issues SILU_LOADS_IN_FLIGHT float4 loads (CTA-strided, so each load instruction of a warp is
// 512 coalesced bytes) before computing and storing any, then strides over the grid; a scalar
// tail finishes the last len % 4. The launcher sizes the grid so small tensors (384 ch x 64²:
// 393K float4s) run as ONE wave of 384 CTAs (<= 3 per SM) instead of 1.45 waves of one-float4
// threads, whose second, partial wave was the tail that kept 64² at 47% of copy.
// sigmoid through e = expf(-|x|) (never overflows): 1/(1+e) for x >= 0, e/(1+e) below, the same
// form as the CPU version (ops/silu/cpu.rs), so a large negative x gives a tiny y, not x/inf.
//
// Speed of light (H200, 4.8 TB/s): 8 bytes per element; 384 ch x 64² -> 2.6 us, x 128² -> 10.5 us,
// x 512² -> 168 us; 64² is launch-dominated. Measured: docs/kernel-notes.md, "GroupNorm and the
// VAE element-wise ops".

#define SILU_LOADS_IN_FLIGHT 4

// The divide is __fdividef (reciprocal + multiply, <= 2 ulp for a denominator in [1, 2]): the
// IEEE one cost ~8 instructions per element of the ~20, which the fused GroupNorm + SiLU pays in
// its memory-bound pass (error bound: verify/image_elementwise.rs).
__device__ __forceinline__ float silu_stable(float x) {
    const float e = expf(-fabsf(x));
    const float numerator = x >= 0.0f ? 1.0f : e;
    return x * __fdividef(numerator, 1.0f + e);
}

__device__ __forceinline__ float4 silu_stable4(float4 v) {
    return make_float4(silu_stable(v.x), silu_stable(v.y), silu_stable(v.z), silu_stable(v.w));
}

extern "C" __global__ void silu_grid_stride(const float* x, float* y, long long len) {
    griddep_wait();
    griddep_launch_dependents();
    const bool vec4 = ((reinterpret_cast<unsigned long long>(x) |
                        reinterpret_cast<unsigned long long>(y)) & 15) == 0;
    long long scalar_from = 0;
    if (vec4) {
        const long long len4 = len >> 2, step = blockDim.x;
        const long long stride = (long long)gridDim.x * blockDim.x * SILU_LOADS_IN_FLIGHT;
        const float4* x4 = reinterpret_cast<const float4*>(x);
        float4* y4 = reinterpret_cast<float4*>(y);
        for (long long i = (long long)blockIdx.x * blockDim.x * SILU_LOADS_IN_FLIGHT + threadIdx.x; i < len4;
             i += stride) {
            float4 v[SILU_LOADS_IN_FLIGHT];
#pragma unroll
            for (int u = 0; u < SILU_LOADS_IN_FLIGHT; ++u)
                if (i + u * step < len4) v[u] = x4[i + u * step];
#pragma unroll
            for (int u = 0; u < SILU_LOADS_IN_FLIGHT; ++u)
                if (i + u * step < len4) y4[i + u * step] = silu_stable4(v[u]);
        }
        scalar_from = len4 << 2;
    }
    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long scalar_stride = (long long)gridDim.x * blockDim.x;
    for (long long i = scalar_from + first; i < len; i += scalar_stride) y[i] = silu_stable(x[i]);
}

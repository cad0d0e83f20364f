// y = x * sigmoid(x), elementwise, grid-stride; in place when y == x (hence no __restrict__).
//
// Memory-bound (8 bytes per element): the vector path moves float4s (16-byte loads and stores)
// whenever both pointers are 16-byte aligned, then a scalar tail finishes the last len % 4.
// sigmoid through e = expf(-|x|) (never overflows): 1/(1+e) for x >= 0, e/(1+e) below, the same
// form as the CPU version (ops/silu/cpu.rs), so a large negative x gives a tiny y, not x/inf.

__device__ __forceinline__ float silu_stable(float x) {
    const float e = expf(-fabsf(x));
    const float numerator = x >= 0.0f ? 1.0f : e;
    return x * (numerator / (1.0f + e));
}

extern "C" __global__ void silu_grid_stride(const float* x, float* y, long long len) {
    griddep_wait();
    griddep_launch_dependents();
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const bool vec4 = ((reinterpret_cast<unsigned long long>(x) |
                        reinterpret_cast<unsigned long long>(y)) & 15) == 0;
    long long scalar_from = 0;
    if (vec4) {
        const long long len4 = len >> 2;
        const float4* x4 = reinterpret_cast<const float4*>(x);
        float4* y4 = reinterpret_cast<float4*>(y);
        for (long long i = first; i < len4; i += stride) {
            const float4 v = x4[i];
            y4[i] = make_float4(silu_stable(v.x), silu_stable(v.y), silu_stable(v.z), silu_stable(v.w));
        }
        scalar_from = len4 << 2;
    }
    for (long long i = scalar_from + first; i < len; i += stride) y[i] = silu_stable(x[i]);
}

// y[r, :] = x[r, :] * w / sqrt(mean(x[r, :]^2) + eps). One CTA per row, f32 sums.
//
// Decode runs this on one 4096-float row: a single CTA whose time is pure load latency. The
// loads are therefore 16-byte and unrolled so every thread has all of its loads in flight at
// once (a plain strided loop waited on one L2 round trip per element: docs/kernel-notes.md,
// "Outside the layers: host loop, step ends, PDL"). Unroll 4: a 4096 row over 256 threads is
// exactly 4 float4 loads per thread.

extern "C" __global__ void rms_norm_row_per_block(const float* __restrict__ x,
                                                  const float* __restrict__ w, float eps,
                                                  float* __restrict__ y, int n) {
    griddep_wait();
    griddep_launch_dependents();
    __shared__ float scratch[WARP_SIZE];
    const float* xr = x + (long long)blockIdx.x * n;
    float* yr = y + (long long)blockIdx.x * n;
    // 16-byte path when every row starts 16-byte aligned (n % 4 == 0 and 16-byte-aligned bases,
    // which device allocations are); a scalar path otherwise.
    const bool vec4 = (n & 3) == 0 && ((reinterpret_cast<unsigned long long>(x) |
                                         reinterpret_cast<unsigned long long>(w) |
                                         reinterpret_cast<unsigned long long>(y)) & 15) == 0;
    float ss = 0.0f;
    if (vec4) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        const int n4 = n >> 2;
#pragma unroll 4
        for (int i = threadIdx.x; i < n4; i += blockDim.x) {
            const float4 v = x4[i];
            ss = fmaf(v.x, v.x, ss);
            ss = fmaf(v.y, v.y, ss);
            ss = fmaf(v.z, v.z, ss);
            ss = fmaf(v.w, v.w, ss);
        }
    } else {
#pragma unroll 4
        for (int i = threadIdx.x; i < n; i += blockDim.x) ss = fmaf(xr[i], xr[i], ss);
    }
    ss = block_sum(ss, scratch);
    const float inv = rsqrtf(ss / (float)n + eps);
    if (vec4) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        const float4* w4 = reinterpret_cast<const float4*>(w);
        float4* y4 = reinterpret_cast<float4*>(yr);
        const int n4 = n >> 2;
#pragma unroll 4
        for (int i = threadIdx.x; i < n4; i += blockDim.x) {
            const float4 v = x4[i];
            const float4 g = w4[i];
            y4[i] = make_float4(v.x * inv * g.x, v.y * inv * g.y, v.z * inv * g.z, v.w * inv * g.w);
        }
    } else {
#pragma unroll 4
        for (int i = threadIdx.x; i < n; i += blockDim.x) yr[i] = xr[i] * inv * w[i];
    }
}

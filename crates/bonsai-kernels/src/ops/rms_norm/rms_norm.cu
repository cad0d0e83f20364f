// y[r, :] = x[r, :] * w / sqrt(mean(x[r, :]^2) + eps). One CTA per row, f32 sums.
//
// Decode runs this on one 4096-float row: a single CTA whose time is pure load latency. The
// loads are therefore 16-byte and unrolled so every thread has all of its loads in flight at
// once (a plain strided loop waited on one L2 round trip per element: docs/kernel-notes.md,
// "Outside the layers: host loop, step ends, PDL"). Unroll 4: a 4096 row over 256 threads is
// exactly 4 float4 loads per thread.

// Threads of rms_norm_row_per_block (ops/rms_norm/cuda.rs: THREADS). The fused rotation of
// ops/hadamard (hadamard_rotate_planes) takes a row's sum of squares over this many partial sums
// too (`rms_row_partial_sq`), so that its normed values are bit-identical to this kernel's.
#define RMS_NORM_THREADS 256

// Thread `t`'s partial sum of squares of the n floats at xr, as thread t of a CTA of `threads`
// takes it: float4 t, t + threads, ... when `vec4` (else element t, t + threads, ...), fmaf in
// that order. A CTA's block_sum of these is the row's sum of squares.
__device__ __forceinline__ float rms_row_partial_sq(const float* __restrict__ xr, int n, bool vec4, int t,
                                                    int threads) {
    float ss = 0.0f;
    if (vec4) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        const int n4 = n >> 2;
#pragma unroll 4
        for (int i = t; i < n4; i += threads) {
            const float4 v = x4[i];
            ss = fmaf(v.x, v.x, ss);
            ss = fmaf(v.y, v.y, ss);
            ss = fmaf(v.z, v.z, ss);
            ss = fmaf(v.w, v.w, ss);
        }
    } else {
#pragma unroll 4
        for (int i = t; i < n; i += threads) ss = fmaf(xr[i], xr[i], ss);
    }
    return ss;
}

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
    float ss = rms_row_partial_sq(xr, n, vec4, threadIdx.x, blockDim.x);
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

// y[r, :] = x[r, :] * w / sqrt(mean(x[r, :]^2) + eps). One CTA per row, f32 sums.
extern "C" __global__ void rms_norm_row_per_block(const float* __restrict__ x,
                                                  const float* __restrict__ w, float eps,
                                                  float* __restrict__ y, int n) {
    __shared__ float scratch[WARP_SIZE];
    const float* xr = x + (long long)blockIdx.x * n;
    float* yr = y + (long long)blockIdx.x * n;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) ss = fmaf(xr[i], xr[i], ss);
    ss = block_sum(ss, scratch);
    const float inv = rsqrtf(ss / (float)n + eps);
    for (int i = threadIdx.x; i < n; i += blockDim.x) yr[i] = xr[i] * inv * w[i];
}

// Each row of n, in place: x = exp(x - max) / sum(exp(x - max)). One CTA per row.
extern "C" __global__ void softmax_row_per_block(float* __restrict__ x, int n) {
    griddep_wait();
    griddep_launch_dependents();
    __shared__ float scratch[WARP_SIZE];
    float* xr = x + (long long)blockIdx.x * n;
    float mx = neg_inf();
    for (int i = threadIdx.x; i < n; i += blockDim.x) mx = fmaxf(mx, xr[i]);
    mx = block_max(mx, scratch);
    float s = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) s += expf(xr[i] - mx);
    s = block_sum(s, scratch);
    const float inv = 1.0f / s;
    for (int i = threadIdx.x; i < n; i += blockDim.x) xr[i] = expf(xr[i] - mx) * inv;
}

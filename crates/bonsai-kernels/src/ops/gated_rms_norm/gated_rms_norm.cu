// y_h = RMSNorm(x_h; w, eps) * silu(z_h) per head of d (ops/gated_rms_norm/mod.rs): one warp per
// head, GRN_WARPS heads per CTA. The lanes stride the head twice (sum of squares, then the
// gated store), so a head of 128 is 4 coalesced 128-byte loads per pass.

#define GRN_WARPS 8

extern "C" __global__ void gated_rms_norm_warp_per_head(const float* __restrict__ x, const float* __restrict__ z,
                                                        const float* __restrict__ w, float eps,
                                                        float* __restrict__ y, long long heads, int d) {
    griddep_wait();
    griddep_launch_dependents();
    const int lane = threadIdx.x % WARP_SIZE;
    const long long head = (long long)blockIdx.x * GRN_WARPS + threadIdx.x / WARP_SIZE;
    if (head >= heads) return;  // a whole warp leaves together
    const float* xh = x + head * d;
    const float* zh = z + head * d;
    float* yh = y + head * d;
    float ss = 0.0f;
    for (int i = lane; i < d; i += WARP_SIZE) ss = fmaf(xh[i], xh[i], ss);
    ss = warp_sum(ss);
    const float inv = rsqrtf(ss / (float)d + eps);
    for (int i = lane; i < d; i += WARP_SIZE) {
        const float g = zh[i];
        yh[i] = xh[i] * inv * w[i] * (g * sigmoid_stable(g));
    }
}

// In place on every q and k head of token i (position pos[0] + i): RMS-normalise the head with
// the shared hd-long weight, then NeoX RoPE (dims d and d + hd/2 rotate by angle index d) with
// cos/sin from a [max_pos][hd/2] table. grid (m, n_q + n_kv); blockDim.x = 32 * ceil(hd/2 / 32),
// one thread per rotating pair. A position >= max_pos (pos lives on the device, so the host
// cannot check it) turns the head into NaN rather than reading outside the table.
extern "C" __global__ void qk_norm_rope_head_per_block(float* __restrict__ qkv, int n_q, int n_kv,
                                                       int hd, const float* __restrict__ q_norm,
                                                       const float* __restrict__ k_norm, float eps,
                                                       const float* __restrict__ cos_table,
                                                       const float* __restrict__ sin_table,
                                                       int max_pos, const u32* __restrict__ pos0) {
    __shared__ float scratch[WARP_SIZE];
    const int token = blockIdx.x;
    const int head = blockIdx.y;  // [0, n_q) q heads, [n_q, n_q + n_kv) k heads
    const int half = hd / 2;
    const int d = threadIdx.x;
    const long long row = (long long)token * (n_q + 2 * n_kv) * hd;
    float* h = qkv + row + (long long)head * hd;
    const float* w = head < n_q ? q_norm : k_norm;
    const bool active = d < half;
    const float a = active ? h[d] : 0.0f;
    const float b = active ? h[d + half] : 0.0f;
    const float ss = block_sum(a * a + b * b, scratch);
    if (!active) return;
    const u32 pos = pos0[0] + (u32)token;
    if (pos >= (u32)max_pos) {
        const float nan = __int_as_float(0x7fc00000);
        h[d] = nan;
        h[d + half] = nan;
        return;
    }
    const float inv = rsqrtf(ss / (float)hd + eps);
    const float x1 = a * inv * w[d];
    const float x2 = b * inv * w[d + half];
    const float c = cos_table[(long long)pos * half + d];
    const float s = sin_table[(long long)pos * half + d];
    h[d] = x1 * c - x2 * s;
    h[d + half] = x2 * c + x1 * s;
}

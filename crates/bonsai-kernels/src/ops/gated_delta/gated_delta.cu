// The Gated DeltaNet recurrence of one sequence (ops/gated_delta/mod.rs), tiled V heads.
//
// grid (ceil(d / 32), v_heads); blockDim = 32 * ceil(d / 32). CTA (c, h) owns value columns
// j = 32c + lane of V head h; warp p keeps key rows i = 32p .. 32p + 31 of those columns in
// registers (s[r] = S[32p + r][j]) for all of the call's rows, so the state is read once and
// written once per call. Per row: every thread loads q and k of K head h % k_heads into shared
// memory with the sums of squares (block_sum), computes the gates, then
//   pass 1: s *= e^g, partial kv_j = sum_r s[r] k̂_i over its rows; the warps' partials meet in
//           shared memory and every thread sums its column's (same order everywhere);
//   δ_j = β (v_j − kv_j);
//   pass 2: s += k̂_i δ_j, partial o_j = sum_r s[r] q̂_i; warp 0 sums the partials and stores o.
// No host synchronisation: at decode (rows = 1) the launch is graph-capturable.
//
// Speed of light: the state's round trip, 2 v_heads d² 4 bytes (6 MiB at 48 heads of 128:
// 1.5 us at 4.3 TB/s per layer); at decode 192 CTAs of 128 threads stream it.

#define GDN_COLS 32
#define GDN_ROWS_PER_WARP 32

// ln(1 + e^x) without overflow (the CPU version's form).
__device__ __forceinline__ float softplus_stable(float x) { return fmaxf(x, 0.0f) + log1pf(expf(-fabsf(x))); }

// CTA (blockIdx.x, blockIdx.y) of a call of `rows` rows: the kernels below, one sequence each.
__device__ __forceinline__ void gated_delta_rows_body(const float* __restrict__ conv_out, const float* __restrict__ alpha,
                                                      const float* __restrict__ beta, const float* __restrict__ ssm_a,
                                                      const float* __restrict__ dt_bias, float* __restrict__ state,
                                                      float* __restrict__ out, int rows, int k_heads, int v_heads, int d,
                                                      float q_scale, float l2_eps) {
    extern __shared__ float gdn_smem[];  // q[d], k[d], partial[warps][32]
    __shared__ float scratch[WARP_SIZE];
    float* q_sh = gdn_smem;
    float* k_sh = gdn_smem + d;
    float* partial = gdn_smem + 2 * d;
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE, warps = blockDim.x / WARP_SIZE;
    const int h = blockIdx.y, kh = h % k_heads;
    const int j = blockIdx.x * GDN_COLS + lane;
    const bool column = j < d;
    const int row_len = (2 * k_heads + v_heads) * d;
    float* S = state + (long long)h * d * d;
    // The state before the wait: its last writer is this layer's launch of an earlier step (or
    // the prefill's), which completed before the previous kernel's wait returned, and every
    // kernel this one follows (ssm_conv, the prefill's state pass) waits before it triggers. So
    // its load overlaps the previous kernel instead of starting the chain after it.
    float s[GDN_ROWS_PER_WARP];
#pragma unroll
    for (int r = 0; r < GDN_ROWS_PER_WARP; ++r) {
        const int i = warp * GDN_ROWS_PER_WARP + r;
        s[r] = column && i < d ? S[(long long)i * d + j] : 0.0f;
    }
    griddep_wait();
    griddep_launch_dependents();
    for (int t = 0; t < rows; ++t) {
        const float* row = conv_out + (long long)t * row_len;
        float sq = 0.0f, sk = 0.0f;
        for (int i = threadIdx.x; i < d; i += blockDim.x) {
            const float qv = row[kh * d + i], kv = row[(k_heads + kh) * d + i];
            q_sh[i] = qv;
            k_sh[i] = kv;
            sq = fmaf(qv, qv, sq);
            sk = fmaf(kv, kv, sk);
        }
        sq = block_sum(sq, scratch);  // its barriers also publish q_sh and k_sh
        sk = block_sum(sk, scratch);
        const float rq = rsqrtf(sq + l2_eps) * q_scale, rk = rsqrtf(sk + l2_eps);
        const float g = ssm_a[h] * softplus_stable(alpha[(long long)t * v_heads + h] + dt_bias[h]);
        const float decay = expf(g);
        const float b = sigmoid_stable(beta[(long long)t * v_heads + h]);
        float acc = 0.0f;
#pragma unroll
        for (int r = 0; r < GDN_ROWS_PER_WARP; ++r) {
            const int i = warp * GDN_ROWS_PER_WARP + r;
            if (i < d) {
                s[r] *= decay;
                acc = fmaf(s[r], k_sh[i] * rk, acc);
            }
        }
        partial[warp * GDN_COLS + lane] = acc;
        __syncthreads();
        float kv = 0.0f;
        for (int p = 0; p < warps; ++p) kv += partial[p * GDN_COLS + lane];
        const float v = column ? row[(2 * k_heads + h) * d + j] : 0.0f;
        const float delta = b * (v - kv);
        __syncthreads();  // every thread has read the kv partials
        acc = 0.0f;
#pragma unroll
        for (int r = 0; r < GDN_ROWS_PER_WARP; ++r) {
            const int i = warp * GDN_ROWS_PER_WARP + r;
            if (i < d) {
                s[r] = fmaf(k_sh[i] * rk, delta, s[r]);
                acc = fmaf(s[r], q_sh[i] * rq, acc);
            }
        }
        partial[warp * GDN_COLS + lane] = acc;
        __syncthreads();
        if (warp == 0 && column) {
            float o = 0.0f;
            for (int p = 0; p < warps; ++p) o += partial[p * GDN_COLS + lane];
            out[(long long)t * v_heads * d + (long long)h * d + j] = o;
        }
        __syncthreads();  // partial, q_sh and k_sh are rewritten by the next row
    }
#pragma unroll
    for (int r = 0; r < GDN_ROWS_PER_WARP; ++r) {
        const int i = warp * GDN_ROWS_PER_WARP + r;
        if (column && i < d) S[(long long)i * d + j] = s[r];
    }
}

extern "C" __global__ void gated_delta_rows(const float* __restrict__ conv_out, const float* __restrict__ alpha,
                                            const float* __restrict__ beta, const float* __restrict__ ssm_a,
                                            const float* __restrict__ dt_bias, float* __restrict__ state,
                                            float* __restrict__ out, int rows, int k_heads, int v_heads, int d,
                                            float q_scale, float l2_eps) {
    gated_delta_rows_body(conv_out, alpha, beta, ssm_a, dt_bias, state, out, rows, k_heads, v_heads, d, q_scale, l2_eps);
}

// A batched decode step's one-row sequences in one launch (grid.z = entry of the recurrent-state
// table, as ssm_conv_seqs): entry e's row of conv_out, alpha, beta and out and its DeltaNet state
// of layer slot `slot`, each CTA exactly as gated_delta_rows' one-row launch. The table entry is
// read before the wait with the state: the host writes the table before the step's first launch.
extern "C" __global__ void gated_delta_seqs(const float* __restrict__ conv_out, const float* __restrict__ alpha,
                                            const float* __restrict__ beta, const float* __restrict__ ssm_a,
                                            const float* __restrict__ dt_bias,
                                            const unsigned long long* __restrict__ table, int seqs, int slot,
                                            float* __restrict__ out, int k_heads, int v_heads, int d, float q_scale,
                                            float l2_eps) {
    const int e = blockIdx.z;
    const long long row = (long long)table[e];
    float* state = reinterpret_cast<float*>(table[seqs + (2LL * slot + 1) * seqs + e]);
    const long long row_len = (long long)(2 * k_heads + v_heads) * d;
    gated_delta_rows_body(conv_out + row * row_len, alpha + row * v_heads, beta + row * v_heads, ssm_a, dt_bias, state,
                          out + row * v_heads * d, 1, k_heads, v_heads, d, q_scale, l2_eps);
}

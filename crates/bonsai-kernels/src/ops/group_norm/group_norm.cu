// GroupNorm(G, C, eps) on x: [C, H, W] (PyTorch semantics: biased variance, eps inside the
// root), two kernels sharing a caller-owned f64 scratch of 2 doubles per (group, split):
//
// 1. group_norm_partial_stats, grid (splits, G): a group is n = (C/G)·H·W contiguous floats,
//    cut into `splits` chunks of `chunk` floats (a multiple of 4); each CTA sums d = x - K and
//    d² over its chunk in f64 and writes the pair. K, the shift, is the mean of the group's
//    first min(32, n) values (one warp-sum, identical in every CTA), so the one-pass
//    Σd² - (Σd)²/n loses little to cancellation: its relative error is 2(u + n·2^-53)·κ² with
//    κ² = (σ² + (μ - K)²)/(σ² + eps), about 1 for any data whose first 32 values look like the
//    rest (u from rounding d to f32, n·2^-53 from the f64 sums).
// 2. group_norm_normalize, grid (plane chunks, C): each CTA combines its group's `splits`
//    pairs in a fixed order (deterministic: the same bits on every run and in every CTA), forms
//    μ and a = gamma[c]/sqrt(σ² + eps) in f64, rounds both to f32 once (as the CPU version
//    does), and writes y = (x - μ)·a + beta[c] over its chunk of channel c's plane, or
//    silu(y) when `apply_silu` (the VAE's GroupNorm -> SiLU in one pass). Channels are visited
//    last-first, so the tail of the input that pass 1 left in L2 is read first.
//
//    Each thread loads its first batch of x (GN_LOADS_IN_FLIGHT float4s) BEFORE the statistics
//    prologue, so that latency overlaps the shift and partial loads instead of following them
//    (at 64² a CTA's whole chunk is that one batch, so no load waits on the statistics). The
//    launch carries PDL and waits (griddep_wait) only before reading the partial sums, so the
//    launch, the CTA ramp and those loads overlap the statistics launch's tail.
//
// Traffic: 12 bytes per element (two reads, one write); see ops/group_norm/cuda.rs.
// Speed of light (H200, 4.8 TB/s), 384 ch, G = 32: 64²: 18.9 MB -> 3.9 us; 128²: 75.5 MB ->
// 15.7 us. At 64² two dependent launches (each a device launch gap plus load latency chains)
// keep it well short of that; 70% of copy there needs one launch, i.e. a grid- or cluster-wide
// merge of the statistics. Measured: docs/kernel-notes.md, "GroupNorm and the VAE element-wise
// ops".

#define GN_SHIFT_SAMPLES 32
// float4 loads each thread issues before using any (memory-level parallelism: with one load
// in flight per thread an SM holds too few bytes in flight to cover HBM latency).
#define GN_LOADS_IN_FLIGHT 4

__device__ __forceinline__ void group_norm_accumulate(float4 v, float shift, double& s1, double& s2) {
    const double d0 = v.x - shift, d1 = v.y - shift, d2 = v.z - shift, d3 = v.w - shift;
    s1 += (d0 + d1) + (d2 + d3);
    s2 = fma(d0, d0, fma(d1, d1, fma(d2, d2, fma(d3, d3, s2))));
}

// (x - mean)·scale + shift, then SiLU when fused (silu_stable from silu.cu, listed earlier).
template <bool Silu>
__device__ __forceinline__ float group_norm_affine1(float v, float mean, float scale, float shift) {
    const float y = (v - mean) * scale + shift;
    return Silu ? silu_stable(y) : y;
}

template <bool Silu>
__device__ __forceinline__ float4 group_norm_affine(float4 v, float mean, float scale, float shift) {
    return make_float4(group_norm_affine1<Silu>(v.x, mean, scale, shift),
                       group_norm_affine1<Silu>(v.y, mean, scale, shift),
                       group_norm_affine1<Silu>(v.z, mean, scale, shift),
                       group_norm_affine1<Silu>(v.w, mean, scale, shift));
}

// The first GN_LOADS_IN_FLIGHT float4s a thread of the normalise pass writes, loaded before the
// group's statistics are known (their latency overlaps the statistics prologue; at 64² the
// whole chunk of a CTA is this one batch). Entries past `end4` are left unloaded.
struct GroupNormPrefetch {
    float4 v[GN_LOADS_IN_FLIGHT];
    __device__ __forceinline__ void load(const float4* __restrict__ x4, long long i, long long end4) {
#pragma unroll
        for (int u = 0; u < GN_LOADS_IN_FLIGHT; ++u)
            if (i + u * (long long)blockDim.x < end4) v[u] = x4[i + u * (long long)blockDim.x];
    }
};

// Writes y over float4s [i, end4) of one channel plane, CTA-strided, in batches of
// GN_LOADS_IN_FLIGHT float4s per thread, software-pipelined: the next batch's loads are issued
// before the current batch is computed and stored, so every thread keeps a batch of loads in
// flight while it computes (with the fused SiLU's ~20 instructions per element, computing a batch
// takes long enough that load-then-compute left HBM idle; 128² at 65% of copy). `first` is the
// batch loaded before the statistics.
template <bool Silu>
__device__ __forceinline__ void group_norm_write_vec4(const float4* __restrict__ x4, float4* __restrict__ y4,
                                                      long long i, long long end4, const GroupNormPrefetch& first,
                                                      float mean, float scale, float shift) {
    const long long step = blockDim.x;
    GroupNormPrefetch cur = first;
    for (; i < end4; i += GN_LOADS_IN_FLIGHT * step) {
        GroupNormPrefetch next;
        next.load(x4, i + GN_LOADS_IN_FLIGHT * step, end4);
#pragma unroll
        for (int u = 0; u < GN_LOADS_IN_FLIGHT; ++u)
            if (i + u * step < end4) y4[i + u * step] = group_norm_affine<Silu>(cur.v[u], mean, scale, shift);
        cur = next;
    }
}

// Scalar path over [begin, end) of one channel plane.
template <bool Silu>
__device__ __forceinline__ void group_norm_write_scalar(const float* __restrict__ xc, float* __restrict__ yc,
                                                        long long begin, long long end, float mean, float scale,
                                                        float shift) {
    for (long long i = begin + threadIdx.x; i < end; i += blockDim.x)
        yc[i] = group_norm_affine1<Silu>(xc[i], mean, scale, shift);
}

__device__ __forceinline__ double group_norm_warp_sum_f64(double v) {
#pragma unroll
    for (int offset = WARP_SIZE / 2; offset > 0; offset >>= 1)
        v += __shfl_xor_sync(FULL_MASK, v, offset);
    return v;
}

// Sum over the CTA (blockDim.x a multiple of 32, <= 1024); thread 0 gets the total.
__device__ __forceinline__ double group_norm_block_sum_f64(double v, double* scratch) {
    const int lane = threadIdx.x % WARP_SIZE;
    const int warp = threadIdx.x / WARP_SIZE;
    v = group_norm_warp_sum_f64(v);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    double t = lane < (int)(blockDim.x / WARP_SIZE) ? scratch[lane] : 0.0;
    t = group_norm_warp_sum_f64(t);
    __syncthreads();
    return t;
}

// The shift K of a group: the mean of its first min(32, n) values, the same in every warp.
__device__ __forceinline__ float group_norm_shift(const float* __restrict__ xg, long long n) {
    const int lane = threadIdx.x % WARP_SIZE;
    const int samples = n < GN_SHIFT_SAMPLES ? (int)n : GN_SHIFT_SAMPLES;
    const float v = lane < samples ? xg[lane] : 0.0f;
    return warp_sum(v) / (float)samples;
}

extern "C" __global__ void group_norm_partial_stats(const float* __restrict__ x, long long n_group,
                                                    long long chunk, double* __restrict__ partial) {
    griddep_wait();
    griddep_launch_dependents();
    __shared__ double scratch[WARP_SIZE];
    const int split = blockIdx.x, group = blockIdx.y;
    const float* xg = x + (long long)group * n_group;
    const float shift = group_norm_shift(xg, n_group);
    const long long begin = (long long)split * chunk;
    const long long end = begin + chunk < n_group ? begin + chunk : n_group;
    double s1 = 0.0, s2 = 0.0;
    // Chunks start at multiples of 4 floats; float4 when the group starts 16-byte aligned.
    const bool vec4 = (n_group & 3) == 0 && (reinterpret_cast<unsigned long long>(x) & 15) == 0;
    if (vec4) {
        // Software-pipelined like group_norm_write_vec4: the next batch's loads fly while the
        // current one is summed (the f64 conversions and sums are not free).
        const float4* x4 = reinterpret_cast<const float4*>(xg);
        const long long end4 = end >> 2, step = blockDim.x;
        long long i = (begin >> 2) + threadIdx.x;
        GroupNormPrefetch cur;
        cur.load(x4, i, end4);
        for (; i < end4; i += GN_LOADS_IN_FLIGHT * step) {
            GroupNormPrefetch next;
            next.load(x4, i + GN_LOADS_IN_FLIGHT * step, end4);
#pragma unroll
            for (int u = 0; u < GN_LOADS_IN_FLIGHT; ++u)
                if (i + u * step < end4) group_norm_accumulate(cur.v[u], shift, s1, s2);
            cur = next;
        }
    } else {
        for (long long i = begin + threadIdx.x; i < end; i += blockDim.x) {
            const double d = xg[i] - shift;
            s1 += d;
            s2 = fma(d, d, s2);
        }
    }
    s1 = group_norm_block_sum_f64(s1, scratch);
    s2 = group_norm_block_sum_f64(s2, scratch);
    if (threadIdx.x == 0) {
        double* out = partial + 2 * ((long long)group * gridDim.x + split);
        out[0] = s1;
        out[1] = s2;
    }
}

// The normalise pass; it calls griddep_wait itself, after its first loads of x (launch_ex.rs
// DEFERRED_WAIT).
__device__ __forceinline__ void group_norm_normalize_body(const float* __restrict__ x, const float* __restrict__ gamma,
                                                          const float* __restrict__ beta,
                                                          const double* __restrict__ partial, float eps, int channels,
                                                          int channels_per_group, long long plane, int splits,
                                                          long long plane_chunk, int apply_silu, float* __restrict__ y) {
    __shared__ float stats[2];
    const int c = channels - 1 - (int)blockIdx.y;
    const int group = c / channels_per_group;
    const long long n_group = (long long)channels_per_group * plane;
    const long long begin = (long long)blockIdx.x * plane_chunk;
    const long long end = begin + plane_chunk < plane ? begin + plane_chunk : plane;
    const float* xc = x + (long long)c * plane;
    float* yc = y + (long long)c * plane;
    const bool vec4 = (plane & 3) == 0 && (plane_chunk & 3) == 0 &&
                      ((reinterpret_cast<unsigned long long>(x) |
                        reinterpret_cast<unsigned long long>(y)) & 15) == 0;
    const float4* x4 = reinterpret_cast<const float4*>(xc);
    const long long i4 = (begin >> 2) + threadIdx.x, end4 = end >> 2;
    // x, gamma and beta are the op's inputs, complete before the statistics launch passed its
    // own griddep_wait (and so before this launch could start): only the partial sums need the
    // wait. The launcher launches this kernel with PDL, so its CTAs start, and these first loads
    // fly, while the statistics launch drains.
    GroupNormPrefetch first;
    if (vec4) first.load(x4, i4, end4);
    const float shift = threadIdx.x < WARP_SIZE ? group_norm_shift(x + (long long)group * n_group, n_group) : 0.0f;
    griddep_wait();
    griddep_launch_dependents();
    if (threadIdx.x < WARP_SIZE) {
        const double* pg = partial + 2LL * group * splits;
        double s1 = 0.0, s2 = 0.0;
        for (int s = threadIdx.x; s < splits; s += WARP_SIZE) {
            s1 += pg[2 * s];
            s2 += pg[2 * s + 1];
        }
        s1 = group_norm_warp_sum_f64(s1);
        s2 = group_norm_warp_sum_f64(s2);
        if (threadIdx.x == 0) {
            const double n = (double)n_group;
            const double mean_d = s1 / n;
            const double var = fmax(s2 / n - mean_d * mean_d, 0.0);
            stats[0] = (float)((double)shift + mean_d);
            stats[1] = (float)((double)gamma[c] / sqrt(var + (double)eps));
        }
    }
    __syncthreads();
    const float mean = stats[0], scale = stats[1], shift_out = beta[c];
    float4* y4 = reinterpret_cast<float4*>(yc);
    if (vec4) {
        if (apply_silu)
            group_norm_write_vec4<true>(x4, y4, i4, end4, first, mean, scale, shift_out);
        else
            group_norm_write_vec4<false>(x4, y4, i4, end4, first, mean, scale, shift_out);
    } else if (apply_silu) {
        group_norm_write_scalar<true>(xc, yc, begin, end, mean, scale, shift_out);
    } else {
        group_norm_write_scalar<false>(xc, yc, begin, end, mean, scale, shift_out);
    }
}

extern "C" __global__ void group_norm_normalize(const float* __restrict__ x,
                                                const float* __restrict__ gamma,
                                                const float* __restrict__ beta,
                                                const double* __restrict__ partial, float eps,
                                                int channels, int channels_per_group,
                                                long long plane, int splits, long long plane_chunk,
                                                int apply_silu, float* __restrict__ y) {
    group_norm_normalize_body(x, gamma, beta, partial, eps, channels, channels_per_group, plane, splits, plane_chunk,
                              apply_silu, y);
}

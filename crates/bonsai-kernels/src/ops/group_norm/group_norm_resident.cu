// GroupNorm in ONE cooperative launch (group_norm_resident), 8 bytes per element: x is read
// once into shared memory and y written once from it. Uses group_norm.cu's helpers (listed just
// before it) and grid_sync (cuda/grid_sync.cuh).
//
// x, y: [C, plane] f32, plane % 4 == 0 (so no float4 straddles a channel or a group), 16-byte
// aligned. CTA k owns the contiguous float4 slice [k·slice4, min((k+1)·slice4, total4)).
//
// Phase 1: the CTA copies its slice into dynamic shared memory with cp.async, every copy issued
//   up front in GN_RES_STAGES commit groups (a whole slice in flight per SM), and then sums, per
//   group its slice touches and in slice order, d = x − K and d² in f64 from shared memory as
//   each stage lands (K: the group's shift, group_norm_shift, the same bits in every CTA). The
//   CTA's pair for group g goes to partial slot k + g: slices and groups are both contiguous
//   runs in the same order, so no two non-empty (slice, group) pieces share k + g (if k < k' and
//   g > g', a piece of (k, g) would lie both before and after one of (k', g')); CTAs + G slots.
// grid_sync.
// Phase 2: for each group its slice touches, one warp adds the group's pairs (slots first + g ..
//   last + g, first/last: the CTAs holding its first/last float4) in a fixed lane-strided order
//   then a fixed butterfly: deterministic, the same bits in every CTA and on every run. μ and
//   a = gamma[c]/sqrt(σ² + eps) are formed in f64 and rounded once, as in group_norm_normalize,
//   and the CTA writes y = (x − μ)·a + beta[c] (or its SiLU) from shared memory, float4 stores.
//
// Accuracy: the same sums of the same f32 d's as the two-kernel path, only cut into different
// pieces (per thread, then per CTA, then per group); the f64 error bound γ_n·Σ|d| of any order
// of summation applies unchanged, so verify/image_elementwise.rs's group_norm_bound holds as is.
//
// The barrier counter (scratch word 0) is zero between launches: after the barrier every CTA adds
// one more arrival, and the CTA making it 2·CTAs (so every CTA has left its spin) stores zero.
//
// Speed of light (H200, copy 4.24 TB/s counting read + write bytes), 384 ch, G = 32, 8 B/element:
//   64²: 12.6 MB -> 3.0 µs; 70% needs <= 4.2 µs. Predicted ~5.5-6.5 µs (~46-54% at 8 B; 68-80%
//        by the two-pass path's 12 B accounting; that path measured 11.9 µs): launch + drain
//        ~1-1.5 µs, first-byte latency ~1 µs, read 6.3 MB ~1.5 µs, barrier ~0.5-1 µs (132
//        arrivals at one word, then the partials' L2 round trip), write ~1.5 µs. At this size the
//        fixed costs, not bandwidth, decide; 70% at 8 B is unlikely from any one-launch design.
//   128²: 50.3 MB -> 11.9 µs; 70% needs <= 17 µs. Predicted ~15-16 µs (~75-80%; two-pass
//        measured 26.1 µs): a 190 KB slice per SM, all in flight at once, streams in at near copy
//        rate, the f64 sums overlap it (GN_RES_STAGES), ~3 µs of fixed costs as above.
//   256² and up (over 227 KB per SM) do not fit: the two-pass path runs.
// Static (nvcc 13.0 -O3 sm_90): 46 registers, no spills, 256 B static shared memory; the write
// loop is 4 LDS.128 + 4 STG.128 per unrolled step, a divide only when a channel is crossed.

#define GN_RES_THREADS 1024
// cp.async commit groups a slice is issued in: the sums start when the first quarter landed.
#define GN_RES_STAGES 4

// Waits until stages [0, stage] of this thread's copies have landed (wait_group takes an
// immediate: at most GN_RES_STAGES - 1 - stage groups may remain in flight).
__device__ __forceinline__ void group_norm_resident_wait(int stage) {
    switch (GN_RES_STAGES - 1 - stage) {
        case 3: cp_async_wait<3>(); break;
        case 2: cp_async_wait<2>(); break;
        case 1: cp_async_wait<1>(); break;
        default: cp_async_wait<0>(); break;
    }
}

// Dynamic shared memory: the slice, then per touched group (at most max_groups) its sqrt(σ² + eps)
// (f64), shift and mean (f32), then per touched channel (at most max_channels) mean, scale, beta.
struct GroupNormResidentSmem {
    float4* slice;
    double* group_root;
    float* group_shift;
    float* group_mean;
    float* chan_mean;
    float* chan_scale;
    float* chan_beta;
    __device__ __forceinline__ GroupNormResidentSmem(float4* base, int slice4, int max_groups, int max_channels) {
        slice = base;
        group_root = reinterpret_cast<double*>(base + slice4);
        group_shift = reinterpret_cast<float*>(group_root + max_groups);
        group_mean = group_shift + max_groups;
        chan_mean = group_mean + max_groups;
        chan_scale = chan_mean + max_channels;
        chan_beta = chan_scale + max_channels;
    }
};

template <bool Silu>
__device__ __forceinline__ void group_norm_resident_write(const GroupNormResidentSmem& s, float4* __restrict__ y4,
                                                          int begin4, int len4, int plane4, int c0) {
    int i = threadIdx.x;
    if (i >= len4) return;
    // The channel of float4 i (relative to c0) and i's offset in it, advanced without a divide
    // per float4 (one only when a step crosses a channel).
    int c = (begin4 + i) / plane4, offset = begin4 + i - c * plane4;
    c -= c0;
    for (; i < len4; i += GN_RES_THREADS) {
        y4[begin4 + i] = group_norm_affine<Silu>(s.slice[i], s.chan_mean[c], s.chan_scale[c], s.chan_beta[c]);
        offset += GN_RES_THREADS;
        if (offset >= plane4) {
            c += offset / plane4;
            offset %= plane4;
        }
    }
}

// partial: (CTAs + G) pairs; counter: one u32, zero before the launch. All int arguments are
// float4 counts except channels_per_group.
extern "C" __global__ void __launch_bounds__(GN_RES_THREADS, 1)
group_norm_resident(const float* __restrict__ x, const float* __restrict__ gamma, const float* __restrict__ beta,
                    double* partial, unsigned* counter, float eps, int channels_per_group, int plane4, int group4,
                    int slice4, int total4, int max_groups, int max_channels, int apply_silu,
                    float* __restrict__ y) {
    griddep_wait();
    extern __shared__ __align__(16) float4 gn_res_smem[];
    __shared__ double block_scratch[WARP_SIZE];
    const int cta = blockIdx.x, ctas = gridDim.x;
    const int begin4 = cta * slice4;
    const int len4 = min(slice4, total4 - begin4);
    const GroupNormResidentSmem s(gn_res_smem, slice4, max_groups, max_channels);
    const float4* x4 = reinterpret_cast<const float4*>(x) + begin4;

    // Phase 1: every copy of the slice in flight at once, in GN_RES_STAGES groups of rows.
    const int rows = (len4 + GN_RES_THREADS - 1) / GN_RES_THREADS;
    const int rows_per_stage = (rows + GN_RES_STAGES - 1) / GN_RES_STAGES;
    for (int stage = 0; stage < GN_RES_STAGES; ++stage) {
        const int row_end = min(rows, (stage + 1) * rows_per_stage);
        for (int r = stage * rows_per_stage; r < row_end; ++r) {
            const int i = r * GN_RES_THREADS + threadIdx.x;
            if (i < len4) cp_async16(&s.slice[i], &x4[i]);
        }
        cp_async_commit();
    }
    const int g0 = begin4 / group4, g1 = (begin4 + len4 - 1) / group4;
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const long long n_group = 4LL * group4;
    for (int g = g0 + warp; g <= g1; g += GN_RES_THREADS / WARP_SIZE) {
        const float shift = group_norm_shift(x + (long long)g * n_group, n_group);
        if (lane == 0) s.group_shift[g - g0] = shift;
    }
    // gamma and beta of the slice's channels now, off the critical path after the barrier
    // (chan_scale holds gamma until phase 2 turns it into the scale).
    const int c0 = begin4 / plane4, c1 = (begin4 + len4 - 1) / plane4;
    for (int c = c0 + (int)threadIdx.x; c <= c1; c += GN_RES_THREADS) {
        s.chan_scale[c - c0] = gamma[c];
        s.chan_beta[c - c0] = beta[c];
    }
    __syncthreads();
    // Each thread reads back only the float4s it copied itself, so its own wait_group makes
    // them visible; rows are visited in increasing order, so each stage is waited for once.
    int landed = 0;
    for (int g = g0; g <= g1; ++g) {
        const int a = max(g * group4, begin4) - begin4, b = min((g + 1) * group4, begin4 + len4) - begin4;
        const float shift = s.group_shift[g - g0];
        double s1 = 0.0, s2 = 0.0;
        for (int r = a / GN_RES_THREADS; r * GN_RES_THREADS < b; ++r) {
            if (r >= landed * rows_per_stage) {  // (divides only when a new stage starts)
                const int stage = r / rows_per_stage;
                group_norm_resident_wait(stage);
                landed = stage + 1;
            }
            const int i = r * GN_RES_THREADS + threadIdx.x;
            if (i >= a && i < b) group_norm_accumulate(s.slice[i], shift, s1, s2);
        }
        s1 = group_norm_block_sum_f64(s1, block_scratch);
        s2 = group_norm_block_sum_f64(s2, block_scratch);
        if (threadIdx.x == 0) {
            partial[2 * (cta + g)] = s1;
            partial[2 * (cta + g) + 1] = s2;
        }
    }
    cp_async_wait<0>();

    grid_sync(counter, ctas);
    if (threadIdx.x == 0 && atomicAdd(counter, 1u) == 2u * ctas - 1u) *counter = 0u;
    // The next kernel may start its prologue now; it waits (griddep_wait) for this grid to end.
    griddep_launch_dependents();

    // Phase 2: the statistics of each touched group, one warp per group.
    for (int g = g0 + warp; g <= g1; g += GN_RES_THREADS / WARP_SIZE) {
        const int first = (int)(((long long)g * group4) / slice4);
        const int last = (int)(((long long)(g + 1) * group4 - 1) / slice4);
        double s1 = 0.0, s2 = 0.0;
        for (int k = first + lane; k <= last; k += WARP_SIZE) {
            s1 += partial[2 * (k + g)];
            s2 += partial[2 * (k + g) + 1];
        }
        s1 = group_norm_warp_sum_f64(s1);
        s2 = group_norm_warp_sum_f64(s2);
        if (lane == 0) {
            const double mean_d = s1 / (double)n_group;
            const double var = fmax(s2 / (double)n_group - mean_d * mean_d, 0.0);
            s.group_mean[g - g0] = (float)((double)s.group_shift[g - g0] + mean_d);
            s.group_root[g - g0] = sqrt(var + (double)eps);
        }
    }
    __syncthreads();
    for (int c = c0 + (int)threadIdx.x; c <= c1; c += GN_RES_THREADS) {
        const int g = c / channels_per_group - g0;
        s.chan_mean[c - c0] = s.group_mean[g];
        s.chan_scale[c - c0] = (float)((double)s.chan_scale[c - c0] / s.group_root[g]);
    }
    __syncthreads();
    float4* y4 = reinterpret_cast<float4*>(y);
    if (apply_silu)
        group_norm_resident_write<true>(s, y4, begin4, len4, plane4, c0);
    else
        group_norm_resident_write<false>(s, y4, begin4, len4, plane4, c0);
}

// Device sampling (see ops/sample_top_k/mod.rs for the definition this must equal).
// Two launches: `sample_block_candidates` (SAMPLE_BLOCKS CTAs; each sorts its slice of the logits
// as 64-bit keys in shared memory and keeps its best SAMPLE_MAX_TOP_K), then `sample_finalize`
// (one CTA; sorts the CTAs' candidates, applies top-k/top-p/min-p exactly as the host does, with
// f64 sums, draws with the device-resident xoshiro256** state and writes the id). The global
// top k (k <= SAMPLE_MAX_TOP_K) is always among the union of the per-CTA top SAMPLE_MAX_TOP_K.
// Keys: prelude's value_index_key (f32 total order, so -0 < +0 as in Rust's total_cmp; lower id
// wins ties); 0 = no candidate.
#define SAMPLE_MAX_TOP_K 64
#define SAMPLE_BLOCKS 64
#define SAMPLE_SLICE_MAX 4096
#define SAMPLE_THREADS 1024
#define SAMPLE_NONE 0xffffffffu

// Sorts keys[0, n) descending in place (n a power of two); every thread of the CTA must call it.
__device__ void sample_bitonic_sort_desc(unsigned long long* keys, int n) {
    for (int size = 2; size <= n; size <<= 1) {
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            __syncthreads();
            for (int i = threadIdx.x; i < n / 2; i += blockDim.x) {
                const int a = 2 * i - (i & (stride - 1));  // pair (a, a + stride)
                const int b = a + stride;
                const bool descending = (a & size) == 0;
                const unsigned long long ka = keys[a], kb = keys[b];
                if (descending ? ka < kb : ka > kb) { keys[a] = kb; keys[b] = ka; }
            }
        }
    }
    __syncthreads();
}

__device__ __forceinline__ int sample_pow2_at_least(int n) {
    int p = 1;
    while (p < n) p <<= 1;
    return p;
}

// The sort key of logit i of a row x of n (0: never a candidate), slot j of a CTA's slice:
// slots past the slice or the row hold 0; a greedy pick keys any non-NaN value (-0 as +0), a
// draw a value > -inf (which also rejects NaN) times the inverse temperature.
__device__ __forceinline__ unsigned long long sample_slice_key(const float* x, u32 i, u32 n, bool in_slice,
                                                               float inv_temperature, bool greedy) {
    if (!in_slice || i >= n) return 0ull;
    const float l = x[i];
    if (greedy) return l == l ? value_index_key(l == 0.0f ? 0.0f : l, i) : 0ull;
    return l > neg_inf() ? value_index_key(l * inv_temperature, i) : 0ull;
}

// candidates: [gridDim.x][SAMPLE_MAX_TOP_K]. slice <= SAMPLE_SLICE_MAX (the launcher checks).
extern "C" __global__ void __launch_bounds__(SAMPLE_THREADS)
sample_block_candidates(const float* __restrict__ logits, u32 n, float inv_temperature, u32 slice,
                        unsigned long long* __restrict__ candidates) {
    griddep_wait();
    griddep_launch_dependents();
    __shared__ unsigned long long keys[SAMPLE_SLICE_MAX];
    const u32 begin = blockIdx.x * slice;
    const int size = sample_pow2_at_least((int)slice);
    for (int j = threadIdx.x; j < size; j += blockDim.x)
        keys[j] = sample_slice_key(logits, begin + (u32)j, n, (u32)j < slice, inv_temperature, false);
    sample_bitonic_sort_desc(keys, size);
    for (int j = threadIdx.x; j < SAMPLE_MAX_TOP_K; j += blockDim.x)
        candidates[blockIdx.x * SAMPLE_MAX_TOP_K + j] = j < size ? keys[j] : 0ull;
}

// xoshiro256** step and its 53-bit uniform double, exactly as ops/sample_top_k/rng.rs.
__device__ __forceinline__ u64 sample_rotl(u64 x, int k) { return (x << k) | (x >> (64 - k)); }
__device__ __forceinline__ double sample_next_f64(u64* s) {
    const u64 result = sample_rotl(s[1] * 5ull, 7) * 9ull;
    const u64 t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = sample_rotl(s[3], 45);
    return (double)(result >> 11) * (1.0 / 9007199254740992.0);  // 2^-53
}

// The draw of sample_finalize (and sample_rows) from keys[0, size) sorted descending: applies
// top-k/top-p/min-p as the host does, with f64 sums, and draws with the xoshiro256** state at
// rng_state (always advanced once, as the host sampler does per draw). One thread.
__device__ u32 sample_draw_sorted(const unsigned long long* keys, int size, u32 top_k, float top_p, float min_p,
                                  u64* rng_state) {
    u64 s[4] = {rng_state[0], rng_state[1], rng_state[2], rng_state[3]};
    const double u = sample_next_f64(s);
#pragma unroll
    for (int i = 0; i < 4; ++i) rng_state[i] = s[i];

    int count = 0;
    while (count < (int)top_k && count < size && keys[count] != 0ull) ++count;
    if (count == 0) return SAMPLE_NONE;
    float w[SAMPLE_MAX_TOP_K];
    const float vmax = value_index_key_value(keys[0]);
    double sum = 0.0;
    for (int i = 0; i < count; ++i) {
        w[i] = expf(value_index_key_value(keys[i]) - vmax);
        sum += (double)w[i];
    }
    int keep = count;
    if (top_p < 1.0f) {
        double cumulative = 0.0;
        for (int i = 0; i < count; ++i) {
            cumulative += (double)w[i] / sum;
            if (cumulative >= (double)top_p) {
                keep = i + 1;
                break;
            }
        }
    }
    if (min_p > 0.0f) {
        int above = 0;
        while (above < keep && w[above] >= min_p) ++above;
        keep = above > 1 ? above : 1;
    }
    double kept = 0.0;
    for (int i = 0; i < keep; ++i) kept += (double)w[i];
    const double target = u * kept;
    double cumulative = 0.0;
    for (int i = 0; i < keep; ++i) {
        cumulative += (double)w[i];
        if (target < cumulative) return value_index_key_index(keys[i]);
    }
    return value_index_key_index(keys[keep - 1]);
}

// One CTA. Always advances the generator once (as the host sampler does per draw).
extern "C" __global__ void __launch_bounds__(SAMPLE_THREADS)
sample_finalize(const unsigned long long* __restrict__ candidates, u32 blocks, u32 top_k, float top_p,
                float min_p, u64* __restrict__ rng_state, u32* __restrict__ out) {
    griddep_wait();
    griddep_launch_dependents();
    __shared__ unsigned long long keys[SAMPLE_BLOCKS * SAMPLE_MAX_TOP_K];
    const int total = (int)blocks * SAMPLE_MAX_TOP_K;
    const int size = sample_pow2_at_least(total);
    for (int j = threadIdx.x; j < size; j += blockDim.x) keys[j] = j < total ? candidates[j] : 0ull;
    sample_bitonic_sort_desc(keys, size);
    if (threadIdx.x != 0) return;
    *out = sample_draw_sorted(keys, size, top_k, top_p, min_p, rng_state);
}

// One decode step's picks in one launch (see ops/sample_rows/mod.rs for the definition this must
// equal). Row r of logits ([rows][n]) picks with the setting of sequence s = row_seqs[r]:
// settings[SAMPLE_ROWS_SETTING_WORDS * s] = {inv_temperature bits, top_k (0 = greedy), top_p
// bits, min_p bits}, and, when it samples, the xoshiro256** state rng[4 * s].
//
// Grid (blocks, rows). Each CTA sorts its slice of its row as sample_block_candidates does (a
// greedy row keys every non-NaN value, -inf too, with -0 as +0: argmax's rules) and stores its
// best SAMPLE_MAX_TOP_K keys in the row's part of `candidates` ([rows][SAMPLE_BLOCKS][top k]).
// The row's last CTA to finish (counted in done[r], which it puts back to zero for the next
// launch or graph replay) merges them and picks: a greedy row the best key, a sampled row
// sample_draw_sorted (sample_top_k.cu, concatenated before this file). One launch instead of the
// one-row sampler's two, so a whole batch's picks are one node of the decode graph.
#define SAMPLE_ROWS_SETTING_WORDS 4

extern "C" __global__ void __launch_bounds__(SAMPLE_THREADS)
sample_rows(const float* __restrict__ logits, u32 n, u32 slice, const u32* __restrict__ row_seqs, u32 n_seqs,
            const u32* __restrict__ settings, u64* __restrict__ rng, unsigned long long* __restrict__ candidates,
            u32* __restrict__ done, u32* __restrict__ out) {
    griddep_wait();
    griddep_launch_dependents();
    __shared__ unsigned long long keys[SAMPLE_SLICE_MAX];
    __shared__ bool last;
    const u32 row = blockIdx.y;
    const u32 seq = row_seqs[row];
    // The launcher cannot see the device's row table: a sequence outside the settings picks nothing.
    if (seq >= n_seqs) {
        if (blockIdx.x == 0 && threadIdx.x == 0) out[row] = SAMPLE_NONE;
        return;
    }
    const u32* setting = settings + SAMPLE_ROWS_SETTING_WORDS * seq;
    const float inv_temperature = __uint_as_float(setting[0]);
    const u32 top_k = setting[1];
    const bool greedy = top_k == 0;
    const float* x = logits + (unsigned long long)row * n;
    const u32 begin = blockIdx.x * slice;
    const int size = sample_pow2_at_least((int)slice);
    for (int j = threadIdx.x; j < size; j += blockDim.x)
        keys[j] = sample_slice_key(x, begin + (u32)j, n, (u32)j < slice, inv_temperature, greedy);
    sample_bitonic_sort_desc(keys, size);
    unsigned long long* row_candidates = candidates + (unsigned long long)row * SAMPLE_BLOCKS * SAMPLE_MAX_TOP_K;
    for (int j = threadIdx.x; j < SAMPLE_MAX_TOP_K; j += blockDim.x)
        row_candidates[blockIdx.x * SAMPLE_MAX_TOP_K + j] = j < size ? keys[j] : 0ull;
    __threadfence();  // this CTA's candidates are visible before it counts itself done
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(done + row, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    // Other CTAs wrote the candidates during this launch: volatile reads, not a stale L1 line.
    const volatile unsigned long long* from = row_candidates;
    const int total = (int)gridDim.x * SAMPLE_MAX_TOP_K;
    const int merged = sample_pow2_at_least(total);
    for (int j = threadIdx.x; j < merged; j += blockDim.x) keys[j] = j < total ? from[j] : 0ull;
    sample_bitonic_sort_desc(keys, merged);
    if (threadIdx.x != 0) return;
    done[row] = 0u;
    if (greedy) {
        out[row] = keys[0] == 0ull ? SAMPLE_NONE : value_index_key_index(keys[0]);
        return;
    }
    out[row] = sample_draw_sorted(keys, merged, top_k, __uint_as_float(setting[2]), __uint_as_float(setting[3]),
                                  rng + 4ull * seq);
}

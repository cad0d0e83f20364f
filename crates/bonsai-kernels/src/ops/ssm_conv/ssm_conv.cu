// Causal depthwise convolution with a rolling state, then SiLU (ops/ssm_conv/mod.rs). Channels are
// independent: a thread owns one channel of a run of rows, its K-wide window in registers, and
// consecutive threads read consecutive channels (coalesced rows).
//
// Decode (one chunk, update_state = 1): the thread walks all rows from the state, then writes the
// last K-1 inputs back; nothing is shared, so the state update needs no ordering between threads.
// Prefill (grid.y = row chunks, update_state = 0): each chunk starts its window from the K-1 rows
// before it (the state's for the first chunk) and writes only y; ssm_conv_state_from_rows then
// copies the last K-1 input rows into the state in a second launch, after every chunk has read it.
//
// Speed of light: 4 C (2 rows + 2 (K-1)) bytes; decode at C = 10240 is 328 KB, pp512 42 MB.

// The widest kernel the register window holds (Qwen3.5 uses 4).
#define SSM_CONV_MAX_K 8
// The most rows one thread walks (ROWS_PER_CHUNK in ops/ssm_conv/cuda.rs): its inputs are held in
// registers at once.
#define SSM_CONV_ROWS 32

// Thread `ch`'s channel over rows t0 .. t1 - 1 of x (of `rows`), its window from the state or the
// rows before t0; the state updated when `update_state` (the call's only chunk).
__device__ __forceinline__ void ssm_conv_channel(const float* __restrict__ x, const float* __restrict__ w,
                                                 float* __restrict__ state, float* __restrict__ y, int rows,
                                                 int channels, int kernel, int t0, int rows_per_chunk, int ch,
                                                 int update_state) {
    const int t1 = min(rows, t0 + rows_per_chunk);
    float taps[SSM_CONV_MAX_K], window[SSM_CONV_MAX_K];
#pragma unroll
    for (int k = 0; k < SSM_CONV_MAX_K; ++k) {
        taps[k] = k < kernel ? w[(long long)ch * kernel + k] : 0.0f;
        // Input t0 - (K-1) + k: a state row before row 0, else an earlier row of x.
        const int j = t0 - (kernel - 1) + k;
        window[k] = k >= kernel - 1 ? 0.0f
                    : j < 0         ? state[(long long)(kernel - 1 + j) * channels + ch]
                                    : x[(long long)j * channels + ch];
    }
    // Every input row of the chunk is requested before the first is used: one DRAM latency per
    // thread, not one per row (the loop's loads waited one after another).
    float xs[SSM_CONV_ROWS];
#pragma unroll
    for (int i = 0; i < SSM_CONV_ROWS; ++i) xs[i] = t0 + i < t1 ? x[(long long)(t0 + i) * channels + ch] : 0.0f;
#pragma unroll
    for (int i = 0; i < SSM_CONV_ROWS; ++i) {
        const int t = t0 + i;
        if (t >= t1) break;
        const long long at = (long long)t * channels + ch;
        float c = 0.0f;
#pragma unroll
        for (int k = 0; k < SSM_CONV_MAX_K; ++k) {
            if (k == kernel - 1) window[k] = xs[i];
            if (k < kernel) c = fmaf(taps[k], window[k], c);
        }
        y[at] = c * sigmoid_stable(c);
        // Slide: the oldest input leaves, slot K-1 takes the next row.
#pragma unroll
        for (int k = 0; k + 1 < SSM_CONV_MAX_K; ++k) window[k] = window[k + 1];
    }
    if (!update_state) return;
#pragma unroll
    for (int k = 0; k < SSM_CONV_MAX_K - 1; ++k)
        if (k < kernel - 1) state[(long long)k * channels + ch] = window[k];
}

extern "C" __global__ void ssm_conv_channel_per_thread(const float* __restrict__ x, const float* __restrict__ w,
                                                       float* __restrict__ state, float* __restrict__ y, int rows,
                                                       int channels, int kernel, int rows_per_chunk,
                                                       int update_state) {
    griddep_wait();
    griddep_launch_dependents();
    const int ch = blockIdx.x * blockDim.x + threadIdx.x;
    if (ch >= channels) return;
    ssm_conv_channel(x, w, state, y, rows, channels, kernel, blockIdx.y * rows_per_chunk, rows_per_chunk, ch, update_state);
}

// A batched decode step's one-row sequences in one launch (grid.y = entry of the recurrent-state
// table, ops/gated_delta/cuda.rs `DeviceStateTable`: the entry's row, then per recurrent layer
// slot its conv and DeltaNet state addresses): entry e's row of x and y and its conv state of
// layer slot `slot`, each exactly as ssm_conv_channel_per_thread's one-row launch.
extern "C" __global__ void ssm_conv_seqs(const float* __restrict__ x, const float* __restrict__ w,
                                         const unsigned long long* __restrict__ table, int seqs, int slot,
                                         float* __restrict__ y, int channels, int kernel) {
    griddep_wait();
    griddep_launch_dependents();
    const int ch = blockIdx.x * blockDim.x + threadIdx.x;
    if (ch >= channels) return;
    const int e = blockIdx.y;
    const long long row = (long long)table[e];
    float* state = reinterpret_cast<float*>(table[seqs + 2LL * slot * seqs + e]);
    ssm_conv_channel(x + row * channels, w, state, y + row * channels, 1, channels, kernel, 0, 1, ch, 1);
}

// The state after a chunked call: the last K-1 of `rows` (>= K-1) input rows, one thread per channel.
extern "C" __global__ void ssm_conv_state_from_rows(const float* __restrict__ x, float* __restrict__ state,
                                                    int rows, int channels, int kernel) {
    griddep_wait();
    griddep_launch_dependents();
    const int ch = blockIdx.x * blockDim.x + threadIdx.x;
    if (ch >= channels) return;
    for (int k = 0; k < kernel - 1; ++k)
        state[(long long)k * channels + ch] = x[(long long)(rows - (kernel - 1) + k) * channels + ch];
}

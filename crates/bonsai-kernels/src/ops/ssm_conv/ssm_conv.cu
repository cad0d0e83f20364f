// Causal depthwise convolution with a rolling state, then SiLU (ops/ssm_conv/mod.rs): one thread
// per channel walks the call's rows with its K-wide window in registers (state rows first, then
// each new input), writes y per row, and finally the last K-1 inputs back to the state. Channels
// are independent, so nothing is shared and the state update needs no ordering between threads;
// consecutive threads read consecutive channels (coalesced rows).
//
// Speed of light: 4 C (2 rows + 2 (K-1)) bytes; decode at C = 10240 is 328 KB. A long prefill runs
// only C threads; splitting rows across CTAs (each reading its K-1 predecessors from x) is the
// next step if prefill profiles show it.

// The widest kernel the register window holds (Qwen3.5 uses 4).
#define SSM_CONV_MAX_K 8

extern "C" __global__ void ssm_conv_channel_per_thread(const float* __restrict__ x, const float* __restrict__ w,
                                                       float* __restrict__ state, float* __restrict__ y, int rows,
                                                       int channels, int kernel) {
    griddep_wait();
    griddep_launch_dependents();
    const int ch = blockIdx.x * blockDim.x + threadIdx.x;
    if (ch >= channels) return;
    float taps[SSM_CONV_MAX_K], window[SSM_CONV_MAX_K];
#pragma unroll
    for (int k = 0; k < SSM_CONV_MAX_K; ++k) {
        taps[k] = k < kernel ? w[(long long)ch * kernel + k] : 0.0f;
        window[k] = k < kernel - 1 ? state[(long long)k * channels + ch] : 0.0f;
    }
    for (int t = 0; t < rows; ++t) {
        const long long at = (long long)t * channels + ch;
        float c = 0.0f;
#pragma unroll
        for (int k = 0; k < SSM_CONV_MAX_K; ++k) {
            if (k == kernel - 1) window[k] = x[at];
            if (k < kernel) c = fmaf(taps[k], window[k], c);
        }
        y[at] = c * sigmoid_stable(c);
        // Slide: the oldest input leaves, slot K-1 takes the next row.
#pragma unroll
        for (int k = 0; k + 1 < SSM_CONV_MAX_K; ++k) window[k] = window[k + 1];
    }
#pragma unroll
    for (int k = 0; k < SSM_CONV_MAX_K - 1; ++k)
        if (k < kernel - 1) state[(long long)k * channels + ch] = window[k];
}

// One decode row of the causal depthwise convolution (ops/ssm_conv/mod.rs) for one channel: the
// K-wide window from the rolling state (`state[k * channels + ch]`, k < K - 1) and the new input
// `x`, then SiLU; the state takes the last K - 1 inputs. ssm_conv_channel_per_thread's arithmetic
// for one row (its taps and window in the same order), so the decode GEMV's conv epilogue
// (matmul_gemv_b1.cu, B1ConvOut) and the conv kernel agree bit for bit.
#define SSM_CONV_MAX_K 8

__device__ __forceinline__ float ssm_conv_decode_channel(float x, const float* __restrict__ w,
                                                         float* __restrict__ state, int channels, int kernel,
                                                         int ch) {
    float c = 0.0f;
    float window[SSM_CONV_MAX_K];
#pragma unroll
    for (int k = 0; k < SSM_CONV_MAX_K; ++k) {
        if (k >= kernel) break;
        window[k] = k == kernel - 1 ? x : state[(long long)k * channels + ch];
        c = fmaf(w[(long long)ch * kernel + k], window[k], c);
    }
#pragma unroll
    for (int k = 0; k + 1 < SSM_CONV_MAX_K; ++k)
        if (k < kernel - 1) state[(long long)k * channels + ch] = window[k + 1];
    return c * sigmoid_stable(c);
}

// out[i, :] = row ids[i] of a quantized table [vocab, hidden], dequantized to f32.
// grid (m, ceil(words_per_row / blockDim.x)); one thread per payload word. An id >= vocab
// (it may come from device memory, so the host cannot check it) yields a row of NaN.
template <int BITS>
__device__ __forceinline__ void embed_rows_body(const u16* __restrict__ scales,
                                                const u32* __restrict__ payload,
                                                const u32* __restrict__ ids, int vocab, int hidden,
                                                float* __restrict__ out) {
    constexpr int WEIGHTS_PER_WORD = 32 / BITS;
    constexpr int WORDS_PER_GROUP = GROUP_SIZE / WEIGHTS_PER_WORD;
    const int words_per_row = hidden / WEIGHTS_PER_WORD;
    const int word = blockIdx.y * blockDim.x + threadIdx.x;
    if (word >= words_per_row) return;
    const u32 id = ids[blockIdx.x];
    float* dst = out + (long long)blockIdx.x * hidden + (long long)word * WEIGHTS_PER_WORD;
    if (id >= (u32)vocab) {
        const float nan = __int_as_float(0x7fc00000);
#pragma unroll
        for (int j = 0; j < WEIGHTS_PER_WORD; ++j) dst[j] = nan;
        return;
    }
    const long long g = (long long)id * (hidden / GROUP_SIZE) + word / WORDS_PER_GROUP;
    const float d = f16_to_f32(scales[g]);
    const u32 w = payload[(long long)id * words_per_row + word];
#pragma unroll
    for (int j = 0; j < WEIGHTS_PER_WORD; ++j) {
        if (BITS == 1) dst[j] = ((w >> j) & 1u) ? d : -d;
        else dst[j] = ((float)((w >> (2 * j)) & 3u) - 1.0f) * d;
    }
}

extern "C" __global__ void embed_rows_q1(const u16* scales, const u32* bits, const u32* ids,
                                         int vocab, int hidden, float* out) {
    griddep_wait();
    griddep_launch_dependents();
    embed_rows_body<1>(scales, bits, ids, vocab, hidden, out);
}
extern "C" __global__ void embed_rows_q2(const u16* scales, const u32* codes, const u32* ids,
                                         int vocab, int hidden, float* out) {
    griddep_wait();
    griddep_launch_dependents();
    embed_rows_body<2>(scales, codes, ids, vocab, hidden, out);
}

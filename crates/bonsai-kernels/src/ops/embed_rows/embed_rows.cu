// out[i, :] = row ids[i] of a quantized table [vocab, hidden], dequantized to f32.
// grid (m, ceil(hidden / 32 / blockDim.x)); one thread per lane word of the device layout
// (weight_layout.cu): all planes of lane word t of one group, 32 weights, written in pairs
// (bits 15 - q and 31 - q hold weights j and j + 1). An id >= vocab (it may come from device
// memory, so the host cannot check it) yields a row of NaN.
#define EMBED_WEIGHTS_PER_UNIT 32
template <int BITS>
__device__ __forceinline__ void embed_rows_body(const u16* __restrict__ scales,
                                                const u32* __restrict__ payload,
                                                const u32* __restrict__ ids, int vocab, int hidden,
                                                float* __restrict__ out) {
    const int groups_per_row = hidden / GROUP_SIZE;
    const int unit = blockIdx.y * blockDim.x + threadIdx.x;
    if (unit >= groups_per_row * LAYOUT_LANES) return;
    const int group = unit / LAYOUT_LANES, t = unit % LAYOUT_LANES;
    const u32 id = ids[blockIdx.x];
    float* dst = out + (long long)blockIdx.x * hidden + (long long)group * GROUP_SIZE;
    if (id >= (u32)vocab) {
        const float nan = __int_as_float(0x7fc00000);
#pragma unroll
        for (int bit = 0; bit < EMBED_WEIGHTS_PER_UNIT; ++bit) dst[layout_weight(t, bit)] = nan;
        return;
    }
    const float d = f16_to_f32(scales[(long long)id * groups_per_row + group]);
    const u32* row = layout_row<BITS>(payload, id, groups_per_row);
    u32 plane[BITS];
#pragma unroll
    for (int p = 0; p < BITS; ++p) plane[p] = row[layout_word<BITS>(groups_per_row, group, t, p)];
#pragma unroll
    for (int bit = 0; bit < EMBED_WEIGHTS_PER_UNIT; ++bit) {
        u32 c = 0;
#pragma unroll
        for (int p = 0; p < BITS; ++p) c |= ((plane[p] >> bit) & 1u) << p;
        dst[layout_weight(t, bit)] = (float)code_value<BITS>(c) * d;
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

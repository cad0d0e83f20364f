// The device layout of quantized weights, in one place. A row's group g of 128 weights has one f16
// scale and WORDS_PER_GROUP u32 payload words (Q1: 4, Q2: 8) at word offset (row * groups + g) *
// WORDS_PER_GROUP. `group_code` is THE definition of where weight k of a group lives: kernels that
// decode single weights call it, kernels with a faster word-level decode must agree with it (the
// host twin is crate::cuda::weights; verify compares every kernel against crate::weights).
// Today the device layout equals the host layout: Q1 bit (k % 32) of word k / 32 (1 -> +1,
// 0 -> -1); Q2 code c = bits 2 (k % 16) .. +1 of word k / 16, value (c - 1).

template <int BITS>
__device__ __forceinline__ u32 group_code(const u32* __restrict__ group_words, int k) {
    if (BITS == 1) return (group_words[k >> 5] >> (k & 31)) & 1u;
    return (group_words[k >> 4] >> (2 * (k & 15))) & 3u;
}

// The signed integer weight of a code: Q1 {0,1} -> {-1,+1}; Q2 {0..3} -> {-1,0,1,2}.
template <int BITS>
__device__ __forceinline__ int code_value(u32 code) {
    return BITS == 1 ? 2 * (int)code - 1 : (int)code - 1;
}

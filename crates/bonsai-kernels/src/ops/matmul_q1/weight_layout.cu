// The device layout of quantized weights, in one place (the host twin, with the permutation that
// produces it at upload, is crate::cuda::weights; verify compares every kernel against
// crate::weights, whose `weight()` stays the definition of the values).
//
// Scales are as on the host: one f16 per (row, group) at row * groups_per_row + group.
// Payload: a row's group of 128 weights is stored as 4 "lane words" per bit plane (Q1: one plane,
// the sign bit; Q2: plane 0 = bit 0 of the code c, plane 1 = bit 1, value c - 1), each lane word
// holding the 32 weights that lane t = lane % 4 of an mma.sync m16n8k16 A fragment needs over the
// group's 8 k16 steps (ptx.cuh's fragment table):
//
//   weight j of the group (0..127), j = 16 s + 8 h + 2 t + e   (step s, half h, lane t, e = 0/1)
//   pair q = 2 s + h (0..15): the weight with e = 0 sits at bit 15 - q, e = 1 at bit 31 - q.
//
// so `((word << q) & 0x80008000) ^ 0xBF80BF80` is the bf16 pair (+-1, +-1) of A register
// a[2h] / a[2h+1] of step s, lower k in the low half (1 -> +1.0 0x3F80, 0 -> -1.0 0xBF80).
//
// Word order within a row: when groups_per_row % LAYOUT_BLOCK_GROUPS == 0 (every Bonsai shape),
// groups come in blocks of 4 and a block's words are lane-major: lane t's words for the block's 4
// groups (x planes) are contiguous, so one 16-byte load per plane and row fetches a lane's share
// of 512 weights, and the 4 lanes of a row read 64 contiguous bytes. Otherwise every group is its
// own block (lane-major within the group):
//
//   nb = groups_per_row % 4 == 0 ? 4 : 1;   b0 = group - group % nb
//   word(group, t, plane) = b0 * 4 * PLANES + (t * nb + (group - b0)) * PLANES + plane
//
// relative to the row's first word, row * groups_per_row * 4 * PLANES (PLANES = BITS).

#define LAYOUT_BLOCK_GROUPS 4
// Lanes of an mma fragment quad: one lane word per lane and plane per group.
#define LAYOUT_LANES 4

// Groups per block for a row of `groups_per_row` groups.
__device__ __forceinline__ int layout_block_groups(int groups_per_row) {
    return groups_per_row % LAYOUT_BLOCK_GROUPS == 0 ? LAYOUT_BLOCK_GROUPS : 1;
}

// Word offset within the row of plane `plane` of lane word `t` of group `group`.
template <int BITS>
__device__ __forceinline__ int layout_word(int groups_per_row, int group, int t, int plane) {
    const int nb = layout_block_groups(groups_per_row);
    const int b0 = group - group % nb;
    return b0 * LAYOUT_LANES * BITS + (t * nb + (group - b0)) * BITS + plane;
}

// The lane word and bit holding weight j (0..127) of a group.
__device__ __forceinline__ int layout_lane(int j) { return (j >> 1) & 3; }
__device__ __forceinline__ int layout_bit(int j) {
    const int q = 2 * (j >> 4) + ((j >> 3) & 1);
    return 15 - q + 16 * (j & 1);
}
// Inverse: weight index j within the group of bit `bit` of lane word t.
__device__ __forceinline__ int layout_weight(int t, int bit) {
    const int q = 15 - (bit & 15);
    return 16 * (q >> 1) + 8 * (q & 1) + 2 * t + (bit >> 4);
}

// THE definition of weight j of `group` in a row whose words start at `row_words`: Q1 the sign
// bit (1 -> +1, 0 -> -1), Q2 the code c (value c - 1). Kernels that decode single weights call
// it; kernels with a word-level decode (gemv_tc, gemm_mma_bf16x3, embed_rows) use layout_word /
// layout_weight / layout_bit above and must agree with it.
template <int BITS>
__device__ __forceinline__ u32 group_code(const u32* __restrict__ row_words, int groups_per_row,
                                          int group, int j) {
    const int t = layout_lane(j), bit = layout_bit(j);
    u32 code = 0;
#pragma unroll
    for (int p = 0; p < BITS; ++p)
        code |= ((row_words[layout_word<BITS>(groups_per_row, group, t, p)] >> bit) & 1u) << p;
    return code;
}

// The signed integer weight of a code: Q1 {0,1} -> {-1,+1}; Q2 {0..3} -> {-1,0,1,2}.
template <int BITS>
__device__ __forceinline__ int code_value(u32 code) {
    return BITS == 1 ? 2 * (int)code - 1 : (int)code - 1;
}

// The u32 words of one row of a [N, K] quantized matrix.
template <int BITS>
__device__ __forceinline__ const u32* layout_row(const u32* payload, long long row, int groups_per_row) {
    return payload + row * groups_per_row * (LAYOUT_LANES * BITS);
}

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
    const bool blocked = layout_block_groups(groups_per_row) == LAYOUT_BLOCK_GROUPS;
    const int nb = blocked ? LAYOUT_BLOCK_GROUPS : 1;
    // group - group % nb without a division by the run-time nb (group >= 0): a GEMM computes
    // this once per K group, where the generic division cost ~25 instructions.
    const int b0 = blocked ? group & ~(LAYOUT_BLOCK_GROUPS - 1) : group;
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

// ---------------------------------------------------------------------------------------------
// B-operand decode for the f16 tensor-core GEMM (matmul_gemm_f16.cu), built on the lane words
// above (change together with them; verify compares every kernel with crate::weights).
//
// An m16n8k16 B fragment gives lane (g, t) two f16 pairs per k16 step: mma slots (2t, 2t+1) and
// (2t+8, 2t+9), i.e. over a 128-weight group "pair slot" 8q + 2t + e for chunk q = 0..15 and
// e = 0, 1 (e = 0 in the low half). The k reduction does not care which weight sits in which
// slot as long as the activations use the same assignment, so `mma_slot_k` maps each slot to the
// weight (index within the group) that lane t can decode cheapest from ITS OWN lane words, and
// the f16 activation pre-pass (x_to_f16_rows) stores x in slot order.
//   Q1: the natural order (slot q, t, e <-> bit 15 - q + 16 e of lane word t, exactly the
//       fragment order of the layout): `((word << q) & 0x80008000) ^ (-d, -d)`, a set bit
//       flipping -d to +d (SHF + LOP3 per 2 weights).
//   Q2: the two planes are first interleaved into 2-bit codes (once per lane, row and group):
//       E = codes of the even bits of the planes (code i at bits 2i, 2i+1 from plane bit 2i),
//       O = the odd bits (from plane bit 2i + 1). Chunks q < 8 come from E, q >= 8 from O; chunk
//       r = q % 8 pairs codes i0 and i0 + 4 with i0 = (r % 4) + 8 (r / 4): 8 bits apart, so one
//       mask + shift leaves c0 at bits 0-1 and c1 at bits 8-9, and `codes * 0x22 + 0x1010` is a
//       byte_perm selector (nibbles 2c0, 2c0+1, 2c1, 2c1+1) that picks each f16 from the
//       per-group table {-d, 0, d, 2d} (bytes 2c.. hold code c's value).

// Weight index (0..127) within the group of pair slot `slot` (0..127).
template <int BITS>
__device__ __forceinline__ int mma_slot_k(int slot) {
    const int q = slot >> 3, t = (slot >> 1) & 3, e = slot & 1;
    if (BITS == 1) return layout_weight(t, 15 - q + 16 * e);
    const int r = q & 7, code = (r & 3) + 8 * (r >> 2) + 4 * e;
    return layout_weight(t, 2 * code + (q >> 3));
}

// What one lane keeps of one row's group: Q1 its sign word; Q2 the interleaved code words E, O.
struct MmaLaneWords {
    u32 w0;
    u32 w1;
};
// From the lane's BITS plane words (plane 0 first), as stored by layout_word.
template <int BITS>
__device__ __forceinline__ MmaLaneWords mma_lane_words(const u32* planes) {
    if (BITS == 1) return {planes[0], 0u};
    const u32 lo = planes[0], hi = planes[1];
    const u32 even = (lo & 0x55555555u) | ((hi << 1) & 0xAAAAAAAAu);
    const u32 odd = ((lo >> 1) & 0x55555555u) | (hi & 0xAAAAAAAAu);
    return {even, odd};
}

// The group's scale prepared for mma_pair_f16x2: Q1 (-d, -d) as one f16x2; Q2 the table of the
// four code values, f16 {-d, 0} in `lo` and {d, 2d} in `hi`. 2d is exact in f16 for
// |d| <= 32752; a larger scale with code 3 would overflow to inf (Bonsai scales are ~1e-2).
struct MmaGroupScale {
    u32 lo;
    u32 hi;
};
template <int BITS>
__device__ __forceinline__ MmaGroupScale mma_group_scale(u16 d) {
    const u32 neg_d = (u32)(d ^ 0x8000u);
    if (BITS == 1) return {neg_d | (neg_d << 16), 0u};
    const u32 two_d = f32_to_f16(2.0f * f16_to_f32(d));
    return {neg_d, (u32)d | (two_d << 16)};
}

// f16x2 of the weights in pair slots (8q + 2t, 8q + 2t + 1) of the lane's words, i.e.
// (code value) * d, lower slot in the low half. q must be a compile-time constant after
// unrolling (the shifts and masks then fold).
template <int BITS>
__device__ __forceinline__ u32 mma_pair_f16x2(MmaLaneWords w, int q, MmaGroupScale s) {
    if (BITS == 1) return ((w.w0 << q) & 0x80008000u) ^ s.lo;
    const int r = q & 7, i0 = (r & 3) + 8 * (r >> 2);
    // Codes i0 (bits 2 i0, +1) and i0 + 4 (bits 2 i0 + 8, +9); the mask keeps both pairs that
    // share a field position, the shift drops the lower one when r >= 4, and bits >= 16 left over
    // only carry upwards in the multiply (byte_perm reads the low 16 bits of its selector).
    const u32 word = q < 8 ? w.w0 : w.w1;
    const u32 codes = (word & (0x03030303u << (2 * (r & 3)))) >> (2 * i0);
    return __byte_perm(s.lo, s.hi, codes * 0x22u + 0x1010u);
}

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

// ---------------------------------------------------------------------------------------------
// Word-level decode for the tensor-core GEMM (matmul_gemm_f16.cu). These three functions and
// group_code describe ONE layout: change them together (verify compares every kernel against the
// host definition crate::weights, so a disagreement fails there).
//
// An mma.sync m16n8k16 B fragment gives lane (g, t) = (lane / 4, lane % 4) two f16 pairs per
// 16-wide k step: mma slots (2t, 2t+1) and (2t+8, 2t+9). Over a 128-weight group that is "pair
// slot" 8q + 2t + e for chunk q = 0..15 and e = 0, 1 (e = 0 in the low half of the register).
// The sum over k does not care which real weight sits in which slot, as long as the activation
// operand uses the same assignment, so each slot is given the weight whose bits are cheapest to
// reach: `mma_slot_k` maps slot -> weight index k within the group, and the f16 activation
// pre-pass (x_to_f16_rows) stores x in slot order, so the activation tile needs no permutation.
//   Q1 (bit k % 32 of word k / 32): slot (q, t, e) -> k = 32 (q / 4) + 4 (q % 4) + t + 16 e.
//     Both weights of a pair sit in one word, 16 bits apart: one shift puts them at bits 15 and
//     31, the f16 sign bits, and one LOP3 masks them and applies them to (-d, -d).
//   Q2 (code bits 2 (k % 16) of word k / 16): slot (q, t, e) -> k = 16 (q / 2) + 8 (q % 2) + t + 4 e.
//     Both codes of a pair sit in one word, 8 bits apart: mask + shift leave c0 at bits 0-1 and
//     c1 at bits 8-9, one multiply-add turns them into a byte_perm selector that picks each f16
//     from a per-group 4-entry table {-d, 0, d, 2d}.

// Weight index k (0..127) within a group of pair slot `slot` (0..127).
template <int BITS>
__device__ __forceinline__ int mma_slot_k(int slot) {
    const int q = slot >> 3, t = (slot >> 1) & 3, e = slot & 1;
    if (BITS == 1) return 32 * (q >> 2) + 4 * (q & 3) + t + 16 * e;
    return 16 * (q >> 1) + 8 * (q & 1) + t + 4 * e;
}

// The group's payload word (0 .. WORDS_PER_GROUP-1) holding chunk q's pair for lane t.
template <int BITS>
__device__ __forceinline__ int mma_pair_word(int q, int /*t*/) {
    return BITS == 1 ? q >> 2 : q >> 1;
}

// The group's scale prepared for mma_pair_f16x2: Q1 (-d, -d) as one f16x2; Q2 the table of the
// four code values, f16 bytes {-d, 0} in `lo` and {d, 2d} in `hi` (byte 2c.. holds code c).
// 2d is exact in f16 for |d| <= 32752; a larger scale with code 3 would overflow to inf (no real
// file comes near: Bonsai scales are ~1e-2).
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

// f16x2 of the weights in pair slots (8q + 2t, 8q + 2t + 1), i.e. (code value) * d, low half
// first, from the word mma_pair_word<BITS>(q, t) of the group.
template <int BITS>
__device__ __forceinline__ u32 mma_pair_f16x2(u32 word, int q, int t, MmaGroupScale s) {
    if (BITS == 1) {
        // Bits b = 4 (q % 4) + t and b + 16 -> 15 and 31; a set bit flips -d to +d.
        const int b = 4 * (q & 3) + t;
        return ((word << (15 - b)) & 0x80008000u) ^ s.lo;
    }
    // c0 at bits p, p+1 and c1 at p+8, p+9 with p = 2 (8 (q % 2) + t). The mask keeps only this
    // lane's codes (shared by both chunks of the word); after the shift c0 is at bits 0-1, c1 at
    // 8-9, and the other chunk's codes, if any, at bits >= 16.
    const u32 codes = (word & (0x03030303u << (2 * t))) >> (16 * (q & 1) + 2 * t);
    // Selector nibbles (2 c0, 2 c0 + 1, 2 c1, 2 c1 + 1): the fields do not overlap, so there are
    // no carries, and byte_perm reads only the low 16 bits (bits >= 16 only carry upwards).
    const u32 selector = codes * 0x22u + 0x1010u;
    return __byte_perm(s.lo, s.hi, selector);
}

// The pieces of the blockwise Walsh-Hadamard transform (ops/hadamard/mod.rs) that more than one
// kernel runs on 128-groups held in b1_prepare_group's register layout: hadamard_rotate_planes
// (hadamard.cu) and the `_gemv_b1_rot` epilogue (b1_rotate_epilogue in matmul_gemv_b1.cu), which
// must agree bit for bit. Templates only; concatenated before matmul_gemv_b1.cu.

// One butterfly (u + v, u - v) of a pair held by two threads, on this thread's side: the lower
// index (upper false) takes mine + other, the upper other - mine, the operands the shared-memory
// loop (hadamard_block_in_smem's fallback) gives them, so every bit is the same.
__device__ __forceinline__ float butterfly_side(float mine, float other, bool upper) {
    return upper ? other - mine : mine + other;
}

// The first log2(128) = 7 butterfly stages of one 128-group held by a warp in b1_prepare_group's
// layout: lane l holds v[t] = element layout_weight(t, l) = j0 + 2t (weight_layout.cu), so index
// bit 0 is lane bit 4, bits 1 and 2 are t's bits 0 and 1, and bits 3..6 are lane bits 0..3
// (complemented: the lower index of a pair may sit in the lane with the bit set). Stages in index
// order, bit 0 first, as the shared-memory loop runs them; `j0` gives each side of a pair.
__device__ __forceinline__ void fwht_group_in_warp(float (&v)[LAYOUT_LANES], int j0) {
    // Stage bit 0: lanes l and l ^ 16.
#pragma unroll
    for (int t = 0; t < LAYOUT_LANES; ++t) v[t] = butterfly_side(v[t], __shfl_xor_sync(FULL_MASK, v[t], 16), j0 & 1);
    // Stages bits 1 and 2: within the thread, t and t ^ 1, then t and t ^ 2.
#pragma unroll
    for (int len = 1; len < LAYOUT_LANES; len <<= 1) {
#pragma unroll
        for (int t = 0; t < LAYOUT_LANES; ++t) {
            if (t & len) continue;
            const float a = v[t], b = v[t + len];
            v[t] = a + b;
            v[t + len] = a - b;
        }
    }
    // Stages bits 3..6: lanes l and l ^ (1, 2, 4, 8).
#pragma unroll
    for (int bit = 3; bit < 7; ++bit) {
        const bool upper = (j0 >> bit) & 1;
#pragma unroll
        for (int t = 0; t < LAYOUT_LANES; ++t)
            v[t] = butterfly_side(v[t], __shfl_xor_sync(FULL_MASK, v[t], 1 << (bit - 3)), upper);
    }
}

// Values one thread of fwht_across_groups holds: a block's groups up to 8 in registers, more
// over neighbouring lanes (ops/hadamard/cuda.rs asserts MAX_BLOCK fits).
#define ROTATE_PER_THREAD 8

// The stages past a 128-group (index bits 7 .. log2(block) - 1) of a block whose groups already
// ran fwht_group_in_warp and sit in shared memory `buf` (group g at g * 128): they pair equal
// offsets j of different groups. Thread `idx` of 128 * lane_sets (lane_sets = groups / per, per =
// min(groups, ROTATE_PER_THREAD), as the caller computes them; idx = j * lane_sets + lane_set, so a lane set's threads are
// neighbours in one warp, and a caller looping over idx in steps of whole warps keeps them so)
// holds offset j of groups lane_set * per + r (r < per) in registers: group-index bits low to
// high, r's stages over register pairs, then lane_set's by shuffles, each pair's (u + v, u - v)
// in the order of the shared-memory loop. Writes the results back to `buf` and, when `rot` is
// not null, to the row `rot` (the block's first value at rot[first]). Called by whole warps
// (shuffles).
__device__ __forceinline__ void fwht_across_groups(float* buf, int per, int lane_sets, unsigned idx, float* rot, int first) {
    const int lane_set = idx % lane_sets, j = idx / lane_sets;
    float u[ROTATE_PER_THREAD];
#pragma unroll
    for (int r = 0; r < ROTATE_PER_THREAD; ++r) u[r] = r < per ? buf[(lane_set * per + r) * GROUP_SIZE + j] : 0.0f;
#pragma unroll
    for (int len = 1; len < ROTATE_PER_THREAD; len <<= 1) {
        if (len >= per) break;
#pragma unroll
        for (int r = 0; r < ROTATE_PER_THREAD; ++r) {
            if ((r & len) || r + len >= per) continue;
            const float a = u[r], b = u[r + len];
            u[r] = a + b;
            u[r + len] = a - b;
        }
    }
    for (int len = 1; len < lane_sets; len <<= 1) {
        const bool upper = lane_set & len;
#pragma unroll
        for (int r = 0; r < ROTATE_PER_THREAD; ++r) u[r] = butterfly_side(u[r], __shfl_xor_sync(FULL_MASK, u[r], len), upper);
    }
#pragma unroll
    for (int r = 0; r < ROTATE_PER_THREAD; ++r) {
        if (r >= per) break;
        const int i = (lane_set * per + r) * GROUP_SIZE + j;
        buf[i] = u[r];
        if (rot != nullptr) rot[first + i] = u[r];
    }
}

// In place on every q and k head of token i (position pos[0] + i): RMS-normalise the head with
// the shared hd-long weight, then NeoX RoPE over its first `rot` dims (dims d and d + rot/2 rotate
// by angle index d; rot == hd rotates the whole head) with cos/sin from a [max_pos][rot/2] table;
// dims rot..hd keep their normalised value (partial RoPE). grid (m, heads); blockDim.x =
// 32 * ceil(hd/2 / 32), one thread per pair of elements (qk_head_pair). A position >= max_pos
// (pos lives on the device, so the host cannot check it) turns the head into NaN rather than
// reading outside the table.

// The two elements thread d (< hd/2) owns: the rotating pair (d, d + rot/2) for d < rot/2, else
// two pass-through dims past rot, (rot + e, rot + e + (hd - rot)/2) with e = d - rot/2. With
// rot == hd every thread owns (d, d + hd/2), the whole-head layout.
__device__ __forceinline__ void qk_head_pair(int d, int hd, int rot, int* ia, int* ib) {
    const int rot_half = rot / 2;
    if (d < rot_half) {
        *ia = d;
        *ib = d + rot_half;
    } else {
        *ia = rot + (d - rot_half);
        *ib = *ia + (hd - rot) / 2;
    }
}

// A pair's result from its head's sum of squares `ss`: normalised and, for a rotating pair
// (d < rot / 2), rotated by (c, s); NaN past the RoPE table (`in_table` false).
__device__ __forceinline__ void qk_pair_result(float a, float b, float ss, int hd, float eps, float wa, float wb,
                                               float c, float s, bool rotating, bool in_table, float* out_a,
                                               float* out_b) {
    if (!in_table) {
        *out_a = *out_b = __int_as_float(0x7fc00000);
        return;
    }
    const float inv = qk_inv_rms(ss, hd, eps);
    if (rotating) {
        qk_rope_pair(a, b, inv, wa, wb, c, s, out_a, out_b);
    } else {  // qk_rope_pair's normalised values, unrotated
        *out_a = __fmul_rn(__fmul_rn(a, inv), wa);
        *out_b = __fmul_rn(__fmul_rn(b, inv), wb);
    }
}

// One q or k head: normalises the head and rotates its first rot dims in place (all threads of
// the CTA must call it: it reduces over the CTA); returns false for threads past the pairs.
__device__ __forceinline__ bool qk_norm_rope_one_head(float* h, const float* __restrict__ w, int hd, int rot,
                                                      float eps, const float* __restrict__ cos_table,
                                                      const float* __restrict__ sin_table, int max_pos,
                                                      u32 pos, float* scratch) {
    const int d = threadIdx.x;
    const bool active = d < hd / 2;
    int ia = 0, ib = 0;
    qk_head_pair(d, hd, rot, &ia, &ib);
    const float a = active ? h[ia] : 0.0f;
    const float b = active ? h[ib] : 0.0f;
    const float ss = block_sum(qk_pair_sq(a, b), scratch);
    if (!active) return false;
    const bool rotating = d < rot / 2, in_table = pos < (u32)max_pos;
    const float c = rotating && in_table ? cos_table[(long long)pos * (rot / 2) + d] : 0.0f;
    const float s = rotating && in_table ? sin_table[(long long)pos * (rot / 2) + d] : 0.0f;
    qk_pair_result(a, b, ss, hd, eps, w[ia], w[ib], c, s, rotating, in_table, &h[ia], &h[ib]);
    return true;
}

extern "C" __global__ void qk_norm_rope_head_per_block(float* __restrict__ qkv, int n_q, int n_kv,
                                                       int hd, int rot, const float* __restrict__ q_norm,
                                                       const float* __restrict__ k_norm, float eps,
                                                       const float* __restrict__ cos_table,
                                                       const float* __restrict__ sin_table,
                                                       int max_pos, const u32* __restrict__ pos0) {
    griddep_wait();
    griddep_launch_dependents();
    __shared__ float scratch[WARP_SIZE];
    const int token = blockIdx.x;
    const int head = blockIdx.y;  // [0, n_q) q heads, [n_q, n_q + n_kv) k heads
    float* h = qkv + (long long)token * (n_q + 2 * n_kv) * hd + (long long)head * hd;
    qk_norm_rope_one_head(h, head < n_q ? q_norm : k_norm, hd, rot, eps, cos_table, sin_table, max_pos,
                          pos0[0] + (u32)token, scratch);
}

// One token's q, k and v heads (head = blockIdx.y: q heads, then k heads, then v heads) at
// position `pos`: q and k heads normed and rotated in place, k and v heads stored as f16 in the
// paged cache (pools [blocks][n_kv][KV_BLOCK][hd], the block from block_table: kv_row); cache
// rows at position >= max_seq are skipped (no table entry read), exactly as kv_write does (the
// rotated k, NaN past max_pos, is what both versions store).
__device__ __forceinline__ void qk_norm_rope_kv_write_token(float* __restrict__ qkv_row, int n_q, int n_kv, int hd,
                                                            int rot, const float* __restrict__ q_norm,
                                                            const float* __restrict__ k_norm, float eps,
                                                            const float* __restrict__ cos_table,
                                                            const float* __restrict__ sin_table, int max_pos,
                                                            u32 pos, int max_seq,
                                                            const u32* __restrict__ block_table,
                                                            u16* __restrict__ k_cache, u16* __restrict__ v_cache,
                                                            float* scratch) {
    const int head = blockIdx.y;
    const int half = hd / 2;
    const int d = threadIdx.x;
    float* h = qkv_row + (long long)head * hd;
    if (head >= n_q + n_kv) {  // a v head: the whole CTA takes this branch
        if (d >= half || pos >= (u32)max_seq) return;
        const long long dst = kv_row(block_table, n_kv, head - n_q - n_kv, (int)pos, hd);
        v_cache[dst + d] = f32_to_f16(h[d]);
        v_cache[dst + d + half] = f32_to_f16(h[d + half]);
        return;
    }
    const bool active = qk_norm_rope_one_head(h, head < n_q ? q_norm : k_norm, hd, rot, eps, cos_table,
                                              sin_table, max_pos, pos, scratch);
    if (!active || head < n_q || pos >= (u32)max_seq) return;
    // Each thread stores the pair it just wrote (no other thread touches these elements).
    int ia = 0, ib = 0;
    qk_head_pair(d, hd, rot, &ia, &ib);
    const long long dst = kv_row(block_table, n_kv, head - n_q, (int)pos, hd);
    k_cache[dst + ia] = f32_to_f16(h[ia]);
    k_cache[dst + ib] = f32_to_f16(h[ib]);
}

// qk_norm_rope_head_per_block and kv_write_head_per_block in one launch (decode issues one
// launch fewer per layer): grid (ceil(m / QK_TOKENS), n_q + 2 n_kv), head = blockIdx.y (q heads,
// then k heads, then v heads), rows QK_TOKENS x blockIdx.x .. + QK_TOKENS - 1 (those below m),
// row i at position pos0[0] + i. q and k heads are normed and rotated in place, k and v heads
// stored as f16 in the paged cache (pools [blocks][n_kv][KV_BLOCK][hd], the block from
// block_table: kv_row); cache rows at positions >= max_seq are skipped (no table entry read),
// exactly as kv_write does (the rotated k, NaN past max_pos, is what both versions store).
// A thread issues its loads of all the CTA's rows (values, cos, sin) before the first reduction,
// and the rows' sums share one barrier: a CTA per (row, head) made a 512-row prefill ~6 waves of
// one load-reduce-store latency chain each. Each row's sum is block_sum's (warp sums, then the
// warps' partial sums in one warp_sum), every product as qk_norm_rope_one_head's: the same bits.
#define QK_TOKENS 4
extern "C" __global__ void qk_norm_rope_kv_write(float* __restrict__ qkv, int m, int n_q, int n_kv, int hd, int rot,
                                                 const float* __restrict__ q_norm,
                                                 const float* __restrict__ k_norm, float eps,
                                                 const float* __restrict__ cos_table,
                                                 const float* __restrict__ sin_table, int max_pos,
                                                 const u32* __restrict__ pos0, int max_seq,
                                                 const u32* __restrict__ block_table, u16* __restrict__ k_cache,
                                                 u16* __restrict__ v_cache) {
    griddep_wait();
    griddep_launch_dependents();
    __shared__ float scratch[QK_TOKENS][WARP_SIZE];
    const int head = blockIdx.y, half = hd / 2, d = threadIdx.x;
    const int lane = d % WARP_SIZE, warp = d / WARP_SIZE, n_warps = blockDim.x / WARP_SIZE;
    const long long row_len = (long long)(n_q + 2 * n_kv) * hd;
    const int t0 = blockIdx.x * QK_TOKENS;
    const u32 first_pos = pos0[0] + (u32)t0;
    const bool active = d < half;
    if (head >= n_q + n_kv) {  // a v head: the whole CTA takes this branch
        if (!active) return;
        float va[QK_TOKENS], vb[QK_TOKENS];
#pragma unroll
        for (int i = 0; i < QK_TOKENS; ++i) {
            const float* h = qkv + (t0 + i) * row_len + (long long)head * hd;
            va[i] = t0 + i < m ? h[d] : 0.0f;
            vb[i] = t0 + i < m ? h[d + half] : 0.0f;
        }
#pragma unroll
        for (int i = 0; i < QK_TOKENS; ++i) {
            const u32 pos = first_pos + (u32)i;
            if (t0 + i >= m || pos >= (u32)max_seq) continue;
            const long long dst = kv_row(block_table, n_kv, head - n_q - n_kv, (int)pos, hd);
            v_cache[dst + d] = f32_to_f16(va[i]);
            v_cache[dst + d + half] = f32_to_f16(vb[i]);
        }
        return;
    }
    int ia = 0, ib = 0;
    qk_head_pair(d, hd, rot, &ia, &ib);
    const int rot_half = rot / 2;
    float a[QK_TOKENS], b[QK_TOKENS], c[QK_TOKENS], s[QK_TOKENS];
#pragma unroll
    for (int i = 0; i < QK_TOKENS; ++i) {
        const bool row = active && t0 + i < m;
        const float* h = qkv + (t0 + i) * row_len + (long long)head * hd;
        a[i] = row ? h[ia] : 0.0f;
        b[i] = row ? h[ib] : 0.0f;
        const u32 pos = first_pos + (u32)i;
        const bool table = row && d < rot_half && pos < (u32)max_pos;
        c[i] = table ? cos_table[(long long)pos * rot_half + d] : 0.0f;
        s[i] = table ? sin_table[(long long)pos * rot_half + d] : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < QK_TOKENS; ++i) {
        const float v = warp_sum(qk_pair_sq(a[i], b[i]));
        if (lane == 0) scratch[i][warp] = v;
    }
    __syncthreads();
    float ss[QK_TOKENS];
#pragma unroll
    for (int i = 0; i < QK_TOKENS; ++i) ss[i] = warp_sum(lane < n_warps ? scratch[i][lane] : 0.0f);
    if (!active) return;
    const float* w = head < n_q ? q_norm : k_norm;
    const float wa = w[ia], wb = w[ib];
#pragma unroll
    for (int i = 0; i < QK_TOKENS; ++i) {
        if (t0 + i >= m) continue;
        float* h = qkv + (t0 + i) * row_len + (long long)head * hd;
        const u32 pos = first_pos + (u32)i;
        float out_a, out_b;
        qk_pair_result(a[i], b[i], ss[i], hd, eps, wa, wb, c[i], s[i], d < rot_half, pos < (u32)max_pos, &out_a,
                       &out_b);
        h[ia] = out_a;
        h[ib] = out_b;
        if (head < n_q || pos >= (u32)max_seq) continue;
        const long long dst = kv_row(block_table, n_kv, head - n_q, (int)pos, hd);
        k_cache[dst + ia] = f32_to_f16(out_a);
        k_cache[dst + ib] = f32_to_f16(out_b);
    }
}

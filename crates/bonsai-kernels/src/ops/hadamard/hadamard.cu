// Blockwise signed normalized Walsh-Hadamard transform (ops/hadamard/mod.rs) for blocks below a
// 128-group (hadamard_blocks_in_warps below takes the others, with the same arithmetic): one CTA
// per block of n values of one row (grid: rows * W/n, 1-D), the block in dynamic shared memory.
// Forward: the load gathers P(x) (the tiled-to-grouped V-head permutation when perm_hd > 0),
// multiplies by the sign and by 1/sqrt(n); then log2(n) butterfly stages (u+v, u-v), one barrier
// each; the store writes the block back. Inverse: the plain load with the scale, the signs on
// the store. Sign element i multiplies activation element i of the row.
//
// It defines the order every kernel here keeps: the stages by index bit, bit 0 first, each pair
// (u, v) -> (u + v, u - v).

// Index g of a grouped row reads tiled index hadamard_source(g) (perm_hd = 0: no permutation):
// grouped head k_idx * rep + v_idx lives at tiled head v_idx * k_heads + k_idx.
__device__ __forceinline__ int hadamard_source(int g, int perm_hd, int perm_k_heads, int perm_rep) {
    if (perm_hd == 0) return g;
    const int head = g / perm_hd, within = g % perm_hd;
    const int k_idx = head / perm_rep, v_idx = head % perm_rep;
    return (v_idx * perm_k_heads + k_idx) * perm_hd + within;
}

extern "C" __global__ void hadamard_block_in_smem(const float* __restrict__ x, const float* __restrict__ signs,
                                                  float* __restrict__ y, int width, int block, float scale,
                                                  int inverse, int perm_hd, int perm_k_heads, int perm_rep) {
    griddep_wait();
    griddep_launch_dependents();
    extern __shared__ float hadamard_buf[];
    const int blocks_per_row = width / block;
    const long long row = blockIdx.x / blocks_per_row;
    const int first = (blockIdx.x % blocks_per_row) * block;
    const float* xr = x + row * width;
    float* yr = y + row * width;
    for (int i = threadIdx.x; i < block; i += blockDim.x) {
        const int g = first + i;
        float v;
        if (inverse) {
            v = xr[g];
        } else {
            v = xr[hadamard_source(g, perm_hd, perm_k_heads, perm_rep)] * signs[g];
        }
        hadamard_buf[i] = v * scale;
    }
    __syncthreads();
    const int pairs = block / 2;
    for (int len = 1; len < block; len <<= 1) {
        for (int p = threadIdx.x; p < pairs; p += blockDim.x) {
            const int i = (p / len) * 2 * len + (p % len);
            const float a = hadamard_buf[i], b = hadamard_buf[i + len];
            hadamard_buf[i] = a + b;
            hadamard_buf[i + len] = a - b;
        }
        __syncthreads();
    }
    for (int i = threadIdx.x; i < block; i += blockDim.x) {
        const int g = first + i;
        yr[g] = inverse ? hadamard_buf[i] * signs[g] : hadamard_buf[i];
    }
}

// One butterfly (u + v, u - v) of a pair held by two threads, on this thread's side: the lower
// index (upper false) takes mine + other, the upper other - mine, the operands the shared-memory
// loop (hadamard_block_in_smem's fallback) gives them, so every bit is the same.
__device__ __forceinline__ float butterfly_side(float mine, float other, bool upper) {
    return upper ? other - mine : mine + other;
}

// The first log2(128) = 7 butterfly stages of a 128-group whose lane l holds values 4l .. 4l + 3:
// index bits 0 and 1 in registers, bits 2 .. 6 across lanes (lane bit b - 2).
__device__ __forceinline__ void fwht_group_lane_quads(float (&u)[4], int lane) {
#pragma unroll
    for (int len = 1; len < 4; len <<= 1) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            if (e & len) continue;
            const float a = u[e], b = u[e + len];
            u[e] = a + b;
            u[e + len] = a - b;
        }
    }
#pragma unroll
    for (int len = 1; len < WARP_SIZE; len <<= 1) {
        const bool upper = lane & len;
#pragma unroll
        for (int e = 0; e < 4; ++e) u[e] = butterfly_side(u[e], __shfl_xor_sync(FULL_MASK, u[e], len), upper);
    }
}

// Rows one CTA of hadamard_blocks_in_warps transforms (of one block column): their loads are all
// in flight at once.
#define HADAMARD_ROWS_PER_CTA 2
// 128-groups one warp of hadamard_blocks_in_warps holds per row: MAX_BLOCK / 128 over 32 warps.
#define HADAMARD_GROUPS_PER_WARP 2
// Values per thread in its second phase: block / blockDim.x, 4 (8 for MAX_BLOCK).
#define HADAMARD_PER_THREAD 8

// hadamard_block_in_smem's transform for blocks of whole 128-groups (ops/hadamard/cuda.rs picks
// it; block <= MAX_BLOCK), bit for bit, at the bandwidth of the rows: one CTA per block column and
// HADAMARD_ROWS_PER_CTA rows (grid: W / block * ceil(rows / HADAMARD_ROWS_PER_CTA), 1-D), a thread
// per 4 values (blockDim.x = min(block / 4, 1024)); dynamic shared memory: block floats per row.
//  1. Every load of the CTA at once: warp w takes 128-groups w, w + warps of each row, lane l the
//     four values 4l .. 4l + 3 of a group (one 16-byte load when `vec4`: x, signs and a permuted
//     head's values 16-byte aligned), gathered through the permutation; the inverse's signs are
//     loaded for the second phase's values.
//  2. (x * s) * scale (forward) or x * scale (inverse), then stages bits 0, 1 in registers and bits
//     2..6 by shuffles (lane bit b - 2), the group in the warp.
//  3. One barrier: the groups through shared memory; the stages bits 7 .. log2(block) - 1 pair
//     equal offsets j of different groups: a thread holds `per` groups (register stages) of
//     block / blockDim.x / per consecutive offsets, the group bits above per on neighbouring lanes
//     (shuffle stages), and stores y (times the sign for the inverse).
// Each stage keeps its pairs and the stages their order (bit 0 first), so every bit is the
// shared-memory loop's.
extern "C" __global__ void __launch_bounds__(1024)
    hadamard_blocks_in_warps(const float* __restrict__ x, const float* __restrict__ signs, float* __restrict__ y, int rows,
                             int width, int block, float scale, int inverse, int vec4, int perm_hd, int perm_k_heads,
                             int perm_rep) {
    griddep_wait();
    griddep_launch_dependents();
    extern __shared__ float hadamard_rows_buf[];
    const int blocks_per_row = width / block;
    const int first = (blockIdx.x % blocks_per_row) * block;
    const int row0 = (blockIdx.x / blocks_per_row) * HADAMARD_ROWS_PER_CTA;
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE, warps = blockDim.x / WARP_SIZE;
    const int groups = block / GROUP_SIZE;
    auto source_of = [&](int g) { return inverse ? g : hadamard_source(g, perm_hd, perm_k_heads, perm_rep); };
    // The second phase's layout: value k of a thread is group lane_set * per + k % per at offset
    // j0 + k / per.
    const int per_thread = block / blockDim.x;
    const int per = min(groups, per_thread), lane_sets = groups / per, offsets = per_thread / per;
    const int lane_set = threadIdx.x % lane_sets, j0 = (threadIdx.x / lane_sets) * offsets;
    auto second_index = [&](int k) { return (lane_set * per + k % per) * GROUP_SIZE + j0 + k / per; };
    // Step 1.
    float v[HADAMARD_ROWS_PER_CTA][HADAMARD_GROUPS_PER_WARP][4] = {};
    float sgn[HADAMARD_GROUPS_PER_WARP][4] = {};
    float out_sign[HADAMARD_PER_THREAD] = {};
#pragma unroll
    for (int s = 0; s < HADAMARD_GROUPS_PER_WARP; ++s) {
        const int group = warp + s * warps;
        if (group >= groups) break;
        const int g = first + group * GROUP_SIZE + 4 * lane;
        if (!inverse) {
            if (vec4) {
                const float4 q = *reinterpret_cast<const float4*>(signs + g);
                sgn[s][0] = q.x, sgn[s][1] = q.y, sgn[s][2] = q.z, sgn[s][3] = q.w;
            } else {
#pragma unroll
                for (int e = 0; e < 4; ++e) sgn[s][e] = signs[g + e];
            }
        }
#pragma unroll
        for (int r = 0; r < HADAMARD_ROWS_PER_CTA; ++r) {
            if (row0 + r >= rows) break;
            const float* xr = x + (long long)(row0 + r) * width;
            if (vec4) {
                const float4 q = *reinterpret_cast<const float4*>(xr + source_of(g));
                v[r][s][0] = q.x, v[r][s][1] = q.y, v[r][s][2] = q.z, v[r][s][3] = q.w;
            } else {
#pragma unroll
                for (int e = 0; e < 4; ++e) v[r][s][e] = xr[source_of(g + e)];
            }
        }
    }
    if (inverse) {
#pragma unroll
        for (int k = 0; k < HADAMARD_PER_THREAD; ++k)
            if (k < per_thread) out_sign[k] = signs[first + second_index(k)];
    }
    // Step 2.
#pragma unroll
    for (int r = 0; r < HADAMARD_ROWS_PER_CTA; ++r) {
        if (row0 + r >= rows) break;
        float* buf = hadamard_rows_buf + r * block;
#pragma unroll
        for (int s = 0; s < HADAMARD_GROUPS_PER_WARP; ++s) {
            const int group = warp + s * warps;
            if (group >= groups) break;
            float (&u)[4] = v[r][s];
#pragma unroll
            // __fmul_rn: a rounded product, never contracted into the first butterfly's add (an
            // FMA there would skip a rounding the shared-memory kernel makes, storing the product).
            for (int e = 0; e < 4; ++e) u[e] = __fmul_rn(inverse ? u[e] : __fmul_rn(u[e], sgn[s][e]), scale);
            fwht_group_lane_quads(u, lane);
            *reinterpret_cast<float4*>(buf + group * GROUP_SIZE + 4 * lane) = make_float4(u[0], u[1], u[2], u[3]);
        }
    }
    __syncthreads();
    // Step 3.
#pragma unroll
    for (int r = 0; r < HADAMARD_ROWS_PER_CTA; ++r) {
        if (row0 + r >= rows) break;
        const float* buf = hadamard_rows_buf + r * block;
        float u[HADAMARD_PER_THREAD];
#pragma unroll
        for (int k = 0; k < HADAMARD_PER_THREAD; ++k) u[k] = k < per_thread ? buf[second_index(k)] : 0.0f;
#pragma unroll
        for (int len = 1; len < HADAMARD_PER_THREAD; len <<= 1) {
            if (len >= per) break;
#pragma unroll
            for (int k = 0; k < HADAMARD_PER_THREAD; ++k) {
                if ((k % per) & len || k + len >= per_thread) continue;
                const float a = u[k], b = u[k + len];
                u[k] = a + b;
                u[k + len] = a - b;
            }
        }
        for (int len = 1; len < lane_sets; len <<= 1) {
            const bool upper = lane_set & len;
#pragma unroll
            for (int k = 0; k < HADAMARD_PER_THREAD; ++k) u[k] = butterfly_side(u[k], __shfl_xor_sync(FULL_MASK, u[k], len), upper);
        }
        float* yr = y + (long long)(row0 + r) * width + first;
#pragma unroll
        for (int k = 0; k < HADAMARD_PER_THREAD; ++k) {
            if (k >= per_thread) break;
            yr[second_index(k)] = inverse ? u[k] * out_sign[k] : u[k];
        }
    }
}

// Values one thread of hadamard_rotate_planes holds: LAYOUT_LANES per 128-group in the first
// phase, at most ROTATE_GROUPS_PER_WARP groups per warp (MAX_BLOCK / 128 groups over 32 warps), and
// at most ROTATE_PER_THREAD group-strided values in the second (ops/hadamard/cuda.rs asserts both).
#define ROTATE_PER_THREAD 8
#define ROTATE_GROUPS_PER_WARP (ROTATE_PER_THREAD / LAYOUT_LANES)
// float4 loads of the row's sum of squares one thread has in flight at once.
#define ROTATE_ROW_QUADS 8

// The stages of a block past its 128-groups (index bits 7 ..), on one offset of `per` * lane_sets
// groups: this thread's u[r] (r < per) is group lane_set * per + r; the group-index bits low to
// high are r's (register pairs), then lane_set's (lanes lane_set ^ len of the same offset, by
// shuffles: every lane of the warp takes part when lane_sets > 1).
__device__ __forceinline__ void fwht_across_groups(float (&u)[ROTATE_PER_THREAD], int per, int lane_sets, int lane_set) {
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
}

// Thread t's rms_row_partial_sq (rms_norm.cu) over RMS_NORM_THREADS threads, the same fmaf chain,
// with up to ROTATE_ROW_QUADS of its float4 loads issued before the first sum (a row of <= 8192
// floats in one L2 round trip instead of one per unrolled four).
__device__ __forceinline__ float rotate_row_partial_sq(const float* __restrict__ xr, int n, bool vec4, int t) {
    if (!vec4) return rms_row_partial_sq(xr, n, false, t, RMS_NORM_THREADS);
    const float4* x4 = reinterpret_cast<const float4*>(xr);
    const int n4 = n >> 2;
    float ss = 0.0f;
    for (int base = t; base < n4; base += ROTATE_ROW_QUADS * RMS_NORM_THREADS) {
        float4 q[ROTATE_ROW_QUADS];
#pragma unroll
        for (int k = 0; k < ROTATE_ROW_QUADS; ++k) {
            const int i = base + k * RMS_NORM_THREADS;
            q[k] = i < n4 ? x4[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
#pragma unroll
        for (int k = 0; k < ROTATE_ROW_QUADS; ++k) {
            if (base + k * RMS_NORM_THREADS >= n4) break;
            ss = fmaf(q[k].x, q[k].x, ss);
            ss = fmaf(q[k].y, q[k].y, ss);
            ss = fmaf(q[k].z, q[k].z, ss);
            ss = fmaf(q[k].w, q[k].w, ss);
        }
    }
    return ss;
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

// One decode row's folded-matmul input and its bit planes in one launch (ops/hadamard/mod.rs,
// "Fused with the norm and the planes"): what rms_norm_row_per_block (norm_w given, head_dim 0) or
// gated_rms_norm_warp_per_head (norm_w and z given, heads of head_dim), hadamard_block_in_smem
// (forward) and gemv_b1_prepare (no norm weights) compute, bit for bit. One CTA per block of the
// row (grid W / block, 1-D; block a power of two multiple of 128, so that no 128-group straddles
// two blocks; blockDim.x = clamp(block / 4, RMS_NORM_THREADS, 1024)). Dynamic shared memory: the
// block, `scratch` (32 floats), the block's heads' 1/rms.
//
// The latency chain, in order (every step waits on the one before):
//  1. One global round trip: each warp loads its 128-groups' values (x gathered through the
//     permutation, signs, norm weights, gate) straight into b1_prepare_group's register layout,
//     and with them, in flight at once, the norm's inputs: the row norm's partial sums of squares
//     (threads below RMS_NORM_THREADS, as rms_norm_row_per_block takes them, every float4 issued
//     before the first sum) or the gated norm's heads (a warp per head, lane strides).
//  2. The norm's reduction, one barrier: the row norm's warp sums meet in `scratch` and every warp
//     adds the 8 in block_sum's order (block_sum's second barrier only guards the reuse of
//     `scratch`, which nothing here reuses); the gated norm's warp sums give the heads' 1/rms in
//     shared memory. Each CTA so holds the same 1/rms as the norm kernels.
//  3. The normed values (written to xn when given), (v * s) * scale, and the transform's first 7
//     stages inside each warp (fwht_group_in_warp: 5 shuffle stages, 2 in registers).
//  4. One barrier: the groups go to shared memory; the remaining log2(block / 128) stages pair
//     equal offsets of different groups: a thread takes up to ROTATE_PER_THREAD of them (the
//     stages over register pairs first, then over lanes by shuffles), writes them back (and to rot).
//  5. One barrier, then b1_prepare_group per 128-group from shared memory (a warp per group) and
//     the planes' stores.
// Three barriers and one global round trip before the stores (the shared-memory loop took a barrier
// per stage, 10 for a block of 1024, and the row sum a second round trip). Every butterfly keeps
// its pair and the stage order, so the thread layout changes no bit.
//
// GPW: 128-groups per warp in steps 1 and 3 (1 when the block has no more groups than the CTA
// warps: every block up to 4096; 2 for MAX_BLOCK). Holding two groups' values, signs, norm
// weights and gates (32 floats) under the 1024-thread launch bound's 64 registers, ptxas spilled
// the loaded values to local memory right after their loads: each spill store waited for its
// load, so the block's loads took several L2 round trips one after the other instead of one.
#define HADAMARD_ROTATE_PARAMS                                                                                 \
    const float* __restrict__ x, const float* __restrict__ norm_w, float eps, int vec4, const float* __restrict__ z, \
        int head_dim, float* __restrict__ xn, const float* __restrict__ signs, float* __restrict__ rot, int width,   \
        int block, float scale, int perm_hd, int perm_k_heads, int perm_rep, u32* __restrict__ planes,             \
        u32* __restrict__ gsx, float* __restrict__ group_sq
#define HADAMARD_ROTATE_ARGS \
    x, norm_w, eps, vec4, z, head_dim, xn, signs, rot, width, block, scale, perm_hd, perm_k_heads, perm_rep, planes, gsx, group_sq
template <int GPW>
__device__ __forceinline__ void hadamard_rotate_planes_body(HADAMARD_ROTATE_PARAMS) {
    extern __shared__ float rotate_smem[];
    float* buf = rotate_smem;
    float* scratch = rotate_smem + block;
    float* head_inv = scratch + WARP_SIZE;
    const int first = blockIdx.x * block;
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE, warps = blockDim.x / WARP_SIZE;
    const int groups = block / GROUP_SIZE;
    auto source_of = [&](int g) { return hadamard_source(g, perm_hd, perm_k_heads, perm_rep); };
    const bool gated = norm_w != nullptr && head_dim > 0;
    // The gated heads divide the block, a power of two: head_dim is one too, so the head of index
    // i is i >> head_shift and its offset i & (head_dim - 1) (no integer division: the kernel is
    // a latency chain, and a division by a run-time int is ~20 dependent instructions).
    const int head_shift = gated ? __ffs(head_dim) - 1 : 0;
    // Without a permutation, or with permuted heads of whole 128-groups (every Bonsai 2 width),
    // a group's 128 values are contiguous in x: one source_of per group instead of per value.
    const bool whole_groups = perm_hd % GROUP_SIZE == 0;
    const int j0 = layout_weight(0, lane);  // layout_weight(t, lane) = j0 + 2t
    // Step 1: group warp + s * warps of the block is this warp's s-th; v[s][t] its element j0 + 2t.
    float v[GPW][LAYOUT_LANES] = {}, sgn[GPW][LAYOUT_LANES] = {};
    float ws[GPW][LAYOUT_LANES] = {}, zs[GPW][LAYOUT_LANES] = {};
    // Where block index i (of this warp's s-th group) sits in x and xn: for whole groups its
    // offset in the group past the group's source.
    int group_source[GPW] = {};
    auto source_at = [&](int s, int i) { return whole_groups ? group_source[s] + (i & (GROUP_SIZE - 1)) : source_of(first + i); };
#pragma unroll
    for (int s = 0; s < GPW; ++s) {
        const int group = warp + s * warps;
        if (group >= groups) break;
        if (whole_groups) group_source[s] = source_of(first + group * GROUP_SIZE);
#pragma unroll
        for (int t = 0; t < LAYOUT_LANES; ++t) {
            const int i = group * GROUP_SIZE + j0 + 2 * t;
            const int source = source_at(s, i);
            v[s][t] = x[source];
            sgn[s][t] = signs[first + i];
            if (norm_w != nullptr) ws[s][t] = norm_w[gated ? source & (head_dim - 1) : source];
            if (gated) zs[s][t] = z[source];
        }
    }
    // Step 2.
    float inv = 1.0f;
    if (norm_w != nullptr && !gated) {
        const int t = threadIdx.x;
        float part = t < RMS_NORM_THREADS ? rotate_row_partial_sq(x, width, vec4 != 0, t) : 0.0f;
        part = warp_sum(part);
        if (lane == 0) scratch[warp] = part;
        __syncthreads();
        const float ss = warp_sum(lane < warps ? scratch[lane] : 0.0f);
        inv = rsqrtf(ss / (float)width + eps);
    }
    if (gated) {
        for (int h = warp; h < block / head_dim; h += warps) {
            const float* xh = x + source_of(first + h * head_dim);
            float ss = 0.0f;
#pragma unroll 4
            for (int i = lane; i < head_dim; i += WARP_SIZE) ss = fmaf(xh[i], xh[i], ss);
            ss = warp_sum(ss);
            if (lane == 0) head_inv[h] = rsqrtf(ss / (float)head_dim + eps);
        }
        __syncthreads();
    }
    // Step 3.
#pragma unroll
    for (int s = 0; s < GPW; ++s) {
        const int group = warp + s * warps;
        if (group >= groups) break;
#pragma unroll
        for (int t = 0; t < LAYOUT_LANES; ++t) {
            const int i = group * GROUP_SIZE + j0 + 2 * t;
            float n = v[s][t];
            if (gated) {
                const float gate = zs[s][t];
                n = n * head_inv[i >> head_shift] * ws[s][t] * (gate * sigmoid_stable(gate));
            } else if (norm_w != nullptr) {
                n = n * inv * ws[s][t];
            }
            if (norm_w != nullptr && xn != nullptr) xn[source_at(s, i)] = n;
            // Rounded products (no FMA with the first butterfly's add): the separate launches
            // store this value before they transform it.
            v[s][t] = __fmul_rn(__fmul_rn(n, sgn[s][t]), scale);
        }
        fwht_group_in_warp(v[s], j0);
#pragma unroll
        for (int t = 0; t < LAYOUT_LANES; ++t) buf[group * GROUP_SIZE + j0 + 2 * t] = v[s][t];
    }
    __syncthreads();
    // Step 4: offset j of groups lane_set * per + r (r < per): per = min(groups, ROTATE_PER_THREAD)
    // in registers, lane_sets = groups / per threads per offset, neighbours in a warp
    // (thread = j * lane_sets + lane_set; 128 * lane_sets threads, whole warps). Group-index bits
    // low to high: r's (register pairs), then lane_set's (shuffles).
    const int per = min(groups, ROTATE_PER_THREAD), lane_sets = groups / per;
    if (threadIdx.x < GROUP_SIZE * lane_sets) {
        const int lane_set = threadIdx.x % lane_sets, j = threadIdx.x / lane_sets;
        float u[ROTATE_PER_THREAD];
#pragma unroll
        for (int r = 0; r < ROTATE_PER_THREAD; ++r) u[r] = r < per ? buf[(lane_set * per + r) * GROUP_SIZE + j] : 0.0f;
        fwht_across_groups(u, per, lane_sets, lane_set);
#pragma unroll
        for (int r = 0; r < ROTATE_PER_THREAD; ++r) {
            if (r >= per) break;
            const int i = (lane_set * per + r) * GROUP_SIZE + j;
            buf[i] = u[r];
            if (rot != nullptr) rot[first + i] = u[r];
        }
    }
    __syncthreads();
    // Step 5.
    for (int w = warp; w < groups; w += warps) {
        const int group = first / GROUP_SIZE + w;
        b1_prepare_group(buf + w * GROUP_SIZE, nullptr, planes + (long long)group * B1_GROUP_WORDS, gsx + 2 * group,
                         group_sq + group);
    }
}

// Two groups per warp only for blocks past 4096 (32 warps); that body is a call, so the hot one
// is the entry point's inline code.
__device__ __noinline__ void hadamard_rotate_planes_two_groups(HADAMARD_ROTATE_PARAMS) {
    hadamard_rotate_planes_body<ROTATE_GROUPS_PER_WARP>(HADAMARD_ROTATE_ARGS);
}

extern "C" __global__ void __launch_bounds__(1024) hadamard_rotate_planes(HADAMARD_ROTATE_PARAMS) {
    griddep_wait();
    // The GEMV's CTAs may start (and prefetch their weights) on the other SMs at once, as after
    // gemv_b1_prepare.
    griddep_launch_dependents();
    if (block / GROUP_SIZE <= (int)(blockDim.x / WARP_SIZE))
        hadamard_rotate_planes_body<1>(HADAMARD_ROTATE_ARGS);
    else
        hadamard_rotate_planes_two_groups(HADAMARD_ROTATE_ARGS);
}

// A batch's rows (a decode step of several sequences): row blockIdx.y's x, z, xn, rot and planes
// (row r's at group r width / 128), each row exactly as hadamard_rotate_planes does one; the norm
// weights and signs are every row's. A separate entry point: the one-row kernel's SASS stays as
// it is (the decode chain's latency).
extern "C" __global__ void __launch_bounds__(1024) hadamard_rotate_planes_rows(HADAMARD_ROTATE_PARAMS) {
    griddep_wait();
    griddep_launch_dependents();
    const long long row = blockIdx.y, values = row * width, groups = row * (width / GROUP_SIZE);
    x += values;
    if (z != nullptr) z += values;
    if (xn != nullptr) xn += values;
    if (rot != nullptr) rot += values;
    planes += groups * B1_GROUP_WORDS;
    gsx += 2 * groups;
    group_sq += groups;
    if (block / GROUP_SIZE <= (int)(blockDim.x / WARP_SIZE))
        hadamard_rotate_planes_body<1>(HADAMARD_ROTATE_ARGS);
    else
        hadamard_rotate_planes_two_groups(HADAMARD_ROTATE_ARGS);
}

// A prefill's folded-matmul input in one launch (ops/hadamard/mod.rs, "Fused with the norm and
// the f16 pre-pass"): the norm, the forward transform and the f16 GEMMs' activation pre-pass of m
// rows, bit for bit what rms_norm_row_per_block (norm_w given, head_dim 0) or
// gated_rms_norm_warp_per_head (norm_w and z given, heads of head_dim), hadamard_blocks_in_warps
// (forward) and x_to_f16_rows_q{BITS} compute one after the other, each of which reads and writes
// the whole row through global memory. One CTA of ROTATE_F16_THREADS per row (grid m, 1-D);
// dynamic shared memory: the row (width floats, in the transform's grouped order), then the gated
// heads' 1/rms.
//  1. The row into shared memory by cp.async, every 16-byte piece to its grouped position (the
//     permutation moves whole heads of a multiple of 4 values), all in flight at once.
//  2. The norm's statistics from shared memory, in the norm kernels' orders: thread t's fmaf chain
//     over the source row's float4s t, t + 256, ... then block_sum; or a warp per head with lane
//     strides.
//  3. A warp per 128-group, ROTATE_F16_BATCH groups' loads at once: the normed value (stored to
//     xn, at its source position, when given), (n * s) * scale rounded twice, the stages of index
//     bits 0 .. 6 (two in registers, five by shuffles: fwht_group_lane_quads), back in place.
//  4. The stages of bits 7 .. log2(block) - 1, pairing equal offsets of a block's groups as
//     hadamard_blocks_in_warps' third step does (to rot when given), and the row's max |value|.
//  5. The pre-pass: e from the max, f16_rn(v * 2^e) in slot order (f16_row_store), 2^-e.
// Every butterfly keeps its pair and the stage order (bit 0 first), and every product its
// operands, so no bit differs from the launches it replaces.

// The norm kernels' partial sums (RMS_NORM_THREADS) and the pre-pass's threads (QG_PREP_THREADS)
// are both this many.
#define ROTATE_F16_THREADS 256
// 128-groups whose loads one warp of step 3 issues together.
#define ROTATE_F16_BATCH 2

// Tiled index s of a row goes to grouped index hadamard_dest(s): hadamard_source's inverse.
__device__ __forceinline__ int hadamard_dest(int s, int perm_hd, int perm_k_heads, int perm_rep) {
    if (perm_hd == 0) return s;
    const int head = s / perm_hd, within = s % perm_hd;
    const int v_idx = head / perm_k_heads, k_idx = head % perm_k_heads;
    return (k_idx * perm_rep + v_idx) * perm_hd + within;
}

template <int BITS>
__device__ __forceinline__ void hadamard_rotate_f16_row(const float* __restrict__ x, const float* __restrict__ norm_w, float eps,
                                                       const float* __restrict__ z, int head_dim, float* __restrict__ xn,
                                                       const float* __restrict__ signs, float* __restrict__ rot, int width, int block,
                                                       float scale, int perm_hd, int perm_k_heads, int perm_rep, u16* __restrict__ xh,
                                                       float* __restrict__ row_unscale) {
    extern __shared__ float4 rotate_f16_row4[];
    __shared__ float scratch[WARP_SIZE];
    float* buf = reinterpret_cast<float*>(rotate_f16_row4);
    float* head_inv = buf + width;
    const long long row = blockIdx.x, base = row * width;
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE, warps = blockDim.x / WARP_SIZE;
    const int quads = width / 4;
    auto dest_quad = [&](int i) { return hadamard_dest(4 * i, perm_hd, perm_k_heads, perm_rep) / 4; };
    // Step 1.
    for (int i = threadIdx.x; i < quads; i += blockDim.x) cp_async16(rotate_f16_row4 + dest_quad(i), x + base + 4 * i);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    // Step 2.
    const bool gated = norm_w != nullptr && head_dim > 0;
    float inv = 1.0f;
    if (norm_w != nullptr && !gated) {
        float ss = 0.0f;
        for (int i = threadIdx.x; i < quads; i += blockDim.x) {
            const float4 v = rotate_f16_row4[dest_quad(i)];
            ss = fmaf(v.x, v.x, ss);
            ss = fmaf(v.y, v.y, ss);
            ss = fmaf(v.z, v.z, ss);
            ss = fmaf(v.w, v.w, ss);
        }
        ss = block_sum(ss, scratch);
        inv = rsqrtf(ss / (float)width + eps);
    }
    if (gated) {
        // Grouped head h holds one whole tiled head: the same values in the same order.
        for (int h = warp; h < width / head_dim; h += warps) {
            const float* vh = buf + h * head_dim;
            float ss = 0.0f;
            for (int i = lane; i < head_dim; i += WARP_SIZE) ss = fmaf(vh[i], vh[i], ss);
            ss = warp_sum(ss);
            if (lane == 0) head_inv[h] = rsqrtf(ss / (float)head_dim + eps);
        }
        __syncthreads();
    }
    // Step 3.
    const int groups = width / GROUP_SIZE;
    for (int g0 = warp; g0 < groups; g0 += warps * ROTATE_F16_BATCH) {
        float4 v[ROTATE_F16_BATCH] = {}, sg[ROTATE_F16_BATCH] = {}, w[ROTATE_F16_BATCH] = {}, gate[ROTATE_F16_BATCH] = {};
#pragma unroll
        for (int b = 0; b < ROTATE_F16_BATCH; ++b) {
            const int group = g0 + b * warps;
            if (group >= groups) break;
            const int i = group * GROUP_SIZE + 4 * lane;
            const int source = hadamard_source(i, perm_hd, perm_k_heads, perm_rep);
            v[b] = rotate_f16_row4[i / 4];
            sg[b] = *reinterpret_cast<const float4*>(signs + i);
            if (norm_w != nullptr) w[b] = *reinterpret_cast<const float4*>(norm_w + (gated ? i % head_dim : source));
            if (gated) gate[b] = *reinterpret_cast<const float4*>(z + base + source);
        }
#pragma unroll
        for (int b = 0; b < ROTATE_F16_BATCH; ++b) {
            const int group = g0 + b * warps;
            if (group >= groups) break;
            const int i = group * GROUP_SIZE + 4 * lane;
            float u[4] = {v[b].x, v[b].y, v[b].z, v[b].w};
            const float s4[4] = {sg[b].x, sg[b].y, sg[b].z, sg[b].w};
            const float w4[4] = {w[b].x, w[b].y, w[b].z, w[b].w};
            const float z4[4] = {gate[b].x, gate[b].y, gate[b].z, gate[b].w};
            if (norm_w != nullptr) {
                const float r = gated ? head_inv[i / head_dim] : inv;
#pragma unroll
                for (int e = 0; e < 4; ++e) u[e] = gated ? u[e] * r * w4[e] * (z4[e] * sigmoid_stable(z4[e])) : u[e] * r * w4[e];
                if (xn != nullptr) {
                    const int source = hadamard_source(i, perm_hd, perm_k_heads, perm_rep);
                    *reinterpret_cast<float4*>(xn + base + source) = make_float4(u[0], u[1], u[2], u[3]);
                }
            }
            // Rounded products (no FMA with the first butterfly's add): the separate launches
            // store the normed value before they transform it.
#pragma unroll
            for (int e = 0; e < 4; ++e) u[e] = __fmul_rn(__fmul_rn(u[e], s4[e]), scale);
            fwht_group_lane_quads(u, lane);
            rotate_f16_row4[i / 4] = make_float4(u[0], u[1], u[2], u[3]);
        }
    }
    __syncthreads();
    // Step 4: a task is (block, offset j, lane set): groups lane_set * per + r (r < per) of the
    // block at offset j, per = min(block groups, ROTATE_PER_THREAD) in registers, lane_sets
    // neighbouring threads per offset (shuffles). Where lane_sets > 1 the block has at least 16
    // groups, so the tasks (width / per) fill whole CTAs of threads and every lane shuffles.
    const int block_groups = block / GROUP_SIZE;
    const int per = min(block_groups, ROTATE_PER_THREAD), lane_sets = block_groups / per;
    const int tasks = width / per;
    float amax = 0.0f;
    for (int t0 = 0; t0 < tasks; t0 += blockDim.x) {
        const int t = t0 + threadIdx.x;
        const bool active = t < tasks;
        const int lane_set = t % lane_sets, j = (t / lane_sets) % GROUP_SIZE;
        const int first = t / (lane_sets * GROUP_SIZE) * block + lane_set * per * GROUP_SIZE + j;
        float u[ROTATE_PER_THREAD];
#pragma unroll
        for (int r = 0; r < ROTATE_PER_THREAD; ++r) u[r] = active && r < per ? buf[first + r * GROUP_SIZE] : 0.0f;
        fwht_across_groups(u, per, lane_sets, lane_set);
        if (!active) continue;
#pragma unroll
        for (int r = 0; r < ROTATE_PER_THREAD; ++r) {
            if (r >= per) break;
            const int i = first + r * GROUP_SIZE;
            buf[i] = u[r];
            if (rot != nullptr) rot[base + i] = u[r];
            amax = fmaxf(amax, fabsf(u[r]));
        }
    }
    // Step 5. block_max ends with a barrier: every value of step 4 is in shared memory after it.
    amax = block_max(amax, scratch);
    const int e = qg_row_exponent(amax);
    f16_row_store<BITS>(buf, width, qg_pow2(e), reinterpret_cast<u32*>(xh + base));
    if (threadIdx.x == 0) row_unscale[row] = qg_pow2(-e);
}

#define HADAMARD_ROTATE_F16_PARAMS                                                                                      \
    const float *x, const float *norm_w, float eps, const float *z, int head_dim, float *xn, const float *signs, float *rot, \
        int width, int block, float scale, int perm_hd, int perm_k_heads, int perm_rep, u16 *xh, float *row_unscale
#define HADAMARD_ROTATE_F16_ARGS \
    x, norm_w, eps, z, head_dim, xn, signs, rot, width, block, scale, perm_hd, perm_k_heads, perm_rep, xh, row_unscale

extern "C" __global__ void __launch_bounds__(ROTATE_F16_THREADS) hadamard_rotate_f16_rows_q1(HADAMARD_ROTATE_F16_PARAMS) {
    griddep_wait();
    griddep_launch_dependents();
    hadamard_rotate_f16_row<1>(HADAMARD_ROTATE_F16_ARGS);
}
extern "C" __global__ void __launch_bounds__(ROTATE_F16_THREADS) hadamard_rotate_f16_rows_q2(HADAMARD_ROTATE_F16_PARAMS) {
    griddep_wait();
    griddep_launch_dependents();
    hadamard_rotate_f16_row<2>(HADAMARD_ROTATE_F16_ARGS);
}

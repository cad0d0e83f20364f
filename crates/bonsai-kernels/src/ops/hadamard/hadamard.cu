// Blockwise signed normalized Walsh-Hadamard transform (ops/hadamard/mod.rs): one CTA per block
// of n values of one row (grid: rows * W/n, 1-D), the block in dynamic shared memory (n floats).
// Forward: the load gathers P(x) (the tiled-to-grouped V-head permutation when perm_hd > 0),
// multiplies by the sign and by 1/sqrt(n); then log2(n) butterfly stages (u+v, u-v), one barrier
// each; the store writes the block back. Inverse: the plain load with the scale, the signs on
// the store. Sign element i multiplies activation element i of the row.
//
// Speed of light: 8 bytes per element (the signs stay in L2): a decode row of 5120 moves 41 KB;
// the kernel is launch- and latency-bound there.

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
            int source = g;
            if (perm_hd > 0) {
                // Grouped head k_idx * rep + v_idx lives at tiled head v_idx * k_heads + k_idx.
                const int head = g / perm_hd, within = g % perm_hd;
                const int k_idx = head / perm_rep, v_idx = head % perm_rep;
                source = (v_idx * perm_k_heads + k_idx) * perm_hd + within;
            }
            v = xr[source] * signs[g];
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

// Block values per thread at most: MAX_BLOCK (ops/hadamard/cuda.rs, which asserts it) over 1024
// threads.
#define ROTATE_PER_THREAD 8

// One decode row's folded-matmul input and its bit planes in one launch (ops/hadamard/mod.rs,
// "Fused with the norm and the planes"): what rms_norm_row_per_block (norm_w given, head_dim 0) or
// gated_rms_norm_warp_per_head (norm_w and z given, heads of head_dim), hadamard_block_in_smem
// (forward) and gemv_b1_prepare (no norm weights) compute, bit for bit. One CTA per block of the
// row (grid W / block, 1-D; block a multiple of 128 so that no 128-group straddles two blocks), the
// block in dynamic shared memory, then `scratch` (32 floats), then the block's heads' 1/rms.
// * The row norm: every CTA sums the whole row's squares as rms_norm_row_per_block does (threads
//   below RMS_NORM_THREADS take its partial sums, block_sum adds them; the other threads' zeros
//   change no bit), so each CTA holds the same 1/rms.
// * The gated norm: a warp per head of the block (whole heads: head_dim divides the block, and a
//   permutation moves whole heads of head_dim) sums the head's squares as
//   gated_rms_norm_warp_per_head does (lane strides, warp_sum); the load multiplies by silu(z).
// * A CTA writes the normed values it loads (xn, when given: the norm's output still read later;
//   with the permutation those are the tiled indices its block gathers, each written by exactly
//   one CTA).
// * The transform: hadamard_block_in_smem's load, (x * s) * scale, and its butterflies (every
//   stage's pairs are fixed, so the thread count changes no bit); rot (when given) gets the block.
// * The planes: warp w quantizes the block's 128-groups w, w + warps, ... from shared memory with
//   b1_prepare_group, the prepare's device function.
extern "C" __global__ void __launch_bounds__(1024)
    hadamard_rotate_planes(const float* __restrict__ x, const float* __restrict__ norm_w, float eps, int vec4,
                           const float* __restrict__ z, int head_dim, float* __restrict__ xn,
                           const float* __restrict__ signs, float* __restrict__ rot, int width, int block, float scale, int perm_hd, int perm_k_heads, int perm_rep,
                           u32* __restrict__ planes, u32* __restrict__ gsx, float* __restrict__ group_sq) {
    griddep_wait();
    // The GEMV's CTAs may start (and prefetch their weights) on the other SMs at once, as after
    // gemv_b1_prepare.
    griddep_launch_dependents();
    extern __shared__ float rotate_smem[];
    float* buf = rotate_smem;
    float* scratch = rotate_smem + block;
    float* head_inv = scratch + WARP_SIZE;
    const int first = blockIdx.x * block;
    // Grouped index g of the row reads tiled index source(g): grouped head k_idx * rep + v_idx
    // lives at tiled head v_idx * k_heads + k_idx.
    auto source_of = [&](int g) {
        if (perm_hd == 0) return g;
        const int head = g / perm_hd, within = g % perm_hd;
        const int k_idx = head / perm_rep, v_idx = head % perm_rep;
        return (v_idx * perm_k_heads + k_idx) * perm_hd + within;
    };
    const bool gated = norm_w != nullptr && head_dim > 0;
    // The block's own inputs (x, signs, norm weights, gate) are requested first, so that their
    // round trip overlaps the norm's sums instead of following them. Element i = threadIdx.x +
    // k * blockDim.x of the block is this thread's k-th (k < ROTATE_PER_THREAD: the launcher's
    // blockDim.x is at least min(block / 2, 1024), and block <= 8192).
    float xs[ROTATE_PER_THREAD] = {}, sgn[ROTATE_PER_THREAD] = {}, ws[ROTATE_PER_THREAD] = {}, zs[ROTATE_PER_THREAD] = {};
#pragma unroll
    for (int k = 0; k < ROTATE_PER_THREAD; ++k) {
        const int i = threadIdx.x + k * blockDim.x;
        if (i >= block) break;
        const int source = source_of(first + i);
        xs[k] = x[source];
        sgn[k] = signs[first + i];
        if (norm_w != nullptr) ws[k] = norm_w[gated ? source % head_dim : source];
        if (gated) zs[k] = z[source];
    }
    float inv = 1.0f;
    if (norm_w != nullptr && !gated) {
        const int t = threadIdx.x;
        const float part = t < RMS_NORM_THREADS ? rms_row_partial_sq(x, width, vec4 != 0, t, RMS_NORM_THREADS) : 0.0f;
        const float ss = block_sum(part, scratch);
        inv = rsqrtf(ss / (float)width + eps);
    }
    if (gated) {
        const int lane = threadIdx.x % WARP_SIZE;
        for (int h = threadIdx.x / WARP_SIZE; h < block / head_dim; h += blockDim.x / WARP_SIZE) {
            const float* xh = x + source_of(first + h * head_dim);
            float ss = 0.0f;
            for (int i = lane; i < head_dim; i += WARP_SIZE) ss = fmaf(xh[i], xh[i], ss);
            ss = warp_sum(ss);
            if (lane == 0) head_inv[h] = rsqrtf(ss / (float)head_dim + eps);
        }
        __syncthreads();
    }
#pragma unroll
    for (int k = 0; k < ROTATE_PER_THREAD; ++k) {
        const int i = threadIdx.x + k * blockDim.x;
        if (i >= block) break;
        float v = xs[k];
        if (gated) {
            const float gate = zs[k];
            v = v * head_inv[i / head_dim] * ws[k] * (gate * sigmoid_stable(gate));
        } else if (norm_w != nullptr) {
            v = v * inv * ws[k];
        }
        if (norm_w != nullptr && xn != nullptr) xn[source_of(first + i)] = v;
        buf[i] = v * sgn[k] * scale;
    }
    __syncthreads();
    const int pairs = block / 2;
    for (int len = 1; len < block; len <<= 1) {
        for (int p = threadIdx.x; p < pairs; p += blockDim.x) {
            const int i = (p / len) * 2 * len + (p % len);
            const float a = buf[i], b = buf[i + len];
            buf[i] = a + b;
            buf[i + len] = a - b;
        }
        __syncthreads();
    }
    if (rot != nullptr) {
        for (int i = threadIdx.x; i < block; i += blockDim.x) rot[first + i] = buf[i];
    }
    for (int w = threadIdx.x / WARP_SIZE; w < block / GROUP_SIZE; w += blockDim.x / WARP_SIZE) {
        const int group = first / GROUP_SIZE + w;
        b1_prepare_group(buf + w * GROUP_SIZE, nullptr, planes + (long long)group * B1_GROUP_WORDS, gsx + 2 * group,
                         group_sq + group);
    }
}

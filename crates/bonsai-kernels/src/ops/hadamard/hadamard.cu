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

// Index of the largest value of x[0, n): ties -> lowest index, NaN never wins. Writes ARGMAX_NONE
// when every value is NaN (or n == 0).
//
// One launch, many CTAs: each CTA reduces its grid-stride share to one candidate and folds it
// into a device-global 64-bit key with atomicMax (value in an order-preserving encoding in the
// high word, the bitwise NOT of the index in the low word, so the larger key is the larger value
// and, on ties, the lower index). The last CTA to finish (counted with atomicAdd) turns the key
// into the index and resets both globals to zero, so the next launch (or graph replay) starts
// clean. Why: the single-CTA version was slow for the 151669-entry vocabulary (one SM waiting on
// ~150 dependent loads per thread; docs/kernel-notes.md, "Outside the layers: host loop, step
// ends, PDL"); spread over ~150 CTAs each thread loads a few values. The globals make the kernel non-reentrant: two argmax launches must not run
// concurrently on different streams of one context (bonsai uses one stream per context).
#define ARGMAX_NONE 0xffffffffu

__device__ unsigned long long argmax_best_key;  // 0: no candidate yet
__device__ u32 argmax_blocks_done;

// True when candidate (va, ia) should replace (vb, ib).
__device__ __forceinline__ bool argmax_better(float va, u32 ia, float vb, u32 ib) {
    if (ia == ARGMAX_NONE) return false;
    if (ib == ARGMAX_NONE) return true;
    return va > vb || (va == vb && ia < ib);
}

// This CTA's share (CTA `block` of `blocks`) of the argmax of x[0, n), folded into *best_key; the
// last of the `blocks` CTAs (counted in *blocks_done) writes *out and resets both to zero.
__device__ __forceinline__ void argmax_fold(const float* __restrict__ x, u32 n, u32 block, u32 blocks,
                                            unsigned long long* best_key, u32* blocks_done,
                                            u32* __restrict__ out) {
    __shared__ float best_v[WARP_SIZE];
    __shared__ u32 best_i[WARP_SIZE];
    float bv = 0.0f;
    u32 bi = ARGMAX_NONE;
    // Each thread scans increasing indices, so a strict > keeps its lowest index on ties.
    const u32 stride = blocks * blockDim.x;
    for (u32 i = block * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float v = __ldg(x + i);
        if (v == v && (bi == ARGMAX_NONE || v > bv)) { bv = v; bi = i; }
    }
#pragma unroll
    for (int offset = WARP_SIZE / 2; offset > 0; offset >>= 1) {
        const float ov = __shfl_xor_sync(FULL_MASK, bv, offset);
        const u32 oi = __shfl_xor_sync(FULL_MASK, bi, offset);
        if (argmax_better(ov, oi, bv, bi)) { bv = ov; bi = oi; }
    }
    const int lane = threadIdx.x % WARP_SIZE;
    const int warp = threadIdx.x / WARP_SIZE;
    if (lane == 0) { best_v[warp] = bv; best_i[warp] = bi; }
    __syncthreads();
    if (warp != 0) return;
    const int n_warps = blockDim.x / WARP_SIZE;
    bv = lane < n_warps ? best_v[lane] : 0.0f;
    bi = lane < n_warps ? best_i[lane] : ARGMAX_NONE;
#pragma unroll
    for (int offset = WARP_SIZE / 2; offset > 0; offset >>= 1) {
        const float ov = __shfl_xor_sync(FULL_MASK, bv, offset);
        const u32 oi = __shfl_xor_sync(FULL_MASK, bi, offset);
        if (argmax_better(ov, oi, bv, bi)) { bv = ov; bi = oi; }
    }
    if (lane != 0) return;
    if (bi != ARGMAX_NONE) atomicMax(best_key, value_index_key(bv == 0.0f ? 0.0f : bv, bi));  // -0 == +0: one key
    __threadfence();  // this CTA's key is visible before it counts itself done
    if (atomicAdd(blocks_done, 1u) != blocks - 1) return;
    // Last CTA: every other CTA's atomicMax happened before its atomicAdd.
    const unsigned long long key = atomicExch(best_key, 0ull);
    *out = key == 0ull ? ARGMAX_NONE : value_index_key_index(key);
    atomicExch(blocks_done, 0u);
}

extern "C" __global__ void argmax_multi_block(const float* __restrict__ x, u32 n,
                                              u32* __restrict__ out) {
    griddep_wait();
    griddep_launch_dependents();
    argmax_fold(x, n, blockIdx.x, gridDim.x, &argmax_best_key, &argmax_blocks_done, out);
}

// The argmax of each of gridDim.y rows of x (row r: x[r * n, +n) -> out[r]), gridDim.x CTAs per
// row: a batch's greedy picks in one launch. keys[r] and done[r] are zero before the launch and
// the row's last CTA puts them back to zero, as the single-row kernel does with its globals.
extern "C" __global__ void argmax_rows(const float* __restrict__ x, u32 n, u32* __restrict__ out,
                                       unsigned long long* __restrict__ keys, u32* __restrict__ done) {
    griddep_wait();
    griddep_launch_dependents();
    const u32 row = blockIdx.y;
    argmax_fold(x + (unsigned long long)row * n, n, blockIdx.x, gridDim.x, keys + row, done + row, out + row);
}

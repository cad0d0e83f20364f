// Index of the largest value of x[0, n): ties -> lowest index, NaN never wins. One CTA does the
// whole vector (151669 logits are ~600 KB: a few microseconds for one SM, and no scratch
// buffer or second launch). Writes ARGMAX_NONE when every value is NaN (or n == 0).
#define ARGMAX_NONE 0xffffffffu

// True when candidate (va, ia) should replace (vb, ib).
__device__ __forceinline__ bool argmax_better(float va, u32 ia, float vb, u32 ib) {
    if (ia == ARGMAX_NONE) return false;
    if (ib == ARGMAX_NONE) return true;
    return va > vb || (va == vb && ia < ib);
}

extern "C" __global__ void argmax_single_block(const float* __restrict__ x, u32 n,
                                               u32* __restrict__ out) {
    __shared__ float best_v[WARP_SIZE];
    __shared__ u32 best_i[WARP_SIZE];
    float bv = 0.0f;
    u32 bi = ARGMAX_NONE;
    // Each thread scans increasing indices, so a strict > keeps its lowest index on ties.
    for (u32 i = threadIdx.x; i < n; i += blockDim.x) {
        const float v = x[i];
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
    if (warp == 0) {
        const int n_warps = blockDim.x / WARP_SIZE;
        bv = lane < n_warps ? best_v[lane] : 0.0f;
        bi = lane < n_warps ? best_i[lane] : ARGMAX_NONE;
#pragma unroll
        for (int offset = WARP_SIZE / 2; offset > 0; offset >>= 1) {
            const float ov = __shfl_xor_sync(FULL_MASK, bv, offset);
            const u32 oi = __shfl_xor_sync(FULL_MASK, bi, offset);
            if (argmax_better(ov, oi, bv, bi)) { bv = ov; bi = oi; }
        }
        if (lane == 0) *out = bi;
    }
}

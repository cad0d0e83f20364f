// Shared definitions for every bonsai kernel. Concatenated first into the single module.
// No CUDA headers are included: NVRTC ships none, and the kernels need only builtins.
typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned long long u64;
typedef unsigned char u8;

// Threads per warp; every reduction below assumes full warps.
#define WARP_SIZE 32
#define FULL_MASK 0xffffffffu

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int offset = WARP_SIZE / 2; offset > 0; offset >>= 1)
        v += __shfl_xor_sync(FULL_MASK, v, offset);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int offset = WARP_SIZE / 2; offset > 0; offset >>= 1)
        v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, offset));
    return v;
}

// Sum (MAX false) or max (MAX true) over a whole CTA (blockDim.x a multiple of 32, at most 1024).
// `scratch` holds 32 floats. Every thread gets the result. Ends with a barrier so `scratch` may be
// reused at once.
template <bool MAX>
__device__ __forceinline__ float block_reduce(float v, float* scratch) {
    const int lane = threadIdx.x % WARP_SIZE;
    const int warp = threadIdx.x / WARP_SIZE;
    const int n_warps = blockDim.x / WARP_SIZE;
    v = MAX ? warp_max(v) : warp_sum(v);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    float t = lane < n_warps ? scratch[lane] : (MAX ? -__int_as_float(0x7f800000) : 0.0f);
    t = MAX ? warp_max(t) : warp_sum(t);
    __syncthreads();
    return t;
}
__device__ __forceinline__ float block_sum(float v, float* scratch) { return block_reduce<false>(v, scratch); }
__device__ __forceinline__ float block_max(float v, float* scratch) { return block_reduce<true>(v, scratch); }

// Sum over the 4 lanes of a quad (lanes 4g .. 4g + 3: the t lanes of an mma fragment's row group).
__device__ __forceinline__ float quad_sum(float v) {
    v += __shfl_xor_sync(FULL_MASK, v, 1);
    v += __shfl_xor_sync(FULL_MASK, v, 2);
    return v;
}

// Sets every element of a register array (accumulators, fragments; any rank) to zero.
__device__ __forceinline__ void zero_fill(float& x) { x = 0.0f; }
__device__ __forceinline__ void zero_fill(u32& x) { x = 0u; }
template <typename T, int N>
__device__ __forceinline__ void zero_fill(T (&a)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) zero_fill(a[i]);
}

// The paged KV cache (ops::KvCache): K and V are pools [blocks][n_kv][KV_BLOCK][hd] of f16 shared
// by the sequences, and a sequence's block table names the pool block of each KV_BLOCK positions.
// Every kernel that reads or writes a cache row addresses it here. KV_BLOCK is ops::KV_BLOCK
// (checked by a unit test); the kernels' key groups (4- and 8-key decode steps, 16-key split
// alignment, 32-key chunks, 64-key tiles) start at multiples of their size and so never straddle
// two blocks.
#define KV_BLOCK 64
// The element offset of the row of position p, kv head g, given the position's pool block.
// The block's part in 64 bits (a pool may pass 2^31 halves), the row within the block in 32 bits
// widened before its multiply: in this form ptxas keeps attention_split_keys_any_group within its
// 96 registers without spilling (other equivalent forms spilled).
__device__ __forceinline__ long long kv_block_row(u32 block, int n_kv, int g, int p, int hd) {
    return (long long)block * n_kv * KV_BLOCK * hd + (long long)(g * KV_BLOCK + p % KV_BLOCK) * hd;
}
// The element offset of the row of position p, kv head g, through the block table.
__device__ __forceinline__ long long kv_row(const u32* __restrict__ block_table, int n_kv, int g, int p, int hd) {
    return kv_block_row(block_table[p / KV_BLOCK], n_kv, g, p, hd);
}

// Per-head RMSNorm + NeoX RoPE of one rotating pair (a = h[d], b = h[d + hd/2]), shared by
// qk_norm_rope.cu and the qkv GEMV's rope epilogue (matmul_gemv_b1.cu), which must agree bit for
// bit: every product and sum is spelled out (no contraction left to the compiler's choice).
// The pair's contribution to the head's sum of squares.
__device__ __forceinline__ float qk_pair_sq(float a, float b) { return __fmaf_rn(b, b, __fmul_rn(a, a)); }
// 1 / rms of a head of hd values from its sum of squares.
__device__ __forceinline__ float qk_inv_rms(float ss, int hd, float eps) {
    return rsqrtf(__fadd_rn(__fdiv_rn(ss, (float)hd), eps));
}
// The normalised, rotated pair: inv = 1 / rms of the head, (wa, wb) the norm weights of d and
// d + hd/2, (c, s) cos and sin of the pair's angle at this position.
__device__ __forceinline__ void qk_rope_pair(float a, float b, float inv, float wa, float wb, float c, float s,
                                             float* out_a, float* out_b) {
    const float x1 = __fmul_rn(__fmul_rn(a, inv), wa);
    const float x2 = __fmul_rn(__fmul_rn(b, inv), wb);
    *out_a = __fmaf_rn(x1, c, -__fmul_rn(x2, s));
    *out_b = __fmaf_rn(x2, c, __fmul_rn(x1, s));
}

// 1 / (1 + e^-x) through e = expf(-|x|) (never overflows), with IEEE division: the form of the
// CPU ops (ops/gated_delta/cpu.rs sigmoid_f32), so a large negative x gives a tiny value, not 0/inf.
__device__ __forceinline__ float sigmoid_stable(float x) {
    const float e = expf(-fabsf(x));
    return __fdiv_rn(x >= 0.0f ? 1.0f : e, 1.0f + e);
}

// Negative infinity without headers.
__device__ __forceinline__ float neg_inf() { return -__int_as_float(0x7f800000); }

// silu(g) * u. expf (max 2 ulp over the whole range) rather than __expf, whose error grows with |g|.
__device__ __forceinline__ float silu_mul(float g, float u) {
    return g / (1.0f + expf(-g)) * u;
}

// A 64-bit key whose unsigned order is (value in f32 total order, so -0 < +0) descending-friendly:
// high word = the value's bits mapped to an order-preserving unsigned, low word = ~index, so the
// larger key is the larger value and, on ties, the lower index. Never 0 for index != 0xffffffff,
// so 0 can mean "no candidate". `value_index_key_value` / `_index` invert it.
__device__ __forceinline__ unsigned long long value_index_key(float v, u32 index) {
    const u32 b = __float_as_uint(v);
    const u32 ord = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
    return ((unsigned long long)ord << 32) | (unsigned long long)(~index);
}
__device__ __forceinline__ float value_index_key_value(unsigned long long key) {
    const u32 ord = (u32)(key >> 32);
    return __uint_as_float((ord & 0x80000000u) ? (ord & 0x7fffffffu) : ~ord);
}
__device__ __forceinline__ u32 value_index_key_index(unsigned long long key) { return ~(u32)(key & 0xffffffffull); }

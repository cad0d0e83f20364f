// One decode token for each of n sequences of a batch, each at its own position and with its own
// block table into the layers' shared KV pools (the paged cache, prelude.cuh): the batched twins of qk_norm_rope_kv_write, attention_decode_g*_hd* (`_seqs`) and
// position_advance. A batch's decode step launches each of them once per layer instead of once
// per sequence, and a captured graph serves any set of sequences (it reads them from the table).
//
// The sequence table (u64 words, which the host rewrites only when the batch's sequences change):
//   words [3i, 3i + 2]: sequence i's row in the batch's buffers (qkv, attention output), the
//     device address of its position (one u32: the new token's position) and that of its block
//     table (u32 pool block per KV_BLOCK positions, covering max_seq; one table for every layer);
//   then per layer l, words [3n + 2l, +1]: the device addresses of layer l's K and V pools
//     ([blocks][n_kv][KV_BLOCK][hd] f16 each, shared by every sequence; one max_seq for all).
// Kernels take `seqs` (the table) and, where they touch a cache, `layer_kv` (the table's layer l
// words). Sequence i is blockIdx.z for attention, blockIdx.x for the rope and the KV write.
//
// Speed of light on the H200, Bonsai-8B geometry, B sequences at context L: the attention reads
// each sequence's cache once, 4 KiB per cached token per layer (B = 64, L = 576: 151 MB per
// layer, 31 us at 4.8 TB/s; the block tables add 4 bytes per 64 tokens per CTA, L2 hits);
// qk_norm_rope + KV write move ~40 KB per sequence per layer (B = 64: 0.5 us); both otherwise
// latency-bound (one launch each per layer).

#define DECODE_SEQ_WORDS 3
__device__ __forceinline__ u32 decode_seq_row(const u64* __restrict__ seqs, int i) {
    return (u32)seqs[DECODE_SEQ_WORDS * i];
}
__device__ __forceinline__ u32* decode_seq_pos(const u64* __restrict__ seqs, int i) {
    return reinterpret_cast<u32*>(seqs[DECODE_SEQ_WORDS * i + 1]);
}
__device__ __forceinline__ const u32* decode_seq_block_table(const u64* __restrict__ seqs, int i) {
    return reinterpret_cast<const u32*>(seqs[DECODE_SEQ_WORDS * i + 2]);
}

// grid (n, n_q + 2 n_kv): sequence blockIdx.x's row through qk_norm_rope_kv_write's math.
extern "C" __global__ void qk_norm_rope_kv_write_seqs(float* __restrict__ qkv, int n_q, int n_kv, int hd, int rot,
                                                      const float* __restrict__ q_norm,
                                                      const float* __restrict__ k_norm, float eps,
                                                      const float* __restrict__ cos_table,
                                                      const float* __restrict__ sin_table, int max_pos,
                                                      const u64* __restrict__ seqs,
                                                      const u64* __restrict__ layer_kv, int max_seq) {
    griddep_wait();
    griddep_launch_dependents();
    __shared__ float scratch[WARP_SIZE];
    const int i = blockIdx.x;
    float* row = qkv + (long long)decode_seq_row(seqs, i) * (n_q + 2 * n_kv) * hd;
    u16* k_pool = reinterpret_cast<u16*>(layer_kv[0]);
    u16* v_pool = reinterpret_cast<u16*>(layer_kv[1]);
    qk_norm_rope_kv_write_token(row, n_q, n_kv, hd, rot, q_norm, k_norm, eps, cos_table, sin_table, max_pos,
                                *decode_seq_pos(seqs, i), max_seq, decode_seq_block_table(seqs, i), k_pool, v_pool,
                                scratch);
}

// grid (n_kv, n_splits, n) of 2, 4 or 8 warps (the launcher's choice: all of a batch's CTAs, n x
// n_kv x n_splits, resident at once where they fit in one wave of 8 warps an SM; 512 CTAs of a
// 64-sequence step at n_kv 8 run as one wave of 2-warp CTAs, not four of 8-warp ones, since at
// short contexts each CTA is a chain of latencies): sequence blockIdx.z's decode attention, with
// its own n_q * n_splits partials and n_kv counters (the single-sequence kernel's layout, one
// block of each per sequence). PLANES: also its output row's gemv_b1 planes, at that row's groups
// of planes of the batch's rows (row r's at group r * out_row_len / 128; att_dec_write_planes).
template <int G, int HD, bool PLANES>
__device__ __forceinline__ void attention_decode_seqs_body(const float* __restrict__ qkv, int qkv_row_len,
                                                           int out_row_len, const u64* __restrict__ seqs,
                                                           const u64* __restrict__ layer_kv, int max_seq,
                                                           float* __restrict__ partial, int n_splits,
                                                           int min_split_keys, u32* __restrict__ counters,
                                                           float* __restrict__ out, u32* __restrict__ planes,
                                                           u32* __restrict__ gsx, float* __restrict__ group_sq) {
    const int i = blockIdx.z;
    const long long row = decode_seq_row(seqs, i);
    const int n_kv = gridDim.x;  // a column per kv head
    const long long row_groups = row * (out_row_len / GROUP_SIZE);
    attention_decode_body<G, HD, PLANES, ATT_DEC_WARPS, 1, true>(
        qkv + row * qkv_row_len, decode_seq_pos(seqs, i), max_seq, n_kv, decode_seq_block_table(seqs, i),
        reinterpret_cast<const u16*>(layer_kv[0]), reinterpret_cast<const u16*>(layer_kv[1]),
        partial + (long long)i * n_kv * G * n_splits * (HD + 2), n_splits, min_split_keys,
        counters + (long long)i * n_kv, out + row * out_row_len,
        PLANES ? planes + row_groups * B1_GROUP_WORDS : nullptr, PLANES ? gsx + 2 * row_groups : nullptr,
        PLANES ? group_sq + row_groups : nullptr);
}

#define ATT_DEC_SEQS_PARAMS                                                                                 \
    const float *__restrict__ qkv, int qkv_row_len, int out_row_len, const u64 *__restrict__ seqs,          \
        const u64 *__restrict__ layer_kv, int max_seq, float *__restrict__ partial, int n_splits,           \
        int min_split_keys, u32 *__restrict__ counters, float *__restrict__ out
#define ATT_DEC_SEQS_ARGS \
    qkv, qkv_row_len, out_row_len, seqs, layer_kv, max_seq, partial, n_splits, min_split_keys, counters, out
#define ATT_DEC_SEQS_ENTRY_POINT(G, HD)                                                                           \
    extern "C" __global__ void __launch_bounds__(ATT_DEC_WARPS * WARP_SIZE)                                       \
        attention_decode_g##G##_hd##HD##_seqs(ATT_DEC_SEQS_PARAMS) {                                              \
        /* griddep_wait: in attention_decode_body, after pos0 and the older cache rows. */                        \
        attention_decode_seqs_body<G, HD, false>(ATT_DEC_SEQS_ARGS, nullptr, nullptr, nullptr);                   \
    }
// The groups and head_dims of the single-sequence decode kernel.
ATT_DEC_SEQS_ENTRY_POINT(1, 64)
ATT_DEC_SEQS_ENTRY_POINT(2, 64)
ATT_DEC_SEQS_ENTRY_POINT(3, 64)
ATT_DEC_SEQS_ENTRY_POINT(4, 64)
ATT_DEC_SEQS_ENTRY_POINT(5, 64)
ATT_DEC_SEQS_ENTRY_POINT(6, 64)
ATT_DEC_SEQS_ENTRY_POINT(7, 64)
ATT_DEC_SEQS_ENTRY_POINT(8, 64)
ATT_DEC_SEQS_ENTRY_POINT(1, 128)
ATT_DEC_SEQS_ENTRY_POINT(2, 128)
ATT_DEC_SEQS_ENTRY_POINT(3, 128)
ATT_DEC_SEQS_ENTRY_POINT(4, 128)
ATT_DEC_SEQS_ENTRY_POINT(5, 128)
ATT_DEC_SEQS_ENTRY_POINT(6, 128)
ATT_DEC_SEQS_ENTRY_POINT(7, 128)
ATT_DEC_SEQS_ENTRY_POINT(8, 128)
ATT_DEC_SEQS_ENTRY_POINT(1, 256)
ATT_DEC_SEQS_ENTRY_POINT(2, 256)
ATT_DEC_SEQS_ENTRY_POINT(6, 256)

// With the outputs' planes (the output projection's x in a batched plan): the groups of the
// single-sequence `_planes` kernel, head_dim 128 (whole 128-groups per head).
#define ATT_DEC_SEQS_PLANES_PARAMS \
    ATT_DEC_SEQS_PARAMS, u32 *__restrict__ planes, u32 *__restrict__ gsx, float *__restrict__ group_sq
extern "C" __global__ void __launch_bounds__(ATT_DEC_WARPS * WARP_SIZE)
    attention_decode_g1_hd128_seqs_planes(ATT_DEC_SEQS_PLANES_PARAMS) {
    attention_decode_seqs_body<1, 128, true>(ATT_DEC_SEQS_ARGS, planes, gsx, group_sq);
}
extern "C" __global__ void __launch_bounds__(ATT_DEC_WARPS * WARP_SIZE)
    attention_decode_g2_hd128_seqs_planes(ATT_DEC_SEQS_PLANES_PARAMS) {
    attention_decode_seqs_body<2, 128, true>(ATT_DEC_SEQS_ARGS, planes, gsx, group_sq);
}
extern "C" __global__ void __launch_bounds__(ATT_DEC_WARPS * WARP_SIZE)
    attention_decode_g4_hd128_seqs_planes(ATT_DEC_SEQS_PLANES_PARAMS) {
    attention_decode_seqs_body<4, 128, true>(ATT_DEC_SEQS_ARGS, planes, gsx, group_sq);
}
extern "C" __global__ void __launch_bounds__(ATT_DEC_WARPS * WARP_SIZE)
    attention_decode_g8_hd128_seqs_planes(ATT_DEC_SEQS_PLANES_PARAMS) {
    attention_decode_seqs_body<8, 128, true>(ATT_DEC_SEQS_ARGS, planes, gsx, group_sq);
}

// Every sequence's position moves on by one (its token is now in the cache): thread i takes
// sequence i of n.
extern "C" __global__ void position_advance_seqs(const u64* __restrict__ seqs, int n) {
    griddep_wait();
    griddep_launch_dependents();
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) *decode_seq_pos(seqs, i) += 1u;
}

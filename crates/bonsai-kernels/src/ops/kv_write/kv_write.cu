// Token i's k and v heads -> f16 cache rows at position pos[0] + i (round to nearest even).
// The paged cache (prelude.cuh, kv_row): pools [blocks][n_kv][KV_BLOCK][hd], the position's block
// from the sequence's block table. grid (m, n_kv), blockDim.x threads stride hd.
// A position >= max_seq writes nothing and reads no table entry (attention then reports NaN for
// it, see attention.cu).
extern "C" __global__ void kv_write_head_per_block(const float* __restrict__ qkv, int n_q, int n_kv,
                                                   int hd, const u32* __restrict__ pos0,
                                                   int max_seq, const u32* __restrict__ block_table,
                                                   u16* __restrict__ k_cache, u16* __restrict__ v_cache) {
    griddep_wait();
    griddep_launch_dependents();
    const int token = blockIdx.x;
    const int head = blockIdx.y;
    const u32 pos = pos0[0] + (u32)token;
    if (pos >= (u32)max_seq) return;
    const float* row = qkv + (long long)token * (n_q + 2 * n_kv) * hd;
    const float* k = row + (long long)(n_q + head) * hd;
    const float* v = row + (long long)(n_q + n_kv + head) * hd;
    const long long dst = kv_row(block_table, n_kv, head, (int)pos, hd);
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        k_cache[dst + d] = f32_to_f16(k[d]);
        v_cache[dst + d] = f32_to_f16(v[d]);
    }
}

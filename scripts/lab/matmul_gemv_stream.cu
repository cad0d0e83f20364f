// Round-4 production decode GEMV for one token, `gemv_stream`, kept in the lab as the reference
// round 6 (matmul_gemv_tc.cu) is timed against. It reads the HOST (natural) weight layout of
// crates/bonsai-kernels/src/weights.rs, so the lab uploads natural words for it.
// Why this shape (measured in scripts/lab, notes in docs/kernel-notes.md): the older
// `gemv_rows8_split_k` issued ~4 instructions per weight at 0.45 IPC with ~8-16 KB of weights in
// flight per SM, x loads hitting 32 L1 lines per instruction, so it reached ~10-20% of the copy
// bandwidth. Here every warp owns R output rows (SwiGLU: R/2 gate rows and their R/2 up rows)
// and streams their K chunks (32 words per row) through a private D-stage shared-memory ring
// filled by cp.async (16-byte pieces of bits, 4-byte pieces of f16 scales), so (D-1) x R x 144 B
// per warp are in flight without registers; `splits` warps share a row set, each taking every
// splits-th chunk. x and the sums of x per payload word are staged once per CTA in shared memory;
// lane l reads the float4s of its word in the rotated order (q + rot(l)) % F, which puts the 8
// lanes of each quarter-warp on 8 different bank quads, and rotates the word by the same amount
// so bit j still pairs with xv[j]. The inner loop is the same predicated-add word dot as
// `gemv_rows8_split_k` (signed_word_dot), accumulated in f32.
//
// Requirements (the launcher checks them and otherwise uses gemv_rows8_split_k): K % 256 == 0
// (4-byte aligned scale pieces), payload 16-byte and scales 4-byte aligned, x 16-byte aligned.
// Dynamic shared memory layout (bytes, see `stream_smem_bytes` in cuda.rs):
//   x [K] f32 | word sums [K / WPW] f32 | partials [pad4(warps * R)] f32 |
//   bit ring [warps][D][R][32] u32 | scale ring [warps][D][R][32 / WPG] u16

// Largest CTA the launcher uses (warps x 32).
#define STREAM_MAX_THREADS 512
// Words of one row in one K chunk: one per lane.
#define STREAM_CHUNK_WORDS 32

template <int BITS, int MODE, int R, int D>
__device__ __forceinline__ void gemv_stream(const u16* __restrict__ scales,
                                            const u32* __restrict__ payload,
                                            const float* __restrict__ x, float* __restrict__ y,
                                            int n_out, int k, int splits) {
    constexpr int WPW = 32 / BITS;                            // weights per word
    constexpr int WPG = GROUP_SIZE / WPW;                     // words per group
    constexpr int F = WPW / 4;                                // float4 of x per word
    constexpr int SPC = STREAM_CHUNK_WORDS / WPG;             // scales per row and chunk
    constexpr int PIECES = R * STREAM_CHUNK_WORDS * 4 / 16;   // 16-byte bit pieces per stage
    constexpr int SPIECES = R * SPC / 2;                      // 4-byte scale pieces per stage
    constexpr int HALF = R / 2;
    extern __shared__ float4 stream_smem[];
    const int words_per_row = k / WPW;
    const int groups_per_row = k / GROUP_SIZE;
    const int lane = threadIdx.x % WARP_SIZE;
    const int warp = threadIdx.x / WARP_SIZE;
    const int warps = blockDim.x / WARP_SIZE;
    float4* xs = stream_smem;
    float* xsum = reinterpret_cast<float*>(stream_smem + k / 4);
    float* partial = xsum + words_per_row;                    // warps * R, padded to 4
    u32* ring = reinterpret_cast<u32*>(partial + ((warps * R + 3) & ~3)) +
                warp * D * R * STREAM_CHUNK_WORDS;
    u16* sring = reinterpret_cast<u16*>(reinterpret_cast<u32*>(partial + ((warps * R + 3) & ~3)) +
                                        warps * D * R * STREAM_CHUNK_WORDS) +
                 warp * D * R * SPC;

    const int split = warp % splits;
    const int batches_per_cta = warps / splits;
    const int batch = blockIdx.x * batches_per_cta + warp / splits;
    const int n_chunks = (words_per_row + STREAM_CHUNK_WORDS - 1) / STREAM_CHUNK_WORDS;
    const int my_chunks = split < n_chunks ? (n_chunks - split + splits - 1) / splits : 0;

    // Local row r -> output index and weight row (SwiGLU: r < R/2 gate, else the matching up).
    auto out_index = [&](int r) { return MODE == MATMUL_SWIGLU ? batch * HALF + r % HALF : batch * R + r; };
    auto weight_row = [&](int r) {
        const int o = min(out_index(r), n_out - 1);  // rows past the end re-read the last one
        return MODE == MATMUL_SWIGLU && r >= HALF ? n_out + o : o;
    };

    auto issue = [&](int i) {
        if (i < my_chunks) {
            const int c = split + i * splits;
            const int slot = i % D;
#pragma unroll
            for (int p0 = 0; p0 < PIECES; p0 += WARP_SIZE) {
                const int p = p0 + lane;
                const int r = p / (STREAM_CHUNK_WORDS / 4);
                const int w4 = (p % (STREAM_CHUNK_WORDS / 4)) * 4;
                const int wi = c * STREAM_CHUNK_WORDS + w4;
                if (p < PIECES && wi < words_per_row)
                    cp_async16(ring + (slot * R + r) * STREAM_CHUNK_WORDS + w4,
                               payload + (long long)weight_row(r) * words_per_row + wi);
            }
            if (lane < SPIECES) {
                const int r = lane / (SPC / 2);
                const int s2 = (lane % (SPC / 2)) * 2;
                const int g = c * SPC + s2;
                if (g < groups_per_row)
                    cp_async4(sring + (slot * R + r) * SPC + s2,
                              scales + (long long)weight_row(r) * groups_per_row + g);
            }
        }
        cp_async_commit();  // always: keeps one group per step for wait_group
    };

#pragma unroll
    for (int i = 0; i < D - 1; ++i) issue(i);

    // Stage x and the sums of x per word (rotated reads: conflict-free, see lean).
    const int rot = (lane / (8 / F)) % F;
    for (int i = threadIdx.x; i < k / 4; i += blockDim.x) xs[i] = __ldg(reinterpret_cast<const float4*>(x) + i);
    __syncthreads();
    for (int i = threadIdx.x; i < words_per_row; i += blockDim.x) {
        float s = 0.0f;
#pragma unroll
        for (int q = 0; q < F; ++q) {
            const float4 v = xs[i * F + (q + rot) % F];
            s += (v.x + v.y) + (v.z + v.w);
        }
        xsum[i] = s;
    }
    __syncthreads();

    float acc[R];
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = 0.0f;
    for (int i = 0; i < my_chunks; ++i) {
        issue(i + D - 1);
        cp_async_wait<D - 1>();
        __syncwarp();
        const int slot = i % D;
        const int wi = (split + i * splits) * STREAM_CHUNK_WORDS + lane;
        if (wi < words_per_row) {
            float xv[WPW];
#pragma unroll
            for (int q = 0; q < F; ++q) {
                const float4 v = xs[wi * F + (q + rot) % F];
                xv[4 * q] = v.x; xv[4 * q + 1] = v.y; xv[4 * q + 2] = v.z; xv[4 * q + 3] = v.w;
            }
            const float xsw = xsum[wi];
#pragma unroll
            for (int r = 0; r < R; ++r) {
                const u32 w = ring[(slot * R + r) * STREAM_CHUNK_WORDS + lane];
                const float d = f16_to_f32(sring[(slot * R + r) * SPC + lane / WPG]);
                acc[r] += d * signed_word_dot<BITS>(__funnelshift_r(w, w, 4 * BITS * rot), xv, xsw);
            }
        }
        __syncwarp();  // the slot is refilled by the next step's issue
    }
    cp_async_wait<0>();

#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = warp_sum(acc[r]);
    if (splits > 1) {
        if (lane == 0) {
#pragma unroll
            for (int r = 0; r < R; ++r) partial[warp * R + r] = acc[r];
        }
        __syncthreads();
        if (split != 0) return;
        // Warp `split 0` of each batch sums its batch's partials (same order for every row).
#pragma unroll
        for (int r = 0; r < R; ++r) {
            float v = 0.0f;
            for (int s = 0; s < splits; ++s) v += partial[(warp + s) * R + r];
            acc[r] = v;
        }
    }
    if (lane != 0) return;
    const int n_local = MODE == MATMUL_SWIGLU ? HALF : R;
#pragma unroll
    for (int r = 0; r < n_local; ++r) {
        const int o = out_index(r);
        if (o >= n_out) continue;
        if (MODE == MATMUL_SWIGLU) y[o] = silu_mul(acc[r], acc[r + HALF]);
        else if (MODE == MATMUL_ADD) y[o] += acc[r];
        else y[o] = acc[r];
    }
}

// The Gated DeltaNet of one sequence in the chunked form (ops/gated_delta/mod.rs, reference/bonsai2.md
// §3.6 step 7), chunks of GDC_CHUNK rows, tiled V heads. Three kernels and a scratch buffer the
// caller owns; per (V head h, chunk c) the scratch holds, rows padded to GDC_CHUNK, d columns:
//   W = T(β⊙e^γ⊙K) [64][d] | QE = q̂⊙e^γ [64][d] | U = T(β⊙V) [64][d], overwritten by V' |
//   KT = k̂⊙e^{γ_last−γ} [64][d] | Pᵀ [64][64] (P = (q̂k̂ᵀ)⊙D, stored transposed: read by column) |
//   e^{γ_last} and padding [64] | S_start [d][d] (the state the chunk starts from), padded to 4
//
// gated_delta_chunk_prepare: grid (chunks, v_heads), GDC_PREP_THREADS threads. Everything that
// does not depend on the state, all chunks and heads at once: q̂, k̂ (HF's l2norm), the gates, γ =
// cumsum(g) in f64 (its differences feed expf, so no rounding of a long prefix sum is amplified
// by large |γ|), A = strict_lower((β⊙K)Kᵀ⊙D) and P, then the unit lower triangular solve
// (I + A)·[U | W] = [β⊙V | β⊙e^γ⊙K] by forward substitution, one column per thread in registers
// (column-oriented: the same operations per row as the row-oriented loop, without its chain).
//
// gated_delta_chunk_state: grid (ceil(d / 32), v_heads), GDC_STATE_THREADS threads. CTA (b, h)
// owns value columns j = 32b + lane of V head h and keeps S[:, j] in shared memory across the
// chunks, which it walks in order, doing only what the next chunk depends on:
//   S_start = S (stored);  V' = U − W·S (stored over U);  S = e^{γ_last}·S + KTᵀ·V'
// gated_delta_chunk_out: grid (chunks, ceil(d / 32), v_heads), all chunks at once:
//   O = QE·S_start + P·V'
// No kernel synchronises with the host; the launcher runs them only when rows is large.

#define GDC_CHUNK 64
#define GDC_COLS 32
#define GDC_PREP_THREADS 256
#define GDC_STATE_THREADS 256
#define GDC_OUT_THREADS 256
// Row stride of Aᵀ in shared memory: a multiple of 4, so the solve reads A's columns as float4.
#define GDC_AM_LD 68

// Floats of one (V head, chunk) block of the scratch.
// S_start follows the decay's padding; d² rounded up to 4 keeps every block 16-byte aligned.
__device__ __forceinline__ long long gdc_s_start_at(int d) { return 4LL * GDC_CHUNK * d + GDC_CHUNK * GDC_CHUNK + GDC_CHUNK; }
__device__ __forceinline__ long long gdc_block_len(int d) { return gdc_s_start_at(d) + (((long long)d * d + 3) & ~3LL); }

// ln(1 + e^x) without overflow (the CPU version's form).
__device__ __forceinline__ float gdc_softplus(float x) { return fmaxf(x, 0.0f) + log1pf(expf(-fabsf(x))); }

// The chunked form's products on the tensor cores (the prepare's Gram products, the state pass's
// two, the outputs'), 3xTF32 (ops/gemm_f32/tile_3xtf32.cu's split:
// each product a·b as a_small·b_big + a_big·b_small + a_big·b_big, mma.sync m16n8k8, partials of
// GDC_TC_FOLD k8 steps folded into f32 accumulators by a round-to-nearest add). Its error per
// output, (F + 12·FOLD + 13)·u·Σ|a·b| with F = the folds (ops/gemm_f32/mod.rs), is within the
// f32 fmaf chain's γ_K·Σ|a·b| from K = 42 on: the Gram products and W·S have K = d (45u against
// 128u at Bonsai 2's d = 128), KTᵀ·V' K = 64 (41u against 65u), the outputs d + 64. bound.rs
// (`tensor_dot`) takes the larger of the two, so small test heads stay covered.
#define GDC_TC_FOLD 2
// Row strides (floats) of the state pass's shared tiles, chosen so that a fragment's 32 loads hit
// 32 banks: S and V' (B operands, element (k, n) at k·40 + n: 8t + g), W (A, row-major: 4g + t
// at a stride of 4 mod 32), KT (A transposed: element (k, m) at k·(ds + 8) + m: 8t + g).
#define GDC_S_LD (GDC_COLS + 8)
#define GDC_W_PAD 4
#define GDC_KT_PAD 8

// One k8 step of 3xTF32 into `part` (16 x 8, C layout) for A fragment values a[4] and B b[2].
__device__ __forceinline__ void gdc_mma_3xtf32(float (&part)[4], const float (&a)[4], const float (&b)[2]) {
    u32 ab[4], as[4], bb0, bs0, bb1, bs1;
#pragma unroll
    for (int e = 0; e < 4; ++e) tf32x3_split(__float_as_uint(a[e]), ab[e], as[e]);
    tf32x3_split(__float_as_uint(b[0]), bb0, bs0);
    tf32x3_split(__float_as_uint(b[1]), bb1, bs1);
    // Small terms first, as tile_3xtf32 sums them.
    mma_tf32_16x8x8(part, as, bb0, bb1);
    mma_tf32_16x8x8(part, ab, bs0, bs1);
    mma_tf32_16x8x8(part, ab, bb0, bb1);
}

// acc[q] (16 x 8, C layout) += A·B_q over k < k_end (a multiple of 8·GDC_TC_FOLD) in partials of
// GDC_TC_FOLD k8 steps, each folded into acc by an f32 add: load_a(k, a) gives the A fragment of
// k8 step k (rows g, g + 8 at columns k + t, k + t + 4), load_b(k, q, b) B_q's (rows k + t, k + t +
// 4 at column g).
template <int Q, class LoadA, class LoadB>
__device__ __forceinline__ void gdc_tc_accumulate(float (&acc)[Q][4], int k_end, LoadA load_a, LoadB load_b) {
    for (int k0 = 0; k0 < k_end; k0 += 8 * GDC_TC_FOLD) {
        float part[Q][4] = {};
#pragma unroll
        for (int f = 0; f < GDC_TC_FOLD; ++f) {
            const int k = k0 + 8 * f;
            float a[4];
            load_a(k, a);
#pragma unroll
            for (int q = 0; q < Q; ++q) {
                float b[2];
                load_b(k, q, b);
                gdc_mma_3xtf32(part[q], a, b);
            }
        }
#pragma unroll
        for (int q = 0; q < Q; ++q)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[q][e] += part[q][e];
    }
}

// Shared memory: γ (f64), β, g, e^γ, e^{γ_last − γ}, A [64][GDC_AM_LD], k̂ and q̂ rows at stride
// ld = d16 + 4, d16 = d rounded up to 16 (whole pairs of k8 steps), columns d..d16−1 zero (when d
// is a multiple of 32, as Bonsai 2's 128, ld is 4 mod 32 floats: a fragment's 8 rows x 4 columns
// hit 32 banks); once the Gram products are done the q̂ tile holds the chunk's V rows at stride d.
// Global reads are issued all at once (cp.async) rather than row by row, so each costs one
// latency, not one per row.
extern "C" __global__ void __launch_bounds__(GDC_PREP_THREADS, 2)
    gated_delta_chunk_prepare(const float* __restrict__ conv_out, const float* __restrict__ alpha,
                              const float* __restrict__ beta, const float* __restrict__ ssm_a,
                              const float* __restrict__ dt_bias, float* __restrict__ scratch, int rows, int k_heads,
                              int v_heads, int d, float q_scale, float l2_eps) {
    griddep_wait();
    griddep_launch_dependents();
    extern __shared__ double gdc_prep_smem[];
    double* gam = gdc_prep_smem;                    // [64]
    float* bet = (float*)(gam + GDC_CHUNK);         // [64]
    float* gate = bet + GDC_CHUNK;                  // [64]
    float* egam = gate + GDC_CHUNK;                 // [64] e^γ
    float* egl = egam + GDC_CHUNK;                  // [64] e^{γ_last − γ}
    float* am = egl + GDC_CHUNK;                    // [64][GDC_AM_LD]
    const int d16 = (d + 15) & ~15, ld = d16 + 4;
    float* ks = am + GDC_CHUNK * GDC_AM_LD;         // [64][ld]
    float* qs = ks + GDC_CHUNK * ld;                // [64][ld], later V [64][d]
    const int c = blockIdx.x, h = blockIdx.y, kh = h % k_heads;
    const int t0 = c * GDC_CHUNK, n = min(GDC_CHUNK, rows - t0);
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE, warps = blockDim.x / WARP_SIZE;
    const long long row_len = (long long)(2 * k_heads + v_heads) * d;
    const float* rows_in = conv_out + (long long)t0 * row_len;
    float* blk = scratch + ((long long)h * gridDim.x + c) * gdc_block_len(d);
    float* w_out = blk;
    float* qe_out = blk + GDC_CHUNK * d;
    float* u_out = blk + 2 * GDC_CHUNK * d;
    float* kt_out = blk + 3 * GDC_CHUNK * d;
    float* p_out = blk + 4 * GDC_CHUNK * d;
    float* decay_out = p_out + GDC_CHUNK * GDC_CHUNK;

    // The chunk's q and k rows: 16-byte pieces when d is a multiple of 4 (every row start aligned).
    // A warp per row, lanes along it (no division by the run-time d: the kernel's phases are
    // latency chains).
    for (int r = warp; r < n; r += warps) {
        const float* row = rows_in + r * row_len;
        if ((d & 3) == 0) {
            for (int i = 4 * lane; i < d; i += 4 * WARP_SIZE) {
                cp_async16(qs + r * ld + i, row + kh * d + i);
                cp_async16(ks + r * ld + i, row + (k_heads + kh) * d + i);
            }
        } else {
            for (int i = lane; i < d; i += WARP_SIZE) {
                cp_async4(qs + r * ld + i, row + kh * d + i);
                cp_async4(ks + r * ld + i, row + (k_heads + kh) * d + i);
            }
        }
    }
    cp_async_commit();
    if (d16 != d)
        for (int r = warp; r < GDC_CHUNK; r += warps)
            for (int i = d + lane; i < d16; i += WARP_SIZE) {
                qs[r * ld + i] = 0.0f;
                ks[r * ld + i] = 0.0f;
            }
    if (threadIdx.x < GDC_CHUNK) {
        const int r = threadIdx.x;
        const long long at = (long long)(t0 + r) * v_heads + h;
        gate[r] = r < n ? ssm_a[h] * gdc_softplus(alpha[at] + dt_bias[h]) : 0.0f;
        bet[r] = r < n ? sigmoid_stable(beta[at]) : 0.0f;
    }
    cp_async_wait<0>();
    __syncthreads();
    if (threadIdx.x == 0) {
        // Padding rows repeat the last γ (their gates are 0), so D and KT stay finite there.
        double cum = 0.0;
        for (int r = 0; r < GDC_CHUNK; ++r) {
            cum += (double)gate[r];
            gam[r] = cum;
        }
    }
    // q̂ = q·rsqrt(Σq² + eps)·q_scale, k̂ = k·rsqrt(Σk² + eps): a warp per row; rows past n are 0.
    for (int r = warp; r < GDC_CHUNK; r += warps) {
        float sq = 0.0f, sk = 0.0f;
        if (r < n) {
            for (int i = lane; i < d; i += WARP_SIZE) {
                const float qv = qs[r * ld + i], kv = ks[r * ld + i];
                sq = fmaf(qv, qv, sq);
                sk = fmaf(kv, kv, sk);
            }
        }
        sq = warp_sum(sq);
        sk = warp_sum(sk);
        const float rq = rsqrtf(sq + l2_eps) * q_scale, rk = rsqrtf(sk + l2_eps);
        for (int i = lane; i < d; i += WARP_SIZE) {
            qs[r * ld + i] = r < n ? qs[r * ld + i] * rq : 0.0f;
            ks[r * ld + i] = r < n ? ks[r * ld + i] * rk : 0.0f;
        }
    }
    __syncthreads();
    const double last = gam[GDC_CHUNK - 1];
    if (threadIdx.x < GDC_CHUNK) {
        egam[threadIdx.x] = expf((float)gam[threadIdx.x]);
        egl[threadIdx.x] = expf((float)(last - gam[threadIdx.x]));
    }
    __syncthreads();

    // QE = q̂⊙e^γ, KT = k̂⊙e^{γ_last − γ}, e^{γ_last}.
    for (int i = warp; i < GDC_CHUNK; i += warps)
        for (int x = lane; x < d; x += WARP_SIZE) {
            qe_out[i * d + x] = qs[i * ld + x] * egam[i];
            kt_out[i * d + x] = ks[i * ld + x] * egl[i];
        }
    if (threadIdx.x == 0) decay_out[0] = egam[GDC_CHUNK - 1];

    // A[i][j] = β_i (k̂_i·k̂_j) e^{γ_i − γ_j} (j < i) and P[i][j] = (q̂_i·k̂_j) e^{γ_i − γ_j} (j <= i),
    // on the tensor cores: the 20 (16-row, 8-column) tiles at or below the diagonal (tile (mt, nt)
    // with nt <= 2mt + 1; those above hold only j > i, where both are 0), warp w taking tiles w,
    // w + 8, w + 16; k̂_j's fragment serves both products. A is stored transposed (Aᵀ[j][i]), as
    // the column-oriented solve reads it.
    {
        const int g = lane / 4, t = lane % 4;
        for (int tile = warp; tile < 20; tile += warps) {
            const int mt = tile < 2 ? 0 : tile < 6 ? 1 : tile < 12 ? 2 : 3;
            const int nt = tile - mt * (mt + 1), i0 = 16 * mt, jrow = 8 * nt + g;
            // Rows i0 + g (+ 8) of k̂ (for A) or q̂ (for P), row jrow of k̂ as B's column.
            auto rows_of = [&](const float* x) {
                return [=](int k, float (&a)[4]) {
                    a[0] = x[(i0 + g) * ld + k + t], a[1] = x[(i0 + g + 8) * ld + k + t];
                    a[2] = x[(i0 + g) * ld + k + t + 4], a[3] = x[(i0 + g + 8) * ld + k + t + 4];
                };
            };
            auto k_column = [&](int k, int, float (&b)[2]) { b[0] = ks[jrow * ld + k + t], b[1] = ks[jrow * ld + k + t + 4]; };
            float acc_a[1][4] = {}, acc_p[1][4] = {};
            gdc_tc_accumulate(acc_a, d16, rows_of(ks), k_column);
            gdc_tc_accumulate(acc_p, d16, rows_of(qs), k_column);
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int i = i0 + g + 8 * (e / 2), j = 8 * nt + 2 * t + e % 2;
                const float dij = (j <= i && i < n) ? expf((float)(gam[i] - gam[j])) : 0.0f;
                am[j * GDC_AM_LD + i] = j < i ? bet[i] * acc_a[0][e] * dij : 0.0f;
                p_out[j * GDC_CHUNK + i] = acc_p[0][e] * dij;
            }
        }
        // The tiles above the diagonal.
        for (int e = threadIdx.x; e < GDC_CHUNK * GDC_CHUNK; e += blockDim.x) {
            const int i = e % GDC_CHUNK, j = e / GDC_CHUNK;
            if ((j >> 3) > 2 * (i >> 4) + 1) {
                am[j * GDC_AM_LD + i] = 0.0f;
                p_out[j * GDC_CHUNK + i] = 0.0f;
            }
        }
    }
    __syncthreads();

    // The chunk's V rows of this head into the q̂ tile (free once the Gram products are done), at
    // stride d: 16-byte pieces when d is a multiple of 4 (rows and the v block then aligned).
    float* vs = qs;
    for (int r = warp; r < n; r += warps) {
        const float* row = rows_in + r * row_len + (long long)(2 * k_heads + h) * d;
        if ((d & 3) == 0) {
            for (int i = 4 * lane; i < d; i += 4 * WARP_SIZE) cp_async16(vs + r * d + i, row + i);
        } else {
            for (int i = lane; i < d; i += WARP_SIZE) cp_async4(vs + r * d + i, row + i);
        }
    }
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();

    // (I + A) X = B by forward substitution, a column of X per thread: columns 0..d−1 solve for
    // U (B = β⊙V), d..2d−1 for W (B = β⊙e^γ⊙K). Each x_i = b_i − Σ_{j<i} A_ij x_j runs in
    // ascending j with fmaf, column-oriented: once x_j is final, every later row takes its term
    // (the same operations in the same order per row as the row-oriented loop, but 64 - j
    // independent fmaf per step instead of one dependent chain of 2016).
    for (int col = threadIdx.x; col < 2 * d; col += blockDim.x) {
        const bool is_u = col < d;
        const int cc = is_u ? col : col - d;
        float x[GDC_CHUNK];
#pragma unroll
        for (int i = 0; i < GDC_CHUNK; ++i) {
            float b = 0.0f;
            if (i < n) b = is_u ? bet[i] * vs[i * d + cc] : bet[i] * egam[i] * ks[i * ld + cc];
            x[i] = b;
        }
#pragma unroll
        for (int j = 0; j < GDC_CHUNK - 1; ++j) {
#pragma unroll
            for (int i = (j + 1) & ~3; i < GDC_CHUNK; i += 4) {
                const float4 a4 = *(const float4*)(am + j * GDC_AM_LD + i);
                if (i > j) x[i] = fmaf(-a4.x, x[j], x[i]);
                if (i + 1 > j) x[i + 1] = fmaf(-a4.y, x[j], x[i + 1]);
                if (i + 2 > j) x[i + 2] = fmaf(-a4.z, x[j], x[i + 2]);
                x[i + 3] = fmaf(-a4.w, x[j], x[i + 3]);
            }
        }
        float* dst = is_u ? u_out : w_out;
#pragma unroll
        for (int i = 0; i < GDC_CHUNK; ++i) dst[i * d + cc] = x[i];
    }
}

// Copies rows x d floats (global rows at stride d, shared rows at stride ld, a multiple of 4) into
// shared memory with cp.async, all of the CTA's threads taking pieces; 16-byte pieces when d is a
// multiple of 4 (every row then starts 16-byte aligned in both), else 4-byte ones. Columns d..ld−1
// are left alone. The caller commits the group.
__device__ __forceinline__ void gdc_copy_rows_async(float* dst, int ld, const float* src, int rows, int d) {
    if ((d & 3) == 0) {
        const int per_row = d / 4;
        for (int e = threadIdx.x; e < rows * per_row; e += blockDim.x) {
            const int r = e / per_row, x = 4 * (e % per_row);
            cp_async16(dst + r * ld + x, src + (long long)r * d + x);
        }
    } else {
        for (int e = threadIdx.x; e < rows * d; e += blockDim.x) cp_async4(dst + (e / d) * ld + e % d, src + e);
    }
}

// Shared memory: S[:, block] [ds][GDC_S_LD] (rows d.. and columns past the head zero), W [64][ds +
// GDC_W_PAD], KT [64][ds + GDC_KT_PAD], V' [64][GDC_S_LD]; ds = d rounded up to 16 (whole k8 steps
// in pairs), the columns d..ds−1 of W and KT zero.
// The chunk's W and KT arrive by cp.async, each into its own buffer as soon as the previous chunk
// is done with it, so their loads overlap the previous chunk's products: W(c + 1) once V'(c) is
// formed, KT(c + 1) once S is updated. Every thread commits exactly one group (possibly empty) at
// each of those two points, so "all but the newest group landed" is W(c) at the chunk's start.
// Per chunk it stores S_start (the state the chunk starts from) and V' (over U) for
// gated_delta_chunk_out.
// Warp w: V' = U − W·S for rows 16(w / 2) .. +15 and columns 16(w % 2) .. +15 (two n8 tiles); the
// update S = e^{γ_last}·S + KTᵀ·V' for rows 16(w + 8i) .. +15 (i >= 0, below ds) and all 32 columns.
extern "C" __global__ void __launch_bounds__(GDC_STATE_THREADS, 2)
    gated_delta_chunk_state(float* __restrict__ scratch, float* __restrict__ state, int rows, int d) {
    griddep_wait();
    griddep_launch_dependents();
    extern __shared__ float gdc_state_smem[];
    const int ds = (d + 15) & ~15, w_ld = ds + GDC_W_PAD, kt_ld = ds + GDC_KT_PAD;
    float* ssh = gdc_state_smem;                   // [ds][GDC_S_LD]
    float* ws = ssh + ds * GDC_S_LD;               // [64][w_ld]
    float* kts = ws + GDC_CHUNK * w_ld;            // [64][kt_ld]
    float* vp = kts + GDC_CHUNK * kt_ld;           // [64][GDC_S_LD]
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE, warps = GDC_STATE_THREADS / WARP_SIZE;
    const int g = lane / 4, t = lane % 4;
    const int h = blockIdx.y, j0 = blockIdx.x * GDC_COLS;
    const int cols = min(GDC_COLS, d - j0);
    const int chunks = (rows + GDC_CHUNK - 1) / GDC_CHUNK;
    const long long blk_len = gdc_block_len(d);
    float* head_blocks = scratch + (long long)h * chunks * blk_len;
    float* S = state + (long long)h * d * d;
    for (int r = warp; r < ds; r += warps)
        ssh[r * GDC_S_LD + lane] = lane < cols && r < d ? S[(long long)r * d + j0 + lane] : 0.0f;
    if (ds != d) {
        for (int r = warp; r < GDC_CHUNK; r += warps)
            for (int x = d + lane; x < ds; x += WARP_SIZE) {
                ws[r * w_ld + x] = 0.0f;
                kts[r * kt_ld + x] = 0.0f;
            }
    }
    // Chunk 0's W and KT, two groups.
    gdc_copy_rows_async(ws, w_ld, head_blocks, GDC_CHUNK, d);
    cp_async_commit();
    gdc_copy_rows_async(kts, kt_ld, head_blocks + 3 * GDC_CHUNK * d, GDC_CHUNK, d);
    cp_async_commit();
    // This warp's V' tile: rows vr0 + g (+ 8), columns vc0 + 8q + 2t (+ 1), q < 2.
    const int vr0 = 16 * (warp / 2), vc0 = 16 * (warp % 2);
    for (int c = 0; c < chunks; ++c) {
        float* blk = head_blocks + c * blk_len;
        const float* next = c + 1 < chunks ? blk + blk_len : nullptr;
        float* u_v = blk + 2 * GDC_CHUNK * d;  // U in, V' out (this CTA's columns only)
        float* s_start = blk + gdc_s_start_at(d);
        const float decay = blk[4 * GDC_CHUNK * d + GDC_CHUNK * GDC_CHUNK];
        // U at this thread's V' elements, read now so their latency hides behind the product.
        float u[2][4];
#pragma unroll
        for (int q = 0; q < 2; ++q)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int row = vr0 + g + 8 * (e / 2), col = vc0 + 8 * q + 2 * t + e % 2;
                u[q][e] = col < cols ? u_v[row * d + j0 + col] : 0.0f;
            }
        cp_async_wait<1>();
        __syncthreads();  // W(c) is in shared memory (and the previous S update is done)
        for (int r = warp; r < d; r += warps)
            if (lane < cols) s_start[(long long)r * d + j0 + lane] = ssh[r * GDC_S_LD + lane];

        // V' = U − W·S.
        float acc[2][4] = {};
        gdc_tc_accumulate(
            acc, ds,
            [&](int k, float (&a)[4]) {
                a[0] = ws[(vr0 + g) * w_ld + k + t], a[1] = ws[(vr0 + g + 8) * w_ld + k + t];
                a[2] = ws[(vr0 + g) * w_ld + k + t + 4], a[3] = ws[(vr0 + g + 8) * w_ld + k + t + 4];
            },
            [&](int k, int q, float (&b)[2]) {
                b[0] = ssh[(k + t) * GDC_S_LD + vc0 + 8 * q + g], b[1] = ssh[(k + t + 4) * GDC_S_LD + vc0 + 8 * q + g];
            });
#pragma unroll
        for (int q = 0; q < 2; ++q)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int row = vr0 + g + 8 * (e / 2), col = vc0 + 8 * q + 2 * t + e % 2;
                const float v = col < cols ? u[q][e] - acc[q][e] : 0.0f;
                vp[row * GDC_S_LD + col] = v;
                if (col < cols) u_v[row * d + j0 + col] = v;
            }
        cp_async_wait<0>();
        __syncthreads();  // V'(c) complete, KT(c) in shared memory; W is free
        if (next) gdc_copy_rows_async(ws, w_ld, next, GDC_CHUNK, d);
        cp_async_commit();

        // S[r][j] = e^{γ_last} S[r][j] + Σ_l KT[l][r] V'[l][j]: the chunk's 64 rows l (a last
        // chunk's rows past its end are zero in KT and V').
        for (int r0 = 16 * warp; r0 < ds; r0 += 16 * warps) {
            float su[4][4] = {};
            // A[r][l] = KT[l][r].
            gdc_tc_accumulate(
                su, GDC_CHUNK,
                [&](int k, float (&a)[4]) {
                    a[0] = kts[(k + t) * kt_ld + r0 + g], a[1] = kts[(k + t) * kt_ld + r0 + g + 8];
                    a[2] = kts[(k + t + 4) * kt_ld + r0 + g], a[3] = kts[(k + t + 4) * kt_ld + r0 + g + 8];
                },
                [&](int k, int q, float (&b)[2]) {
                    b[0] = vp[(k + t) * GDC_S_LD + 8 * q + g], b[1] = vp[(k + t + 4) * GDC_S_LD + 8 * q + g];
                });
#pragma unroll
            for (int q = 0; q < 4; ++q)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int r = r0 + g + 8 * (e / 2), col = 8 * q + 2 * t + e % 2;
                    if (r < d) ssh[r * GDC_S_LD + col] = fmaf(decay, ssh[r * GDC_S_LD + col], su[q][e]);
                }
        }
        __syncthreads();  // S updated; KT and V' are free
        if (next) gdc_copy_rows_async(kts, kt_ld, next + 3 * GDC_CHUNK * d, GDC_CHUNK, d);
        cp_async_commit();
    }
    for (int r = warp; r < d; r += warps)
        if (lane < cols) S[(long long)r * d + j0 + lane] = ssh[r * GDC_S_LD + lane];
}

// gated_delta_chunk_out: grid (chunks, ceil(d / 32), v_heads), GDC_OUT_THREADS threads. CTA (c, b, h)
// writes O[:, 32b .. 32b + 31] of chunk c, head h: O = QE·S_start + P·V', every chunk at once
// (the state pass left S_start and V' in the scratch), on the tensor cores as the state pass runs
// its products (3xTF32, partials of GDC_TC_FOLD k8 steps): one K = d + 64 sum per output, the P
// part only over the k8 steps at or below a row tile's diagonal (P is lower triangular). Warp w
// owns rows 16(w / 2) .. +15 and columns 16(w % 2) .. +15. Shared memory: QE [64][ds + GDC_W_PAD]
// (columns d.. zero), S_start[:, block] [ds][GDC_S_LD] (rows d.. and columns past the head zero),
// Pᵀ [64][GDC_P_LD], V'[:, block] [64][GDC_S_LD].
#define GDC_P_LD (GDC_CHUNK + 8)
extern "C" __global__ void __launch_bounds__(GDC_OUT_THREADS)
    gated_delta_chunk_out(const float* __restrict__ scratch, float* __restrict__ out, int rows, int v_heads, int d) {
    griddep_wait();
    griddep_launch_dependents();
    extern __shared__ float gdc_out_smem[];
    const int ds = (d + 15) & ~15, q_ld = ds + GDC_W_PAD;
    float* xs = gdc_out_smem;                      // [64][q_ld]
    float* ssh = xs + GDC_CHUNK * q_ld;            // [ds][GDC_S_LD]
    float* psh = ssh + ds * GDC_S_LD;              // [64][GDC_P_LD]
    float* vp = psh + GDC_CHUNK * GDC_P_LD;        // [64][GDC_S_LD]
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE, warps = GDC_OUT_THREADS / WARP_SIZE;
    const int g = lane / 4, t = lane % 4;
    const int c = blockIdx.x, h = blockIdx.z, j0 = blockIdx.y * GDC_COLS;
    const int cols = min(GDC_COLS, d - j0);
    const int chunks = gridDim.x, t0 = c * GDC_CHUNK, n = min(GDC_CHUNK, rows - t0);
    const float* blk = scratch + ((long long)h * chunks + c) * gdc_block_len(d);
    if (ds != d)
        for (int r = warp; r < GDC_CHUNK; r += warps)
            for (int x = d + lane; x < ds; x += WARP_SIZE) xs[r * q_ld + x] = 0.0f;
    // Columns past the head (a last, partial column block) and S rows past d read as zero.
    for (int r = warp; r < ds; r += warps)
        if (lane >= cols || r >= d) ssh[r * GDC_S_LD + lane] = 0.0f;
    for (int r = warp; r < GDC_CHUNK; r += warps)
        if (lane >= cols) vp[r * GDC_S_LD + lane] = 0.0f;
    gdc_copy_rows_async(xs, q_ld, blk + GDC_CHUNK * d, GDC_CHUNK, d);
    gdc_copy_rows_async(psh, GDC_P_LD, blk + 4 * GDC_CHUNK * d, GDC_CHUNK, GDC_CHUNK);
    // S_start's and V''s rows restricted to this block's columns: 16-byte pieces when d is a multiple
    // of 4 (then so is cols, and every row start j0 + r·d is aligned).
    const float* s_start = blk + gdc_s_start_at(d) + j0;
    const float* v_in = blk + 2 * GDC_CHUNK * d + j0;
    if ((d & 3) == 0) {
        for (int r = warp; r < d; r += warps)
            if (4 * lane < cols) cp_async16(ssh + r * GDC_S_LD + 4 * lane, s_start + (long long)r * d + 4 * lane);
        for (int r = warp; r < GDC_CHUNK; r += warps)
            if (4 * lane < cols) cp_async16(vp + r * GDC_S_LD + 4 * lane, v_in + (long long)r * d + 4 * lane);
    } else {
        for (int r = warp; r < d; r += warps)
            if (lane < cols) cp_async4(ssh + r * GDC_S_LD + lane, s_start + (long long)r * d + lane);
        for (int r = warp; r < GDC_CHUNK; r += warps)
            if (lane < cols) cp_async4(vp + r * GDC_S_LD + lane, v_in + (long long)r * d + lane);
    }
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();

    const int r0 = 16 * (warp / 2), c0 = 16 * (warp % 2);
    // B_q's column g of a [k][GDC_S_LD] tile (S_start, V').
    auto columns_of = [&](const float* x) {
        return [=](int k, int q, float (&b)[2]) {
            b[0] = x[(k + t) * GDC_S_LD + c0 + 8 * q + g], b[1] = x[(k + t + 4) * GDC_S_LD + c0 + 8 * q + g];
        };
    };
    float acc[2][4] = {};
    // QE·S_start over k < ds.
    gdc_tc_accumulate(
        acc, ds,
        [&](int k, float (&a)[4]) {
            a[0] = xs[(r0 + g) * q_ld + k + t], a[1] = xs[(r0 + g + 8) * q_ld + k + t];
            a[2] = xs[(r0 + g) * q_ld + k + t + 4], a[3] = xs[(r0 + g + 8) * q_ld + k + t + 4];
        },
        columns_of(ssh));
    // + P·V' over l <= the row tile's last row (P_il = 0 for l > i): r0 + 16 values of l, whole
    // partials of 16. P[i][l] = Pᵀ[l][i].
    gdc_tc_accumulate(
        acc, r0 + 16,
        [&](int k, float (&a)[4]) {
            a[0] = psh[(k + t) * GDC_P_LD + r0 + g], a[1] = psh[(k + t) * GDC_P_LD + r0 + g + 8];
            a[2] = psh[(k + t + 4) * GDC_P_LD + r0 + g], a[3] = psh[(k + t + 4) * GDC_P_LD + r0 + g + 8];
        },
        columns_of(vp));
#pragma unroll
    for (int q = 0; q < 2; ++q)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int i = r0 + g + 8 * (e / 2), col = c0 + 8 * q + 2 * t + e % 2;
            if (col < cols && i < n) out[(long long)(t0 + i) * v_heads * d + (long long)h * d + j0 + col] = acc[q][e];
        }
}

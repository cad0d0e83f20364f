// Round 7 probe: where the time of one gemv_tc launch goes, and what any kernel needs just to
// read the same bytes. Needs the helpers of gemv_lab.cu and gemv_tc_lab.cuh (included from there).
//
// `gemv_lab timeline` prints, per decode shape,
//   - floor: a read-only kernel streaming the shape's weight bytes (16-byte loads, 4 in flight
//     per thread, 4 CTAs of 256 threads per SM), timed like the variants (rotated copies, back to
//     back): the least time any GEMV of that size can take with this launch and timing method;
//   - tc: the production gemv_tc with the launcher's geometry, timed the same way;
//   - tc_pre: the same GEMV reading x's B fragments and offsets pre-staged in global memory by
//     `tc1_prestage` (what tc_stage computes, done once), copied with cp.async: what staging costs
//     if the producer of x wrote that layout (checked bit-identical to tc);
//   - b1: the production binary GEMV (matmul_gemv_b1.cu): gemv_b1_prepare + gemv_b1, back to
//     back as the bench runs them (and gemv_b1 alone on prepared planes);
//   - the phases of one tc / tc_pre / b1 launch (TC_MARK in matmul_gemv_tc.cu and _b1.cu, thread 0 of
//     every CTA, SM clock cycles from the CTA's start; median and max over CTAs): 1 = weight
//     prefetch issued and griddep_wait passed, 2 = x staged / planes copied (first chunk), 3 = main
//     loop done, 4 = partials in shared memory, 5 = outputs stored; and the spread of CTA start
//     times and the launch's span (globaltimer, ns).

__global__ void __launch_bounds__(256) read_floor(const uint4* __restrict__ p, size_t n16, u32* out) {
    u32 acc = 0;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 3 * stride < n16; i += 4 * stride) {
        const uint4 a = p[i], b = p[i + stride], c = p[i + 2 * stride], d = p[i + 3 * stride];
        acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
    }
    for (; i < n16; i += stride) {
        const uint4 a = p[i];
        acc ^= a.x ^ a.y ^ a.z ^ a.w;
    }
    if (acc == 0x9e3779b9u) out[0] = acc;  // never in practice; keeps the loads alive
}

// tc_stage's output for all of x (one token), into global memory: [groups][b_group] uint4 B
// fragments, then [groups] f32 offsets.
__global__ void __launch_bounds__(TC_MAX_THREADS_M1) tc1_prestage(const float* x, int k, uint4* out) {
    const int groups = k / GROUP_SIZE, b_group = TC_QUADS * 3 * LAYOUT_LANES;
    tc_stage<1, 3>(x, 1, k, 0, groups, 1, 1, out, reinterpret_cast<float*>(out + (long long)groups * b_group), nullptr,
                   nullptr);
}
__global__ void __launch_bounds__(TC_MAX_THREADS_M1)
    tc1_store_pre(const u16* s, const u32* p, const float* x, int m, float* y, int n, int k, int tpc, int splits, int chunk) {
    gemv_tc_body<1, MATMUL_STORE, 1, 3, LAYOUT_BLOCK_GROUPS, true>(s, p, x, m, y, n, k, tpc, splits, chunk, nullptr, 0.0f);
}

// The production binary GEMV in the lab's TcKernel shape: `x` points at gemv_b1_prepare's output
// (planes, then (s, X), then sums of squares; b1_scratch_words).
static size_t b1_scratch_words(int k) { return (size_t)(k / GROUP_SIZE) * (B1_GROUP_WORDS + 3); }
__global__ void __launch_bounds__(B1_MAX_THREADS)
    b1_store(const u16* s, const u32* p, const float* x, int, float* y, int n, int k, int tpc, int splits, int chunk) {
    const u32* planes = reinterpret_cast<const u32*>(x);
    const int groups = k / GROUP_SIZE;
    gemv_b1_body<1, MATMUL_STORE, LAYOUT_BLOCK_GROUPS, false>(s, p, planes, planes + (size_t)groups * B1_GROUP_WORDS,
                                                       reinterpret_cast<const float*>(planes + (size_t)groups * (B1_GROUP_WORDS + 2)),
                                                       y, n, k, tpc, splits, chunk, 0, 0.0f, blockIdx.x,
                                                       B1PlanesOut{}, nullptr);
}
static void b1_prepare_launch(const float* d_x, int k, u32* scratch) {
    const int groups = k / GROUP_SIZE;
    gemv_b1_prepare<<<(groups + B1_PREPARE_WARPS - 1) / B1_PREPARE_WARPS, B1_PREPARE_WARPS * 32>>>(
        d_x, nullptr, k, scratch, scratch + (size_t)groups * B1_GROUP_WORDS,
        reinterpret_cast<float*>(scratch + (size_t)groups * (B1_GROUP_WORDS + 2)));
}
// gemv_b1's launch shape (tc_geometry.rs: b1_geometry): 16 warps, chunk = all groups that fit.
static TcGeom b1_geom(int n_out, int k) {
    TcGeom g = tc_geom(n_out, k, false, 1, 16, 1);
    const int groups = k / GROUP_SIZE, warps = g.tpc * g.splits;
    const size_t fixed = (size_t)warps * 16 * 2 * 4, per_block = 4 * (size_t)(B1_GROUP_WORDS + 2) * 4;
    g.chunk = std::min(groups, std::max((int)((TC_LAB_MAX_SMEM - fixed) / per_block) * 4, 4));
    g.smem = (size_t)g.chunk * (B1_GROUP_WORDS + 2) * 4 + fixed;
    return g;
}

// Phases of one launch of `f` on a cold weight copy (TC_MARK slots, see the header).
static void print_phases(const char* label, TcKernel f, const TcGeom& g, int copies, const std::vector<u16*>& d_s,
                         const std::vector<u32*>& d_w, const float* xin, float* d_y, int n, int k) {
    long long* d_marks;
    const size_t marks = (size_t)g.ctas * 8;
    CK(cudaMalloc(&d_marks, marks * 8));
    CK(cudaMemset(d_marks, 0, marks * 8));
    CK(cudaMemcpyToSymbol(tc_timeline_buf, &d_marks, sizeof d_marks));
    for (int i = 0; i < 4; ++i) tc_launch(f, g, d_s[i], d_w[i], xin, 1, d_y, n, k);  // warm code
    tc_launch(f, g, d_s[copies - 1], d_w[copies - 1], xin, 1, d_y, n, k);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    long long* none = nullptr;
    CK(cudaMemcpyToSymbol(tc_timeline_buf, &none, sizeof none));
    std::vector<long long> h(marks);
    CK(cudaMemcpy(h.data(), d_marks, marks * 8, cudaMemcpyDeviceToHost));
    printf("  %s phases (cycles from CTA start, median / max):", label);
    for (int ph = 1; ph <= 5; ++ph) {
        std::vector<long long> d;
        for (int c = 0; c < g.ctas; ++c) d.push_back(h[c * 8 + ph] - h[c * 8]);
        std::sort(d.begin(), d.end());
        printf(" %d: %lld / %lld%s", ph, d[d.size() / 2], d.back(), ph < 5 ? "," : "\n");
    }
    long long s0 = h[6], s1 = h[6], e1 = h[7];
    for (int c = 0; c < g.ctas; ++c) {
        s0 = std::min(s0, h[c * 8 + 6]);
        s1 = std::max(s1, h[c * 8 + 6]);
        e1 = std::max(e1, h[c * 8 + 7]);
    }
    printf("  %s CTA starts spread %lld ns, span first start -> last end %lld ns\n", label, s1 - s0, e1 - s0);
    CK(cudaFree(d_marks));
}

static void run_timeline_shape(int n, int k) {
    const int bits = 1;
    const size_t n_groups = (size_t)n * (k / GROUP_SIZE), n_words = (size_t)n * k / 32;
    std::vector<uint16_t> scales(n_groups);
    std::vector<uint32_t> words(n_words);
    std::vector<float> x(k);
    for (auto& s : scales) s = __half_as_ushort(__float2half((float)(0.01 + 0.02 * next_unit())));
    for (auto& w : words) w = (uint32_t)next_u64();
    for (auto& v : x) v = (float)(2.0 * next_unit() - 1.0);
    const std::vector<uint32_t> dev = tc_permute(bits, n, k, words);
    const RotatedWeights rotated(scales, dev);
    const std::vector<u16*>& d_s = rotated.scales;
    const std::vector<u32*>& d_w = rotated.words;
    const int copies = rotated.copies();
    float *d_x, *d_y;
    u32* d_sink;
    CK(cudaMalloc(&d_x, k * 4));
    CK(cudaMalloc(&d_y, n * 4));
    CK(cudaMalloc(&d_sink, 4));
    CK(cudaMemcpy(d_x, x.data(), k * 4, cudaMemcpyHostToDevice));
    CK(cudaFuncSetAttribute(tc1_store, cudaFuncAttributeMaxDynamicSharedMemorySize, TC_LAB_MAX_SMEM + 4096));
    const TcGeom g = tc_geom(n, k, false, 1, 16, 1);

    // The read floor over the payload words only (the scales are 1/8 as many bytes).
    const size_t n16 = n_words / 4;
    const double floor_s = time_batches(copies, [&](int i) {
        read_floor<<<TC_LAB_SMS * 4, 256>>>(reinterpret_cast<const uint4*>(d_w[i]), n16, d_sink);
    });
    const double tc_s = time_batches(copies, [&](int i) { tc_launch(tc1_store, g, d_s[i], d_w[i], d_x, 1, d_y, n, k); });

    // The pre-staged variant (needs the whole of x in one chunk and 4-group layout blocks).
    CK(cudaFuncSetAttribute(tc1_store_pre, cudaFuncAttributeMaxDynamicSharedMemorySize, TC_LAB_MAX_SMEM + 4096));
    const int groups = k / GROUP_SIZE, b_group = TC_QUADS * 3 * LAYOUT_LANES;
    const bool pre_ok = g.chunk == groups && groups % 4 == 0;
    uint4* d_pre = nullptr;
    double pre_s = 0.0, stage_s = 0.0;
    bool same = false;
    if (pre_ok) {
        CK(cudaMalloc(&d_pre, (size_t)groups * b_group * 16 + (size_t)groups * 4));
        stage_s = time_batches(1, [&](int) { tc1_prestage<<<1, TC_MAX_THREADS_M1>>>(d_x, k, d_pre); });
        std::vector<float> y_tc(n), y_pre(n);
        tc_launch(tc1_store, g, d_s[0], d_w[0], d_x, 1, d_y, n, k);
        CK(cudaMemcpy(y_tc.data(), d_y, n * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemset(d_y, 0xff, n * 4));
        tc_launch(tc1_store_pre, g, d_s[0], d_w[0], reinterpret_cast<const float*>(d_pre), 1, d_y, n, k);
        CK(cudaGetLastError());
        CK(cudaMemcpy(y_pre.data(), d_y, n * 4, cudaMemcpyDeviceToHost));
        same = memcmp(y_tc.data(), y_pre.data(), n * 4) == 0;
        pre_s = time_batches(copies, [&](int i) {
            tc_launch(tc1_store_pre, g, d_s[i], d_w[i], reinterpret_cast<const float*>(d_pre), 1, d_y, n, k);
        });
    }
    printf("timeline Q1 N=%d K=%d: %d CTAs x %d warps (%d tiles x %d splits), chunk %d | floor %.2f us | tc %.2f us (%.0f%% of floor speed)",
           n, k, g.ctas, g.tpc * g.splits, g.tpc, g.splits, g.chunk, floor_s * 1e6, tc_s * 1e6, 100.0 * floor_s / tc_s);
    if (pre_ok)
        printf(" | tc_pre %.2f us (%.0f%% of floor; output %s; prestage kernel %.2f us)\n", pre_s * 1e6, 100.0 * floor_s / pre_s,
               same ? "bit-identical" : "DIFFERS", stage_s * 1e6);
    else
        printf(" | tc_pre n/a (x in several chunks)\n");
    print_phases("tc", tc1_store, g, copies, d_s, d_w, d_x, d_y, n, k);
    if (pre_ok) print_phases("tc_pre", tc1_store_pre, g, copies, d_s, d_w, reinterpret_cast<const float*>(d_pre), d_y, n, k);

    // The binary GEMV: prepare + gemv as the model runs them, then gemv alone on prepared planes.
    u32* d_b1;
    CK(cudaMalloc(&d_b1, b1_scratch_words(k) * 4));
    CK(cudaFuncSetAttribute(b1_store, cudaFuncAttributeMaxDynamicSharedMemorySize, TC_LAB_MAX_SMEM + 4096));
    const TcGeom gb = b1_geom(n, k);
    const float* planes_x = reinterpret_cast<const float*>(d_b1);
    const double b1_pair_s = time_batches(copies, [&](int i) {
        b1_prepare_launch(d_x, k, d_b1);
        tc_launch(b1_store, gb, d_s[i], d_w[i], planes_x, 1, d_y, n, k);
    });
    const double b1_s = time_batches(copies, [&](int i) { tc_launch(b1_store, gb, d_s[i], d_w[i], planes_x, 1, d_y, n, k); });
    const double prep_s = time_batches(1, [&](int) { b1_prepare_launch(d_x, k, d_b1); });
    CK(cudaGetLastError());
    printf("  b1: prepare + gemv %.2f us (%.0f%% of floor speed) | gemv alone %.2f us (%.0f%%) | prepare alone %.2f us | %d CTAs x %d warps, chunk %d\n",
           b1_pair_s * 1e6, 100.0 * floor_s / b1_pair_s, b1_s * 1e6, 100.0 * floor_s / b1_s, prep_s * 1e6, gb.ctas,
           gb.tpc * gb.splits, gb.chunk);
    print_phases("b1", b1_store, gb, copies, d_s, d_w, planes_x, d_y, n, k);
    CK(cudaFree(d_b1));
    if (d_pre) CK(cudaFree(d_pre));
    CK(cudaFree(d_x));
    CK(cudaFree(d_y));
    CK(cudaFree(d_sink));
}

static void run_timeline() {
    const int shapes[][2] = {{4096, 4096}, {6144, 4096}, {12288, 4096}, {4096, 12288}, {2048, 2048}, {151669, 4096}};
    for (auto& sh : shapes) run_timeline_shape(sh[0], sh[1]);
}

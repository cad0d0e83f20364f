// Round 6 candidate: the production tensor-core GEMV `gemv_tc` (matmul_gemv_tc.cu, included by
// baseline_gemv.cuh) on the DEVICE weight layout (weight_layout.cu), which the lab produces with
// tc_permute (host twin of crate::cuda::weights::permute) from the same natural words the other
// variants read. Checked like them against the f64 reference; the error is also shown against
// verify's GEMV bound, which scales with D = sum_groups d sum|x| (Q1: D = sum|w||x|). Needs the
// helpers of gemv_lab.cu (included from there).

#define TC_LAB_ENTRY(NAME, BITS, MODE, NT, COLS)                                                        \
    __global__ void __launch_bounds__(TC_MAX_THREADS_M1)                                                \
        NAME(const u16* s, const u32* p, const float* x, int m, float* y, int n, int k, int tpc,        \
             int splits, int chunk) {                                                                   \
        gemv_tc<BITS, MODE, NT, COLS>(s, p, x, m, y, n, k, tpc, splits, chunk, nullptr, 0.0f);          \
    }
TC_LAB_ENTRY(tc1_store, 1, MATMUL_STORE, 1, 3)
TC_LAB_ENTRY(tc2_store, 2, MATMUL_STORE, 1, 3)
TC_LAB_ENTRY(tc1_add, 1, MATMUL_ADD, 1, 3)
TC_LAB_ENTRY(tc2_add, 2, MATMUL_ADD, 1, 3)
TC_LAB_ENTRY(tc1_swiglu, 1, MATMUL_SWIGLU, 1, 3)
TC_LAB_ENTRY(tc2_swiglu, 2, MATMUL_SWIGLU, 1, 3)
TC_LAB_ENTRY(tc1_t8_store, 1, MATMUL_STORE, GEMV_MAX_TOKENS / 2, 6)
TC_LAB_ENTRY(tc2_t8_store, 2, MATMUL_STORE, GEMV_MAX_TOKENS / 2, 6)
TC_LAB_ENTRY(tc1_t8_swiglu, 1, MATMUL_SWIGLU, GEMV_MAX_TOKENS / 2, 6)
TC_LAB_ENTRY(tc2_t8_swiglu, 2, MATMUL_SWIGLU, GEMV_MAX_TOKENS / 2, 6)
typedef void (*TcKernel)(const u16*, const u32*, const float*, int, float*, int, int, int, int, int);

static const int TC_LAB_SMS = 132;
static const int TC_LAB_MAX_SMEM = 96 * 1024;

// Natural (host) words -> device layout (weight_layout.cu; crate::cuda::weights is the definition).
static std::vector<uint32_t> tc_permute(int bits, int n, int k, const std::vector<uint32_t>& natural) {
    const int gpr = k / GROUP_SIZE, gw = 4 * bits, per_word = 32 / bits, nb = gpr % 4 == 0 ? 4 : 1;
    std::vector<uint32_t> dev(natural.size(), 0u);
    for (size_t row = 0; row < (size_t)n; ++row)
        for (int g = 0; g < gpr; ++g) {
            const uint32_t* words = &natural[(row * gpr + g) * gw];
            for (int j = 0; j < GROUP_SIZE; ++j) {
                const uint32_t code = (words[j / per_word] >> (bits * (j % per_word))) & ((1u << bits) - 1);
                const int t = (j / 2) % 4, q = 2 * (j / 16) + (j / 8) % 2, bit = 15 - q + 16 * (j % 2);
                const int b0 = g - g % nb;
                for (int p = 0; p < bits; ++p)
                    dev[row * gpr * gw + b0 * gw + (t * nb + g - b0) * bits + p] |= ((code >> p) & 1u) << bit;
            }
        }
    return dev;
}

// Launch geometry, as the launcher's tc_geometry (ops/matmul_q1/tc_geometry.rs) with warps and
// CTAs per SM as knobs: tiles_per_cta = ceil(tiles / (SMs x ctas_per_sm)), splits fill `warps`.
struct TcGeom {
    int ctas, tpc, splits, chunk;
    size_t smem;
};
static size_t tc_lab_smem(int m, int chunk, int warps) {
    const int nt = m == 1 ? 1 : (m + 1) / 2, cols = m == 1 ? 3 : 6, tok = m == 1 ? 1 : 2 * nt, ntt = m == 1 ? 1 : 4;
    return (size_t)(chunk + 1) * (nt * 4 * cols * 4 * 16 + tok * 4) + (size_t)warps * 16 * 2 * ntt * 4;
}
static TcGeom tc_geom(int n_out, int k, bool swiglu, int m, int warps, int ctas_per_sm) {
    const int groups = k / GROUP_SIZE, units = groups % 4 == 0 ? groups / 4 : groups;
    const int tiles = (n_out + (swiglu ? 8 : 16) - 1) / (swiglu ? 8 : 16);
    const int tpc = std::min(std::max((tiles + TC_LAB_SMS * ctas_per_sm - 1) / (TC_LAB_SMS * ctas_per_sm), 1), warps);
    const int splits = std::min(std::max(warps / tpc, 1), units);
    const size_t fixed = tc_lab_smem(m, 0, tpc * splits), per_group = tc_lab_smem(m, 1, tpc * splits) - fixed;
    const int fit = (int)((TC_LAB_MAX_SMEM - fixed) / per_group) / 4 * 4;
    const int chunk = std::min(groups, std::max(fit, 4));
    return {(tiles + tpc - 1) / tpc, tpc, splits, chunk, tc_lab_smem(m, chunk, tpc * splits)};
}
static void tc_launch(TcKernel f, const TcGeom& g, const u16* s, const u32* p, const float* x, int m, float* y,
                      int n_out, int k) {
    f<<<g.ctas, g.tpc * g.splits * 32, g.smem>>>(s, p, x, m, y, n_out, k, g.tpc, g.splits, g.chunk);
}

// D per row (sum over groups of d sum|x|) for token `tok` of x [m, k].
static std::vector<double> tc_dense_magnitude(int n, int k, const std::vector<uint16_t>& scales, const float* x) {
    std::vector<double> d(n, 0.0);
    for (int r = 0; r < n; ++r)
        for (int c = 0; c < k; ++c)
            d[r] += __half2float(__ushort_as_half(scales[(size_t)r * (k / GROUP_SIZE) + c / GROUP_SIZE])) * fabs(x[c]);
    return d;
}

// Every mode and token count (m = 1 kernel; tokens8 kernel for m = 2..8) on odd and Bonsai shapes,
// against the f64 reference, in units of u D (verify's GEMV bound: 2 (K/128 + 133) for Q1,
// 2 (2 K/128 + 355) for Q2; SwiGLU and add as in check_stream_modes).
static bool check_tc_modes() {
    bool all_ok = true;
    const int shapes[][2] = {{1001, 768}, {37, 384}, {12288, 4096}, {4096, 12288}};
    for (int bits = 1; bits <= 2; ++bits)
        for (auto& sh : shapes) {
            const int n = sh[0], k = sh[1], wpw = 32 / bits;
            const double coeff = bits == 1 ? 2.0 * (k / GROUP_SIZE + 133.0) : 2.0 * (2.0 * k / GROUP_SIZE + 355.0);
            std::vector<uint16_t> scales((size_t)n * (k / GROUP_SIZE));
            std::vector<uint32_t> words((size_t)n * k / wpw);
            std::vector<float> x((size_t)GEMV_MAX_TOKENS * k), y0((size_t)GEMV_MAX_TOKENS * n);
            for (auto& v : scales) v = __half_as_ushort(__float2half((float)(0.01 + 0.02 * next_unit())));
            for (auto& w : words) w = (uint32_t)next_u64();
            for (auto& v : x) v = (float)(2.0 * next_unit() - 1.0);
            for (auto& v : y0) v = (float)(8.0 * next_unit() - 4.0);
            const std::vector<uint32_t> dev = tc_permute(bits, n, k, words);
            std::vector<std::vector<double>> want(GEMV_MAX_TOKENS), mag(GEMV_MAX_TOKENS), dense(GEMV_MAX_TOKENS);
            for (int t = 0; t < GEMV_MAX_TOKENS; ++t) {
                reference_rows(bits, n, k, scales, words, std::vector<float>(x.begin() + (size_t)t * k, x.begin() + (size_t)(t + 1) * k),
                               want[t], mag[t]);
                dense[t] = tc_dense_magnitude(n, k, scales, x.data() + (size_t)t * k);
            }
            u16* ds; u32* dw; float *dx, *dy;
            CK(cudaMalloc(&ds, scales.size() * 2));
            CK(cudaMalloc(&dw, dev.size() * 4));
            CK(cudaMalloc(&dx, x.size() * 4));
            CK(cudaMalloc(&dy, y0.size() * 4));
            CK(cudaMemcpy(ds, scales.data(), scales.size() * 2, cudaMemcpyHostToDevice));
            CK(cudaMemcpy(dw, dev.data(), dev.size() * 4, cudaMemcpyHostToDevice));
            CK(cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice));
            for (int m : {1, 2, 3, 8})
                for (int mode = 0; mode < 3; ++mode) {
                    if (m > 1 && mode == 1) continue;  // tokens8 add: same epilogue as m = 1
                    const int n_out = mode == 2 ? n / 2 : n;
                    TcKernel f = m == 1 ? (mode == 0 ? (bits == 1 ? tc1_store : tc2_store)
                                           : mode == 1 ? (bits == 1 ? tc1_add : tc2_add) : (bits == 1 ? tc1_swiglu : tc2_swiglu))
                                        : (mode == 0 ? (bits == 1 ? tc1_t8_store : tc2_t8_store) : (bits == 1 ? tc1_t8_swiglu : tc2_t8_swiglu));
                    CK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, TC_LAB_MAX_SMEM + 4096));
                    const TcGeom g = tc_geom(n_out, k, mode == 2, m, 16, 1);
                    if (mode == 1) CK(cudaMemcpy(dy, y0.data(), (size_t)m * n * 4, cudaMemcpyHostToDevice));
                    else CK(cudaMemset(dy, 0xff, (size_t)m * n * 4));
                    tc_launch(f, g, ds, dw, dx, m, dy, n_out, k);
                    CK(cudaGetLastError());
                    std::vector<float> got((size_t)m * n_out);
                    CK(cudaMemcpy(got.data(), dy, got.size() * 4, cudaMemcpyDeviceToHost));
                    double worst = 0;
                    bool finite = true;
                    for (int t = 0; t < m; ++t)
                        for (int o = 0; o < n_out; ++o) {
                            double w, scale;
                            if (mode == 2) {
                                const double gg = want[t][o], u = want[t][n_out + o], sg = gg / (1.0 + exp(-gg));
                                w = sg * u;
                                scale = 1.1 * fabs(u) * dense[t][o] + fabs(sg) * dense[t][n_out + o] + 4.0 * fabs(w) / coeff;
                            } else {
                                w = want[t][o] + (mode == 1 ? y0[o] : 0.0);
                                scale = dense[t][o] + (mode == 1 ? (fabs(y0[o]) + fabs(w)) / coeff : 0.0);
                            }
                            const float gv = got[(size_t)t * n_out + o];
                            if (!std::isfinite(gv)) finite = false;
                            worst = std::max(worst, fabs(gv - w) / (U * scale + 1e-30));
                        }
                    const bool ok = finite && worst <= coeff;
                    all_ok = all_ok && ok;
                    printf("tc-check Q%d N=%d K=%d m=%d %s (ctas %d, %d x %d warps, chunk %d): err %.2f u.D (bound %.0f) %s\n",
                           bits, n, k, m, mode == 0 ? "store" : mode == 1 ? "add" : "swiglu", g.ctas, g.tpc, g.splits,
                           g.chunk, worst, coeff, ok ? "ok" : "FAIL");
                }
            CK(cudaFree(ds)); CK(cudaFree(dw)); CK(cudaFree(dx)); CK(cudaFree(dy));
        }
    return all_ok;
}

// Times gemv_tc (one token, plain store) on rotated copies of the device-layout matrix: the
// launcher's geometry (16 warps, one CTA per SM) and three neighbours. Rows in run_shape's format.
static void run_tc_shape(int bits, int n, int k, double copy_bw, bool profile) {
    const int wpw = 32 / bits;
    const size_t n_groups = (size_t)n * (k / GROUP_SIZE), n_words = (size_t)n * k / wpw;
    std::vector<uint16_t> scales(n_groups);
    std::vector<uint32_t> words(n_words);
    std::vector<float> x(k);
    for (auto& s : scales) s = __half_as_ushort(__float2half((float)(0.01 + 0.02 * next_unit())));
    for (auto& w : words) w = (uint32_t)next_u64();
    for (auto& v : x) v = (float)(2.0 * next_unit() - 1.0);
    std::vector<double> want, mag;
    reference_rows(bits, n, k, scales, words, x, want, mag);
    const std::vector<double> dense = tc_dense_magnitude(n, k, scales, x.data());
    const std::vector<uint32_t> dev = tc_permute(bits, n, k, words);
    const RotatedWeights rotated(scales, dev);
    const std::vector<u16*>& d_s = rotated.scales;
    const std::vector<u32*>& d_w = rotated.words;
    const size_t bytes = rotated.bytes;
    const int copies = rotated.copies();
    float *d_x, *d_y;
    CK(cudaMalloc(&d_x, k * 4));
    CK(cudaMalloc(&d_y, n * 4));
    CK(cudaMemcpy(d_x, x.data(), k * 4, cudaMemcpyHostToDevice));
    TcKernel f = bits == 1 ? tc1_store : tc2_store;
    CK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, TC_LAB_MAX_SMEM + 4096));
    const double traffic = (double)bytes + 4.0 * (k + n);
    const double coeff = bits == 1 ? 2.0 * (k / GROUP_SIZE + 133.0) : 2.0 * (2.0 * k / GROUP_SIZE + 355.0);
    const int knobs[][2] = {{16, 1}, {8, 1}, {16, 2}, {8, 2}};  // (warps per CTA, CTAs per SM)
    for (auto& kn : knobs) {
        const TcGeom g = tc_geom(n, k, false, 1, kn[0], kn[1]);
        auto launch = [&](int i) { tc_launch(f, g, d_s[i], d_w[i], d_x, 1, d_y, n, k); };
        CK(cudaMemset(d_y, 0xff, n * 4));
        launch(0);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        std::vector<float> got(n);
        CK(cudaMemcpy(got.data(), d_y, n * 4, cudaMemcpyDeviceToHost));
        double worst = 0;
        bool nan = false;
        for (int r = 0; r < n; ++r) {
            if (!std::isfinite(got[r])) nan = true;
            worst = std::max(worst, fabs(got[r] - want[r]) / (U * dense[r]));
        }
        char name[32];
        snprintf(name, sizeof name, "tc_w%d_c%d%s", kn[0], kn[1], kn[0] == 16 && kn[1] == 1 ? "*" : "");
        if (profile) {
            printf("checked %s Q%d N=%d K=%d: err %.2f u.D %s\n", name, bits, n, k, worst, (!nan && worst <= coeff) ? "ok" : "FAIL");
            continue;
        }
        const double secs = time_batches(copies, launch);
        printf("| Q%d | N=%6d K=%5d | %-14s w%-2d | splits %d | %7.2f us | %7.1f GB/s | %5.1f%% | err %6.2f u.D      (bound %.0f) %s |\n",
               bits, n, k, name, g.tpc * g.splits, g.splits, secs * 1e6, traffic / secs / 1e9, 100.0 * traffic / secs / copy_bw,
               worst, coeff, (!nan && worst <= coeff) ? "ok" : "FAIL");
        fflush(stdout);
    }
    CK(cudaFree(d_x));
    CK(cudaFree(d_y));
}

// Lab: could a decode GEMV's CTAs quantize their own output groups, so the next GEMV needs no
// prepare launch (kernel-notes round 14: each prepare costs ~2.7 us of dependent latency)?
// Two ways, each measured here before any kernel is written:
//   1. Fewer, wider CTAs that own whole 128-output groups: how fast can N SMs stream a decode
//      matrix (2.3 / 7 / 14 MB, rotated beyond L2)? Time = first CTA start to last CTA end on the
//      GPU clock, so launch overhead is excluded.
//   2. Clusters of 4 CTAs (4 x 32 outputs = one group) that exchange their outputs through
//      distributed shared memory after a cluster barrier, against the global-counter epilogue of
//      round 10 (each CTA stores its outputs, fences, adds to a counter; the last one reads the
//      group back from L2). Time = from the CTA's epilogue start to the group's quantized store.
//      Also the cost of a cluster launch inside a CUDA graph against a plain one.
//   1b. The spread of the CTA ends when 128 CTAs stream equal slices with nothing else running,
//      and the SMs most often last (is a decode kernel's CTA spread DRAM arbitration alone?).
//   3. Clusters of 16, 8, 4 and 2 whole-SM CTAs and of 16 half-SM CTAs (kernel-notes rounds
//      26-27: qkv, RoPE and the attention of one kv group in one cluster; the `_out` GEMVs'
//      owners reading their group through DSMEM): how many fit at once on this GPU
//      (cudaOccupancyMaxActiveClusters, against the 128 CTAs a decode kernel needs), and for the
//      shapes that fit in one wave what two exchanges through distributed shared memory cost
//      (each CTA reading its two neighbours' values after a cluster barrier, twice) and an empty
//      clustered kernel in a graph.
// Build: nvcc -O3 -arch=sm_90 -o owner_groups owner_groups.cu   Run: ./owner_groups
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace cg = cooperative_groups;

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); std::exit(1); } } while (0)

constexpr int THREADS = 512;
constexpr long long POOL_BYTES = 1LL << 30;  // rotated through, far beyond the 50 MB L2
constexpr int UNROLL = 8;

__device__ __forceinline__ unsigned long long global_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Part 1: CTA b streams bytes [b * slice, (b + 1) * slice) of `src`; stamps[2b] / [2b + 1] its start
// and end.
// With `sms` (part 1b), also each CTA's SM in sms[b].
__global__ void __launch_bounds__(THREADS, 1) stream_slices(const uint4* __restrict__ src, long long slice16,
                                                            unsigned* sink, unsigned long long* stamps,
                                                            unsigned* sms = nullptr) {
    if (threadIdx.x == 0 && sms != nullptr) {
        unsigned smid;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
        sms[blockIdx.x] = smid;
    }
    if (threadIdx.x == 0) stamps[2 * blockIdx.x] = global_ns();
    const uint4* p = src + blockIdx.x * slice16;
    unsigned acc = 0;
    for (long long i = threadIdx.x; i < slice16; i += (long long)THREADS * UNROLL) {
        uint4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const long long j = i + (long long)u * THREADS;
            v[u] = j < slice16 ? __ldcs(p + j) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    if (acc == 0x9e3779b9u) sink[threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.x == 0) stamps[2 * blockIdx.x + 1] = global_ns();
}

// Part 2: a stand-in for quantizing one 128-group: warp max of |v|, then every value scaled by it.
__device__ __forceinline__ void quantize_group(float v0, float v1, float v2, float v3, float* dst) {
    float m = fmaxf(fmaxf(fabsf(v0), fabsf(v1)), fmaxf(fabsf(v2), fabsf(v3)));
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    const float s = m > 0.0f ? 1.0f / m : 0.0f;
    const int lane = threadIdx.x % 32;
    dst[lane] = rintf(v0 * s * 8388608.0f);
    dst[32 + lane] = rintf(v1 * s * 8388608.0f);
    dst[64 + lane] = rintf(v2 * s * 8388608.0f);
    dst[96 + lane] = rintf(v3 * s * 8388608.0f);
}

// Clusters of 4: each CTA's 32 outputs in shared memory, a cluster barrier, rank 0's first warp
// reads the group through DSMEM and quantizes it. stamps: per cluster, rank 0's epilogue start and
// its store's end.
__global__ void __cluster_dims__(4, 1, 1) __launch_bounds__(THREADS, 1)
    epilogue_cluster(float* out, float* planes, unsigned long long* stamps) {
    __shared__ float mine[32];
    cg::cluster_group cluster = cg::this_cluster();
    const unsigned rank = cluster.block_rank();
    const int group = blockIdx.x / 4;
    unsigned long long t0 = 0;
    if (threadIdx.x == 0) t0 = global_ns();
    if (threadIdx.x < 32) {
        mine[threadIdx.x] = (float)(blockIdx.x * 32 + threadIdx.x) * 0.001f;
        out[blockIdx.x * 32 + threadIdx.x] = mine[threadIdx.x];
    }
    cluster.sync();
    if (rank == 0 && threadIdx.x < 32) {
        float v[4];
        for (int r = 0; r < 4; ++r) v[r] = cluster.map_shared_rank(mine, r)[threadIdx.x];
        quantize_group(v[0], v[1], v[2], v[3], planes + group * 128);
        __syncwarp();
        if (threadIdx.x == 0) {
            __threadfence();
            stamps[2 * group] = t0;
            stamps[2 * group + 1] = global_ns();
        }
    }
    cluster.sync();  // the other CTAs' shared memory stays alive until rank 0 has read it
}

// The same through global memory: store, fence, count; the CTA that completes the group (4th)
// acquires the count and reads the group back. stamps: that CTA's epilogue start and store end.
__global__ void __launch_bounds__(THREADS, 1)
    epilogue_counter(float* out, float* planes, unsigned* counts, unsigned long long* stamps) {
    __shared__ int last;
    const int group = blockIdx.x / 4;
    unsigned long long t0 = 0;
    if (threadIdx.x == 0) t0 = global_ns();
    if (threadIdx.x < 32) out[blockIdx.x * 32 + threadIdx.x] = (float)(blockIdx.x * 32 + threadIdx.x) * 0.001f;
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();  // release: this CTA's outputs before its count
        last = atomicAdd(&counts[group], 1u) == 3;
        __threadfence();  // acquire: the other CTAs' outputs after their counts
    }
    __syncthreads();
    if (last && threadIdx.x < 32) {
        const volatile float* g = out + group * 128;
        quantize_group(g[threadIdx.x], g[32 + threadIdx.x], g[64 + threadIdx.x], g[96 + threadIdx.x], planes + group * 128);
        __syncwarp();
        if (threadIdx.x == 0) {
            __threadfence();
            counts[group] = 0;
            stamps[2 * group] = t0;
            stamps[2 * group + 1] = global_ns();
        }
    }
}

__global__ void __cluster_dims__(4, 1, 1) __launch_bounds__(THREADS, 1) empty_cluster(unsigned* sink) {
    if (threadIdx.x == 0 && blockIdx.x == 1u << 30) sink[0] = 1;
}
__global__ void __launch_bounds__(THREADS, 1) empty_plain(unsigned* sink) {
    if (threadIdx.x == 0 && blockIdx.x == 1u << 30) sink[0] = 1;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}
// Part 3: clusters of `size` CTAs (a shape: size, threads, shared memory per CTA; a whole-SM
// decode CTA is 512 threads and ~120 KB, a half-SM one 256 threads and 100 KB, so two share an
// SM). Each CTA puts 48 values in shared memory (its rows of the kv group's 768 when 16 CTAs
// share a group), a cluster barrier, reads its two neighbours' through DSMEM, a second barrier
// and again (two exchanges). stamps: per CTA, its start and the end of the second exchange.
__global__ void __launch_bounds__(THREADS, 1) exchange_in_cluster(float* out, unsigned long long* stamps) {
    extern __shared__ float values[];
    cg::cluster_group cluster = cg::this_cluster();
    const unsigned rank = cluster.block_rank(), size = cluster.num_blocks();
    unsigned long long t0 = 0;
    if (threadIdx.x == 0) t0 = global_ns();
    if (threadIdx.x < 48) values[threadIdx.x] = (float)(blockIdx.x * 48 + threadIdx.x);
    float acc = 0.0f;
    for (int round = 0; round < 2; ++round) {
        cluster.sync();
        if (threadIdx.x < 48) {
            const float* left = cluster.map_shared_rank(values, (rank + size - 1) % size);
            const float* right = cluster.map_shared_rank(values, (rank + 1) % size);
            acc += left[threadIdx.x] + right[threadIdx.x];
        }
        cluster.sync();  // every read of this round before the next round's writes
        if (threadIdx.x < 48) values[threadIdx.x] = acc;
    }
    if (threadIdx.x < 48) out[blockIdx.x * 48 + threadIdx.x] = acc;
    if (threadIdx.x == 0) {
        stamps[2 * blockIdx.x] = t0;
        stamps[2 * blockIdx.x + 1] = global_ns();
    }
}
__global__ void __launch_bounds__(THREADS, 1) empty_in_cluster(float* out, unsigned long long*) {
    if (threadIdx.x == 0 && blockIdx.x == 1u << 30) out[0] = 1.0f;
}

struct ClusterShape {
    int size, threads, smem;
};
// Launch config of a kernel as clusters of shape.size over `ctas` CTAs.
struct ClusterLaunch {
    cudaLaunchConfig_t cfg{};
    cudaLaunchAttribute attr[1]{};
    ClusterLaunch(ClusterShape shape, int ctas, cudaStream_t s) {
        cfg.gridDim = dim3(ctas);
        cfg.blockDim = dim3(shape.threads);
        cfg.dynamicSmemBytes = shape.smem;
        cfg.stream = s;
        attr[0].id = cudaLaunchAttributeClusterDimension;
        attr[0].val.clusterDim.x = shape.size;
        attr[0].val.clusterDim.y = 1;
        attr[0].val.clusterDim.z = 1;
        cfg.attrs = attr;
        cfg.numAttrs = 1;
    }
};
void allow_cluster_shape(const void* kernel, ClusterShape shape) {
    CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shape.smem));
}

// Runs `launch` once and returns the n stamps it left at d_stamps.
template <typename Launch>
std::vector<unsigned long long> run_and_fetch(Launch launch, unsigned long long* d_stamps, size_t n) {
    std::vector<unsigned long long> h(n);
    launch();
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(h.data(), d_stamps, n * 8, cudaMemcpyDeviceToHost));
    return h;
}

// Median over `reps` runs of the span between the earliest start and the latest end stamp.
template <typename Launch>
double span_us(int reps, int ctas, unsigned long long* d_stamps, Launch launch) {
    std::vector<double> spans;
    for (int r = 0; r < reps; ++r) {
        const auto h = run_and_fetch([&] { launch(r); }, d_stamps, 2 * ctas);
        unsigned long long lo = ~0ULL, hi = 0;
        for (int b = 0; b < ctas; ++b) {
            lo = std::min(lo, h[2 * b]);
            hi = std::max(hi, h[2 * b + 1]);
        }
        if (r > 0) spans.push_back((hi - lo) * 1e-3);
    }
    return median(spans);
}

// Median over `reps` runs of each pair's (end - start), then the median pair.
double pair_us(int reps, int pairs, unsigned long long* d_stamps, void (*launch)(void*), void* arg) {
    std::vector<double> all;
    for (int r = 0; r < reps; ++r) {
        const auto h = run_and_fetch([&] { launch(arg); }, d_stamps, 2 * pairs);
        if (r == 0) continue;
        for (int p = 0; p < pairs; ++p) all.push_back((h[2 * p + 1] - h[2 * p]) * 1e-3);
    }
    return median(all);
}

struct EpArgs {
    float* out;
    float* planes;
    unsigned* counts;
    unsigned long long* stamps;
    int ctas;
};
void launch_cluster(void* a) {
    auto* e = static_cast<EpArgs*>(a);
    epilogue_cluster<<<e->ctas, THREADS>>>(e->out, e->planes, e->stamps);
    CHECK(cudaGetLastError());
}
void launch_counter(void* a) {
    auto* e = static_cast<EpArgs*>(a);
    epilogue_counter<<<e->ctas, THREADS>>>(e->out, e->planes, e->counts, e->stamps);
    CHECK(cudaGetLastError());
}

// Per-kernel time of `n` launches, each enqueued by `enqueue(stream)`, captured in one CUDA graph.
template <typename Enqueue>
double graph_us_per_launch(int n, Enqueue enqueue) {
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < n; ++i) enqueue(s);
    CHECK(cudaStreamEndCapture(s, &g));
    CHECK(cudaGraphInstantiate(&ge, g, 0));
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    std::vector<double> t;
    for (int r = 0; r < 12; ++r) {
        CHECK(cudaEventRecord(a, s));
        CHECK(cudaGraphLaunch(ge, s));
        CHECK(cudaEventRecord(b, s));
        CHECK(cudaEventSynchronize(b));
        float ms;
        CHECK(cudaEventElapsedTime(&ms, a, b));
        if (r > 1) t.push_back(ms * 1e3 / n);
    }
    CHECK(cudaGraphExecDestroy(ge));
    CHECK(cudaGraphDestroy(g));
    CHECK(cudaStreamDestroy(s));
    return median(t);
}

// The same for `kernel<<<ctas, THREADS>>>(sink)`.
template <typename Kernel>
double graph_us_per_kernel(Kernel kernel, int ctas, unsigned* sink, int n) {
    return graph_us_per_launch(n, [&](cudaStream_t s) { kernel<<<ctas, THREADS, 0, s>>>(sink); });
}

int main() {
    int sms = 0;
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    uint4* pool;
    unsigned* sink;
    unsigned long long* stamps;
    CHECK(cudaMalloc(&pool, POOL_BYTES));
    CHECK(cudaMemset(pool, 1, POOL_BYTES));
    CHECK(cudaMalloc(&sink, 4 * THREADS));
    CHECK(cudaMalloc(&stamps, 2 * 8 * 1024));

    std::printf("part 1: streaming a decode matrix with N SMs (one 512-thread CTA each), GPU-clock span\n");
    std::printf("%10s", "MB \\ N");
    const int ns[] = {8, 16, 32, 64, 128, 132};
    for (int n : ns) std::printf(" %15d", n);
    std::printf("\n");
    for (double mb : {2.36, 7.08, 14.16}) {
        std::printf("%10.2f", mb);
        for (int n : ns) {
            const long long slice16 = (long long)(mb * 1e6 / n) / 16;
            const long long bytes = slice16 * 16 * n;
            const long long places = POOL_BYTES / bytes;
            const double us = span_us(24, n, stamps, [&](int r) {
                stream_slices<<<n, THREADS>>>(pool + (r % places) * (bytes / 16), slice16, sink, stamps);
                CHECK(cudaGetLastError());
            });
            std::printf(" %6.2f us %4.0f GB/s", us, bytes / (us * 1e3));
        }
        std::printf("\n");
    }

    std::printf("part 1b: spread of the CTA ends, 128 CTAs streaming equal slices (us after the first start;\n"
                "         medians over 24 launches), and the SMs most often among the last 16 CTAs (sm:launches)\n");
    {
        unsigned* d_sms;
        CHECK(cudaMalloc(&d_sms, 4 * 128));
        for (double mb : {7.08, 14.16, 33.5}) {
            const long long slice16 = (long long)(mb * 1e6 / 128) / 16, bytes = slice16 * 16 * 128;
            const long long places = POOL_BYTES / bytes;
            std::vector<double> med_end, last_end, first_end;
            std::vector<int> late(256, 0);
            for (int r = 0; r < 25; ++r) {
                stream_slices<<<128, THREADS>>>(pool + (r % places) * (bytes / 16), slice16, sink, stamps, d_sms);
                CHECK(cudaGetLastError());
                CHECK(cudaDeviceSynchronize());
                std::vector<unsigned long long> h(256);
                std::vector<unsigned> sm(128);
                CHECK(cudaMemcpy(h.data(), stamps, 256 * 8, cudaMemcpyDeviceToHost));
                CHECK(cudaMemcpy(sm.data(), d_sms, 128 * 4, cudaMemcpyDeviceToHost));
                if (r == 0) continue;
                unsigned long long lo = ~0ULL;
                for (int b = 0; b < 128; ++b) lo = std::min(lo, h[2 * b]);
                std::vector<std::pair<double, unsigned>> ends;
                for (int b = 0; b < 128; ++b) ends.push_back({(h[2 * b + 1] - lo) * 1e-3, sm[b]});
                std::sort(ends.begin(), ends.end());
                first_end.push_back(ends.front().first);
                med_end.push_back(ends[64].first);
                last_end.push_back(ends.back().first);
                for (int i = 112; i < 128; ++i) ++late[ends[i].second & 255];
            }
            std::vector<std::pair<int, int>> top;
            for (int i = 0; i < 256; ++i)
                if (late[i] > 0) top.push_back({-late[i], i});
            std::sort(top.begin(), top.end());
            std::printf("  %6.2f MB: first %.2f / median %.2f / last %.2f us; late SMs", mb, median(first_end),
                        median(med_end), median(last_end));
            for (size_t i = 0; i < top.size() && i < 8; ++i) std::printf(" %d:%d", top[i].second, -top[i].first);
            std::printf("\n");
        }
        CHECK(cudaFree(d_sms));
    }

    std::printf("part 2: one 128-group quantized by its owners (%d CTAs, 32 outputs each)\n", 128);
    EpArgs e{};
    e.ctas = 128;
    CHECK(cudaMalloc(&e.out, 4 * 128 * 32));
    CHECK(cudaMalloc(&e.planes, 4 * 128 * 32));
    CHECK(cudaMalloc(&e.counts, 4 * 32));
    CHECK(cudaMemset(e.counts, 0, 4 * 32));
    e.stamps = stamps;
    const double t_cluster = pair_us(40, 32, stamps, launch_cluster, &e);
    const double t_counter = pair_us(40, 32, stamps, launch_counter, &e);
    std::printf("  cluster of 4, DSMEM: %.2f us from epilogue start to the group's store (median group)\n", t_cluster);
    std::printf("  global counter:      %.2f us from the completing CTA's epilogue start to the store\n", t_counter);
    std::printf("  empty kernel in a graph, 128 CTAs: plain %.2f us, cluster of 4 %.2f us\n",
                graph_us_per_kernel(empty_plain, 128, sink, 200), graph_us_per_kernel(empty_cluster, 128, sink, 200));

    std::printf("part 3: how many clusters fit at once, and two DSMEM exchanges in 128 CTAs\n");
    float* x16;
    CHECK(cudaMalloc(&x16, 4 * 48 * 128));
    const ClusterShape shapes[] = {{16, THREADS, 120 * 1024}, {8, THREADS, 120 * 1024}, {4, THREADS, 120 * 1024},
                                   {2, THREADS, 120 * 1024}, {16, THREADS / 2, 100 * 1024}};
    for (const ClusterShape shape : shapes) {
        allow_cluster_shape(reinterpret_cast<const void*>(exchange_in_cluster), shape);
        allow_cluster_shape(reinterpret_cast<const void*>(empty_in_cluster), shape);
        int clusters = 0;
        {
            ClusterLaunch l(shape, shape.size, nullptr);
            CHECK(cudaOccupancyMaxActiveClusters(&clusters, reinterpret_cast<const void*>(exchange_in_cluster), &l.cfg));
        }
        const int needed = 128 / shape.size;
        std::printf("  clusters of %d CTAs (%d threads, %d KB shared memory each): %d resident at once, %d needed for 128 CTAs\n",
                    shape.size, shape.threads, shape.smem / 1024, clusters, needed);
        if (clusters < needed) continue;  // not one wave: no timing
        std::vector<double> per_cta, slowest;
        for (int r = 0; r < 40; ++r) {
            ClusterLaunch l(shape, 128, nullptr);
            CHECK(cudaLaunchKernelEx(&l.cfg, exchange_in_cluster, x16, stamps));
            CHECK(cudaDeviceSynchronize());
            std::vector<unsigned long long> h(2 * 128);
            CHECK(cudaMemcpy(h.data(), stamps, h.size() * 8, cudaMemcpyDeviceToHost));
            if (r == 0) continue;
            double worst = 0.0;
            for (int b = 0; b < 128; ++b) {
                const double us = (h[2 * b + 1] - h[2 * b]) * 1e-3;
                per_cta.push_back(us);
                worst = std::max(worst, us);
            }
            slowest.push_back(worst);
        }
        const double t_empty = graph_us_per_launch(200, [&](cudaStream_t s) {
            ClusterLaunch l(shape, 128, s);
            CHECK(cudaLaunchKernelEx(&l.cfg, empty_in_cluster, x16, stamps));
        });
        std::printf("    two exchanges: %.2f us per CTA (median), slowest CTA %.2f us (median launch); empty kernel in a graph %.2f us\n",
                    median(per_cta), median(slowest), t_empty);
    }
    return 0;
}

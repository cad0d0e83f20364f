// Microbenchmark: issue rate of the warp-level mma instructions a decode GEMV could use on this
// GPU (bf16 m16n8k16, s8 m16n8k32, b1 m16n8k256 and.popc), plus a check of the b1 fragment layout
// assumed by ptx.cuh (bit j of A register r of lane 4g+t is A[g + 8(r&1)][128(r>>1) + 32t + j];
// B register r is B[128r + 32t + j][g]; C as for every m16n8 shape).
// Build: nvcc -O3 -arch=sm_90 -o mma_rate mma_rate.cu   Run: ./mma_rate
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>
#include <cuda_runtime.h>

#define CHAINS 8
#define ITERS 4096

__device__ __forceinline__ void bmma(int* c, const unsigned* a, unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.and.popc {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void imma(int* c, const unsigned* a, unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void hmma(float* c, const unsigned* a, unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <int KIND>
__global__ void rate(const unsigned* in, int* out, long long* cycles) {
    unsigned a[4], b0 = in[threadIdx.x % 32], b1 = in[32 + threadIdx.x % 32];
    for (int i = 0; i < 4; ++i) a[i] = in[64 + 32 * i + threadIdx.x % 32];
    int ci[CHAINS][4] = {};
    float cf[CHAINS][4] = {};
    __syncthreads();
    long long t0 = clock64();
    for (int it = 0; it < ITERS; ++it) {
#pragma unroll
        for (int c = 0; c < CHAINS; ++c) {
            if (KIND == 0) bmma(ci[c], a, b0, b1);
            else if (KIND == 1) imma(ci[c], a, b0, b1);
            else hmma(cf[c], a, b0, b1);
        }
    }
    __syncthreads();
    long long t1 = clock64();
    int s = 0;
    for (int c = 0; c < CHAINS; ++c) for (int i = 0; i < 4; ++i) s += ci[c][i] + (int)cf[c][i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
    if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
}

__global__ void layout(const unsigned* A, const unsigned* B, int* C) {
    // A: 16 rows x 8 words (256 bits), B: 8 cols x 8 words, C: 16 x 8.
    int lane = threadIdx.x, g = lane / 4, t = lane % 4;
    unsigned a[4];
    for (int r = 0; r < 4; ++r) a[r] = A[(g + 8 * (r & 1)) * 8 + 4 * (r >> 1) + t];
    unsigned b0 = B[g * 8 + t], b1 = B[g * 8 + 4 + t];
    int c[4] = {0, 0, 0, 0};
    bmma(c, a, b0, b1);
    C[g * 8 + 2 * t] = c[0]; C[g * 8 + 2 * t + 1] = c[1];
    C[(g + 8) * 8 + 2 * t] = c[2]; C[(g + 8) * 8 + 2 * t + 1] = c[3];
}

int main() {
    unsigned* in; int* out; long long* cyc;
    cudaMalloc(&in, 4096); cudaMalloc(&out, 1 << 22); cudaMalloc(&cyc, 1 << 16);
    std::vector<unsigned> h(1024);
    for (auto& v : h) v = (unsigned)rand() * 2654435761u;
    cudaMemcpy(in, h.data(), 4096, cudaMemcpyHostToDevice);
    int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    const char* names[3] = {"b1 m16n8k256 and.popc (BMMA)", "s8 m16n8k32 (IMMA)", "bf16 m16n8k16 (HMMA)"};
    const double ops[3] = {16.0 * 8 * 256, 16.0 * 8 * 32, 16.0 * 8 * 16};
    for (int kind = 0; kind < 3; ++kind) {
        for (int warps : {4, 8, 16}) {
            cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
            for (int rep = 0; rep < 2; ++rep) {
                cudaEventRecord(e0);
                if (kind == 0) rate<0><<<sms, 32 * warps>>>(in, out, cyc);
                if (kind == 1) rate<1><<<sms, 32 * warps>>>(in, out, cyc);
                if (kind == 2) rate<2><<<sms, 32 * warps>>>(in, out, cyc);
                cudaEventRecord(e1); cudaEventSynchronize(e1);
            }
            float ms; cudaEventElapsedTime(&ms, e0, e1);
            long long c0; cudaMemcpy(&c0, cyc, 8, cudaMemcpyDeviceToHost);
            double per_sm = (double)warps * CHAINS * ITERS;           // mma per SM
            double cyc_per_mma_subpart = (double)c0 / (per_sm / 4);   // 4 schedulers
            double tops = per_sm * sms * ops[kind] * 2 / (ms * 1e-3) / 1e12;
            printf("%-32s warps/SM %2d: %.2f cycles per mma per scheduler, %.0f T(ops)/s (%.3f ms)\n",
                   names[kind], warps, cyc_per_mma_subpart, tops, ms);
        }
    }
    // b1 layout check against the assumed fragment map.
    std::vector<unsigned> A(128), B(64); std::vector<int> C(128), ref(128);
    for (auto& v : A) v = (unsigned)rand() * 2654435761u ^ (unsigned)rand();
    for (auto& v : B) v = (unsigned)rand() * 2246822519u ^ (unsigned)rand();
    for (int m = 0; m < 16; ++m) for (int n = 0; n < 8; ++n) {
        int s = 0;
        for (int w = 0; w < 8; ++w) s += __builtin_popcount(A[m * 8 + w] & B[n * 8 + w]);
        ref[m * 8 + n] = s;
    }
    unsigned *dA, *dB; int* dC;
    cudaMalloc(&dA, 512); cudaMalloc(&dB, 256); cudaMalloc(&dC, 512);
    cudaMemcpy(dA, A.data(), 512, cudaMemcpyHostToDevice); cudaMemcpy(dB, B.data(), 256, cudaMemcpyHostToDevice);
    layout<<<1, 32>>>(dA, dB, dC);
    cudaMemcpy(C.data(), dC, 512, cudaMemcpyDeviceToHost);
    int bad = 0;
    for (int i = 0; i < 128; ++i) bad += C[i] != ref[i];
    printf("b1 fragment layout (bit j of word w <-> k = 32w + j): %s (%d of 128 outputs differ)\n", bad ? "MISMATCH" : "match", bad);
    printf("cuda: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 0;
}

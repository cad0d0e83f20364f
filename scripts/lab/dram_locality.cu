// Lab: is the 1-bit GEMV's weight stream bound by its DRAM access pattern (kernel-notes round 29)?
// The Q1 LM head streams at ~2.3 TB/s, the Q2 one at ~3.6, both at ~1 us per unit per warp, and
// more bytes in flight did not help the Q1 one (round 28). The binary GEMV's unit is 16 rows x
// 512 k: each lane quad reads 64 contiguous bytes of each row (Q2: 128), rows 512 bytes apart, so
// ~34,000 row streams advance 64 bytes at a time. If each such piece costs a DRAM row activation,
// the activation rate, not the bus, bounds the stream. Same loads, same ring, same instruction
// count per unit, only the addresses differ:
//   row64    the Q1 device layout: per unit 64 B from each of 16 rows, row stride 512 B
//   row128   the Q2 pattern: per unit 128 B from each of 16 rows (two loads per row and lane)
//   tile     each unit's 1 KB contiguous (a tile-contiguous layout)
// each with a ring of 3 units per warp (production) and of 6. 132 CTAs x 16 warps, whole 16-row
// tiles per warp in turn, as gemv_b1_tiles; streaming loads (ld.global.cs) as production.
// Every timed pass reads a fresh 77.8 MB region of a 1.5 GB pool, far beyond the 50 MB L2.
// Build: nvcc -O3 -arch=sm_90 -o dram_locality dram_locality.cu   Run: ./dram_locality
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); std::exit(1); } } while (0)

constexpr int WARPS = 16;
constexpr int ROWS = 151936;                  // the Bonsai LM head's rows (vocab)
constexpr long long ROW_BYTES = 512;          // 4096 weights, one bit each
constexpr long long MATRIX_BYTES = ROWS * ROW_BYTES;
constexpr long long POOL_BYTES = 20 * MATRIX_BYTES;
constexpr int TILE_ROWS = 16;
constexpr int TILES = ROWS / TILE_ROWS;

enum Mode { ROW64 = 0, ROW128 = 1, TILE = 2, TILE2K = 3 };

// Loads per lane and unit: rows g and g + 8 (row128: two 16-byte halves of each).
template <int MODE>
struct Unit {
    static constexpr int LOADS = MODE == ROW128 || MODE == TILE2K ? 4 : 2;
    uint4 v[LOADS];
};

// Byte offset of load i of this lane in unit `u` of tile `tile`.
template <int MODE>
__device__ __forceinline__ long long load_offset(int tile, int u, int i, int lane) {
    const int g = lane / 4, t = lane % 4;
    if (MODE == TILE || MODE == TILE2K) {  // unit-contiguous: 1 (2) KB per unit, 512 B per load
        constexpr int UNIT_BYTES = MODE == TILE ? 1024 : 2048;
        constexpr int UNITS = ROW_BYTES * TILE_ROWS / UNIT_BYTES;
        return ((long long)tile * UNITS + u) * UNIT_BYTES + i * 512 + lane * 16;
    }
    const int row = tile * TILE_ROWS + g + 8 * (i % 2);
    const int piece = MODE == ROW128 ? 128 : 64;
    return (long long)row * ROW_BYTES + (long long)u * piece + (MODE == ROW128 ? (i / 2) * 64 : 0) + t * 16;
}

// How whole tiles are dealt to warps: INTERLEAVED (gemv_b1_tiles: warp w takes w, w + W, ...),
// BLOCKED (warp w takes a contiguous run), SCATTERED (the interleaved order through a
// multiplicative permutation of the tiles: no two neighbouring warps near each other).
enum Map { INTERLEAVED = 0, BLOCKED = 1, SCATTERED = 2 };

template <int MODE, int RING, int MAP = INTERLEAVED>
__global__ void __launch_bounds__(WARPS * 32, 1) stream_units(const char* __restrict__ base, unsigned* sink) {
    constexpr int UNITS = MODE == ROW128 || MODE == TILE2K ? ROW_BYTES / 128 : ROW_BYTES / 64;  // per tile (tile: 8 of 1 KB)
    const int lane = threadIdx.x % 32;
    const int warp = blockIdx.x * WARPS + threadIdx.x / 32, warps = gridDim.x * WARPS;
    const int per_warp = (TILES + warps - 1) / warps;
    const int my_tiles = MAP == BLOCKED ? max(0, min(per_warp, TILES - warp * per_warp))
                                        : (warp < TILES ? (TILES - 1 - warp) / warps + 1 : 0);
    const int total = my_tiles * UNITS;
    auto load = [&](Unit<MODE>& r, int it) {
        if (it >= total) return;
        const int k = it / UNITS, u = it % UNITS;
        int tile = MAP == BLOCKED ? warp * per_warp + k : warp + k * warps;
        if (MAP == SCATTERED) tile = (int)((long long)tile * 7919 % TILES);  // 7919 prime, TILES = 9496
#pragma unroll
        for (int i = 0; i < Unit<MODE>::LOADS; ++i)
            r.v[i] = __ldcs(reinterpret_cast<const uint4*>(base + load_offset<MODE>(tile, u, i, lane)));
    };
    Unit<MODE> ring[RING];
#pragma unroll
    for (int s = 0; s < RING; ++s) load(ring[s], s);
    unsigned acc = 0;
    for (int it = 0; it < total; it += RING) {
#pragma unroll
        for (int s = 0; s < RING; ++s) {
            if (it + s < total) {
#pragma unroll
                for (int i = 0; i < Unit<MODE>::LOADS; ++i) acc ^= ring[s].v[i].x ^ ring[s].v[i].y ^ ring[s].v[i].z ^ ring[s].v[i].w;
                load(ring[s], it + s + RING);
            }
        }
    }
    if (acc == 0x12345678u) sink[warp] = acc;  // keeps the loads; practically never stores
}

// The same stream with each ring slot's loads as cp.async into this warp's shared memory, one
// commit group per slot and `cp.async.wait_group RING - 1` before a slot is read: each wait
// covers exactly the oldest slot (is the register ring's rate set by its waits?).
template <int MODE, int RING>
__global__ void __launch_bounds__(WARPS * 32, 1) stream_units_async(const char* __restrict__ base, unsigned* sink) {
    constexpr int UNITS = MODE == ROW128 || MODE == TILE2K ? ROW_BYTES / 128 : ROW_BYTES / 64;
    constexpr int LOADS = Unit<MODE>::LOADS;
    extern __shared__ uint4 ring_smem[];  // [WARPS][RING][LOADS][32]
    auto ring_at = [&](int w, int slot, int i, int l) -> uint4& { return ring_smem[((w * RING + slot) * LOADS + i) * 32 + l]; };
    const int lane = threadIdx.x % 32, wl = threadIdx.x / 32;
    const int warp = blockIdx.x * WARPS + wl, warps = gridDim.x * WARPS;
    const int my_tiles = warp < TILES ? (TILES - 1 - warp) / warps + 1 : 0;
    const int total = my_tiles * UNITS;
    auto issue = [&](int slot, int it) {
        if (it < total) {
            const int tile = warp + (it / UNITS) * warps, u = it % UNITS;
#pragma unroll
            for (int i = 0; i < LOADS; ++i) {
                const unsigned dst = (unsigned)__cvta_generic_to_shared(&ring_at(wl, slot, i, lane));
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst),
                             "l"(base + load_offset<MODE>(tile, u, i, lane)) : "memory");
            }
        }
        asm volatile("cp.async.commit_group;" ::: "memory");  // empty groups keep the count
    };
#pragma unroll
    for (int s = 0; s < RING; ++s) issue(s, s);
    unsigned acc = 0;
    for (int it = 0; it < total; it += RING) {
#pragma unroll
        for (int s = 0; s < RING; ++s) {
            asm volatile("cp.async.wait_group %0;" ::"n"(RING - 1) : "memory");
            if (it + s < total) {
#pragma unroll
                for (int i = 0; i < LOADS; ++i) {
                    const uint4 v = ring_at(wl, s, i, lane);
                    acc ^= v.x ^ v.y ^ v.z ^ v.w;
                }
            }
            issue(s, it + s + RING);
        }
    }
    if (acc == 0x12345678u) sink[warp] = acc;
}

// Times `launch(base)` (one pass over a fresh region each time): 3 warm-up passes, then the
// median, min and max of 16, printed as a row.
template <class Launch>
static void time_passes(const char* name, int ring, char* pool, Launch launch) {
    const int reps = 16;
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    std::vector<float> ms;
    for (int r = 0; r < reps + 3; ++r) {
        const char* base = pool + (long long)(r % 20) * MATRIX_BYTES;
        CHECK(cudaEventRecord(a));
        launch(base);
        CHECK(cudaGetLastError());
        CHECK(cudaEventRecord(b));
        CHECK(cudaEventSynchronize(b));
        float t;
        CHECK(cudaEventElapsedTime(&t, a, b));
        if (r >= 3) ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    const double med = ms[ms.size() / 2];
    std::printf("%-22s ring %d: median %7.2f us (min %7.2f, max %7.2f), %5.2f TB/s\n", name, ring, med * 1e3, ms.front() * 1e3,
                ms.back() * 1e3, MATRIX_BYTES / (med * 1e-3) / 1e12);
    CHECK(cudaEventDestroy(a));
    CHECK(cudaEventDestroy(b));
}

template <int MODE, int RING>
static void measure_async(const char* name, char* pool, unsigned* sink, int sms) {
    const int smem = WARPS * RING * Unit<MODE>::LOADS * 32 * 16;
    CHECK(cudaFuncSetAttribute(stream_units_async<MODE, RING>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    time_passes(name, RING, pool, [&](const char* base) { stream_units_async<MODE, RING><<<sms, WARPS * 32, smem>>>(base, sink); });
}

template <int MODE, int RING, int MAP = INTERLEAVED>
static void measure(const char* name, char* pool, unsigned* sink, int sms) {
    time_passes(name, RING, pool, [&](const char* base) { stream_units<MODE, RING, MAP><<<sms, WARPS * 32>>>(base, sink); });
}

int main() {
    int sms = 0;
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    char* pool;
    unsigned* sink;
    CHECK(cudaMalloc(&pool, POOL_BYTES));
    CHECK(cudaMemset(pool, 0x5a, POOL_BYTES));
    CHECK(cudaMalloc(&sink, sizeof(unsigned) * sms * WARPS));
    std::printf("dram_locality: %d SMs x %d warps, %.1f MB per pass (%d rows x %lld B), fresh region each pass\n", sms, WARPS,
                MATRIX_BYTES / 1e6, ROWS, ROW_BYTES);
    for (int round = 0; round < 2; ++round) {
        measure_async<ROW64, 3>("row64 cp.async", pool, sink, sms);
        measure_async<ROW64, 6>("row64 cp.async", pool, sink, sms);
        measure_async<ROW128, 3>("row128 cp.async", pool, sink, sms);
        measure<ROW64, 3>("row64", pool, sink, sms);
        measure<ROW128, 3>("row128", pool, sink, sms);
        measure<TILE, 3>("tile", pool, sink, sms);
        measure<ROW64, 6>("row64", pool, sink, sms);
        measure<ROW128, 6>("row128", pool, sink, sms);
        measure<TILE, 6>("tile", pool, sink, sms);
        measure<ROW128, 2>("row128", pool, sink, sms);
        measure<TILE2K, 2>("tile2k", pool, sink, sms);
        measure<TILE2K, 3>("tile2k", pool, sink, sms);
        measure<ROW64, 3, BLOCKED>("row64 blocked", pool, sink, sms);
        measure<ROW64, 3, SCATTERED>("row64 scattered", pool, sink, sms);
        measure<ROW128, 3, BLOCKED>("row128 blocked", pool, sink, sms);
        measure<ROW128, 3, SCATTERED>("row128 scattered", pool, sink, sms);
        measure<TILE, 3, BLOCKED>("tile blocked", pool, sink, sms);
        measure<TILE, 3, SCATTERED>("tile scattered", pool, sink, sms);
        measure<TILE, 6, BLOCKED>("tile blocked", pool, sink, sms);
    }
    // A plain copy of the same bytes (read + write), the ceiling the bench quotes.
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    std::vector<float> ms;
    for (int r = 0; r < 8; ++r) {
        CHECK(cudaEventRecord(a));
        CHECK(cudaMemcpyAsync(pool + 10 * MATRIX_BYTES, pool + (r % 8) * MATRIX_BYTES, MATRIX_BYTES, cudaMemcpyDeviceToDevice));
        CHECK(cudaEventRecord(b));
        CHECK(cudaEventSynchronize(b));
        float t;
        CHECK(cudaEventElapsedTime(&t, a, b));
        ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    std::printf("copy       : median %7.2f us, %5.2f TB/s read + write\n", ms[4] * 1e3, 2.0 * MATRIX_BYTES / (ms[4] * 1e-3) / 1e12);
    return 0;
}

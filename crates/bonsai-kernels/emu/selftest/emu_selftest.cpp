// Self-test of the emulator's execution model, built and run by `bash scripts/emu.sh --selftest`
// (and by crates/bonsai-cli/tests/emulated_gpu.rs): shuffle/vote semantics, barriers with exited
// threads, per-CTA shared memory on several OS threads, cooperative launches whose CTAs meet at
// a grid-wide barrier (grid_barrier_sync below), and the kernel-bug reports (deadlock,
// shuffle outside the mask, lanes at different collectives, a failed CTA of a cooperative grid),
// and the posed devices of BONSAI_EMU_ARCH (emu_device.h) through the fake driver.
// Exits 1 naming each failed case.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "emu_device.h"
#include "emu_grid.h"
#include "emu_table.h"
#include "fake_cuda.h"

typedef unsigned int u32;

// A grid-wide barrier for a cooperative launch, on the emulator's release / acquire halves
// (emu_ptx.h). `counter` starts at zero; barrier number b (0, 1, ...) of the launch is
// grid_barrier_sync(counter, (b + 1) * CTAs), called by every thread of every CTA. The first
// __syncthreads orders the CTA's writes before thread 0's release add; thread 0 spins until its
// acquire load sees every CTA's arrival; the second __syncthreads orders that acquire before the
// CTA's later reads.
__device__ __forceinline__ void grid_barrier_sync(unsigned* counter, unsigned target) {
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
        red_release_gpu_add(counter, 1);
        while (ld_acquire_gpu(counter) < target) {
        }
    }
    __syncthreads();
}

// ---- kernels ----
extern "C" __global__ void shuffles(int* out) {
    const int lane = threadIdx.x;
    const int v = lane * 10;
    out[0 * 32 + lane] = __shfl_xor_sync(0xffffffffu, v, 1);
    out[1 * 32 + lane] = __shfl_xor_sync(0xffffffffu, v, 16);
    out[2 * 32 + lane] = __shfl_down_sync(0xffffffffu, v, 1);
    out[3 * 32 + lane] = __shfl_up_sync(0xffffffffu, v, 3);
    out[4 * 32 + lane] = __shfl_sync(0xffffffffu, v, 5, 8);  // lane 5 of each group of 8
    out[5 * 32 + lane] = __shfl_down_sync(0xffffffffu, v, 2, 16);
    out[6 * 32 + lane] = (int)__ballot_sync(0xffffffffu, lane % 3 == 0);
    out[7 * 32 + lane] = __any_sync(0xffffffffu, lane == 17) + 2 * __all_sync(0xffffffffu, lane < 32);
    // A partial mask: only even lanes take part.
    if (lane % 2 == 0) out[8 * 32 + lane] = __shfl_xor_sync(0x55555555u, v, 2);
}

// Threads 40.. exit at once; the rest meet at two barriers (exited threads do not count).
extern "C" __global__ void barrier_after_exit(int* out) {
    __shared__ int sum;
    if (threadIdx.x >= 40) return;
    if (threadIdx.x == 0) sum = 0;
    __syncthreads();
    atomicAdd(&sum, 1);
    __syncthreads();
    out[threadIdx.x] = sum;
}

// Every CTA stores its index in static and dynamic shared memory and reads it back after a barrier.
extern "C" __global__ void shared_per_cta(int* out) {
    __shared__ int mine[4];
    int* dynamic = reinterpret_cast<int*>(emu_dynamic_smem());
    if (threadIdx.x < 4) mine[threadIdx.x] = (int)blockIdx.x;
    if (threadIdx.x == 0) dynamic[0] = (int)blockIdx.x * 7;
    __syncthreads();
    for (int i = 0; i < 1000; ++i) __syncwarp();  // many switches while other CTAs run
    out[blockIdx.x * blockDim.x + threadIdx.x] = mine[threadIdx.x % 4] * 1000 + dynamic[0];
}

// Lanes 0-15 wait at a full-warp shuffle, lanes 16-31 at the CTA barrier: a deadlock.
extern "C" __global__ void deadlock(int* out) {
    if (threadIdx.x < 16) out[threadIdx.x] = __shfl_sync(0xffffffffu, 1, 0);
    else __syncthreads();
}

// Lane 0 reads lane 1, which is not in the mask.
extern "C" __global__ void shuffle_outside_mask(int* out) {
    if (threadIdx.x % 2 == 0) out[threadIdx.x] = __shfl_sync(0x55555555u, 1, 1);
}

extern "C" __global__ void mixed_collectives(int* out) {
    if (threadIdx.x < 16) out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1, 1);
    else out[threadIdx.x] = (int)__ballot_sync(0xffffffffu, 1);
}

// cp.async lands at the wait covering its group, not before. out[8..11] hold the source.
extern "C" __global__ void async_copies(int* out) {
    __shared__ __align__(16) int copied[4];
    __shared__ __align__(16) int zeroed[4];
    for (int i = 0; i < 4; ++i) copied[i] = zeroed[i] = -1;
    cp_async16(copied, out + 8);
    cp_async_commit();
    out[0] = copied[0];  // not landed yet: -1
    cp_async16_zfill(zeroed, out + 8, false);
    cp_async_commit();
    cp_async_wait<1>();  // the first group has landed, the second need not have
    out[1] = copied[0];
    out[2] = zeroed[0];
    cp_async_wait<0>();
    out[3] = zeroed[0];
}

// Thread 1 reads what thread 0 writes with no barrier between: a race the schedule decides.
extern "C" __global__ void racy_read(int* out) {
    int* x = reinterpret_cast<int*>(emu_dynamic_smem());  // starts as 0xffffffff = -1 each CTA
    if (threadIdx.x == 0) x[0] = 1;
    if (threadIdx.x == 1) out[0] = x[0];
}

// Cooperative: out[0] is the barrier counter, out[1..1+N) one slot per thread of the grid,
// out[1+N..1+2N) per thread the number of rounds in which it read another CTA's slot right.
constexpr int kBarrierRounds = 5;
extern "C" __global__ void grid_barrier(int* out) {
    unsigned* counter = reinterpret_cast<unsigned*>(out);
    const int threads = (int)blockDim.x, ctas = (int)gridDim.x, n = threads * ctas;
    int* slots = out + 1;
    const int me = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    // Thread t + 1 of the next CTA: written on another OS thread.
    const int other = (int)((blockIdx.x + 1) % gridDim.x) * threads + (int)(threadIdx.x + 1) % threads;
    int right = 0;
    for (int r = 0; r < kBarrierRounds; ++r) {
        slots[me] = r * n + me;
        grid_barrier_sync(counter, (unsigned)((2 * r + 1) * ctas));
        right += slots[other] == r * n + other;
        grid_barrier_sync(counter, (unsigned)((2 * r + 2) * ctas));
    }
    out[1 + n + me] = right;
}

// Cooperative: CTA 2 deadlocks (lanes 0-15 at a shuffle, the rest at the grid barrier's
// __syncthreads) while the other CTAs wait for it at the grid barrier: the launch must fail with
// CTA 2's report.
extern "C" __global__ void grid_barrier_one_cta_fails(int* out) {
    if (blockIdx.x == 2 && threadIdx.x < 16) out[1] = __shfl_sync(0xffffffffu, 1, 0);
    grid_barrier_sync(reinterpret_cast<unsigned*>(out), gridDim.x);
}

// A Hopper-only instruction: fails the launch unless the emulator poses as sm_90.
extern "C" __global__ void hopper_only(int* out) {
    wgmma_fence();
    out[0] = 1;
}

// Writes the last of out[0] bytes of dynamic shared memory, then out[1] = 1.
extern "C" __global__ void touch_dynamic(int* out) {
    unsigned char* dynamic = emu_dynamic_smem();
    if (threadIdx.x == 0) {
        dynamic[out[0] - 1] = 1;
        out[1] = 1;
    }
}

// The fake driver's kernel table (scripts/emu.sh generates the library's from the registry).
extern "C" const emu::KernelEntry* emu_kernel_table(size_t* count) {
    static const emu::KernelEntry table[] = {EMU_KERNEL(touch_dynamic)};
    *count = sizeof(table) / sizeof(table[0]);
    return table;
}

// The fake driver's calls the posed-device cases make (fake_cuda*.cpp).
extern "C" {
CUresult cuDeviceGetAttribute(int* value, int which, CUdevice device);
CUresult cuModuleLoadData(CUmodule* module, const void* image);
CUresult cuModuleGetFunction(CUfunction* f, CUmodule module, const char* name);
CUresult cuFuncSetAttribute(CUfunction f, int which, int value);
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned smem, CUstream stream, void** params, void** extra);
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, CUfunction f, int block_size, size_t smem);
}

// ---- harness ----
namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
    if (!ok) {
        std::printf("FAIL %s\n", what.c_str());
        ++failures;
    }
}

std::string launch(const char* name, void (*kernel)(int*), std::vector<int>& out, emu::EmuDim3 grid,
                   emu::EmuDim3 block, size_t smem = 0, bool cooperative = false) {
    static void (*current)(int*) = nullptr;
    current = kernel;
    int* data = out.data();
    void* args[] = {&data};
    const emu::GridLaunch l{name, [](void** a) { current(*static_cast<int**>(a[0])); }, args, grid, block, smem,
                            cooperative};
    return emu::run_grid(l);
}

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

}  // namespace

int main() {
    std::vector<int> out(9 * 32, -1);
    expect(launch("shuffles", shuffles, out, {1, 1, 1}, {32, 1, 1}).empty(), "shuffles ran");
    for (int l = 0; l < 32; ++l) {
        const std::string at = " at lane " + std::to_string(l);
        expect(out[l] == (l ^ 1) * 10, "xor 1" + at);
        expect(out[32 + l] == (l ^ 16) * 10, "xor 16" + at);
        expect(out[64 + l] == (l < 31 ? l + 1 : l) * 10, "down 1 (last lane keeps its own)" + at);
        expect(out[96 + l] == (l >= 3 ? l - 3 : l) * 10, "up 3 (first lanes keep their own)" + at);
        expect(out[128 + l] == ((l & ~7) + 5) * 10, "index 5 within width 8" + at);
        expect(out[160 + l] == ((l % 16) + 2 < 16 ? l + 2 : l) * 10, "down 2 within width 16" + at);
        expect((u32)out[192 + l] == 0x49249249u, "ballot of lane % 3 == 0" + at);
        expect(out[224 + l] == 3, "any and all" + at);
        if (l % 2 == 0) expect(out[256 + l] == (l ^ 2) * 10, "xor 2 among even lanes" + at);
    }

    std::vector<int> sums(64, -1);
    expect(launch("barrier_after_exit", barrier_after_exit, sums, {1, 1, 1}, {64, 1, 1}).empty(),
           "barrier with exited threads completes");
    for (int t = 0; t < 40; ++t) expect(sums[t] == 40, "40 threads counted at thread " + std::to_string(t));

    const int ctas = 16, threads = 64;
    std::vector<int> shared(ctas * threads, -1);
    expect(launch("shared_per_cta", shared_per_cta, shared, {ctas, 1, 1}, {threads, 1, 1}, 64).empty(),
           "shared_per_cta ran");
    for (int i = 0; i < ctas * threads; ++i)
        expect(shared[i] == (i / threads) * 1007, "CTA-private shared memory at " + std::to_string(i));

    std::vector<int> copies(12, 0);
    for (int i = 0; i < 4; ++i) copies[8 + i] = 100 + i;
    expect(launch("async_copies", async_copies, copies, {1, 1, 1}, {1, 1, 1}).empty(), "async_copies ran");
    expect(copies[0] == -1 && copies[1] == 100, "cp.async lands at its wait, not before");
    expect(copies[2] == -1 && copies[3] == 0, "zfill lands at the wait covering its group");

    std::vector<int> race(1, 0);
    expect(launch("racy_read", racy_read, race, {1, 1, 1}, {2, 1, 1}, 16).empty(), "racy_read ran");
    const char* schedule = std::getenv("BONSAI_EMU_SCHEDULE");
    const bool reverse = schedule && std::string(schedule) == "reverse";
    expect(race[0] == (reverse ? -1 : 1), "the schedule decides the race (thread 0 first unless reverse)");

    {
        const unsigned ctas = 6, threads = 64, n = ctas * threads;
        std::vector<int> grid(1 + 2 * n, -1);
        grid[0] = 0;
        expect(launch("grid_barrier", grid_barrier, grid, {ctas, 1, 1}, {threads, 1, 1}, 0, true).empty(),
               "grid_barrier ran (cooperative, 6 CTAs)");
        expect(grid[0] == 2 * kBarrierRounds * (int)ctas, "grid barrier counter = 2 x rounds x CTAs");
        for (unsigned i = 0; i < n; ++i)
            expect(grid[1 + n + i] == kBarrierRounds, "the grid barrier orders another CTA's write at thread " + std::to_string(i));
        grid[0] = 0;
        const std::string failed = launch("grid_barrier_one_cta_fails", grid_barrier_one_cta_fails, grid, {ctas, 1, 1},
                                          {threads, 1, 1}, 0, true);
        expect(contains(failed, "deadlock in kernel grid_barrier_one_cta_fails block (2,0,0)"),
               "a failed CTA of a cooperative grid is reported, its waiting peers give up: " + failed);
        const std::string too_many = launch("grid_barrier", grid_barrier, grid,
                                            {(unsigned)emu::kMaxCooperativeCtas + 1, 1, 1}, {32, 1, 1}, 0, true);
        expect(contains(too_many, "over the emulator's limit"), "cooperative grid over the limit refused: " + too_many);
    }

    std::vector<int> scratch(64, 0);
    const std::string dead = launch("deadlock", deadlock, scratch, {1, 1, 1}, {32, 1, 1});
    expect(contains(dead, "deadlock in kernel deadlock block (0,0,0)") && contains(dead, "16-31 wait at __syncthreads") &&
               contains(dead, "threads 0-15 wait at __shfl_sync"),
           "deadlock report: " + dead);
    const std::string outside = launch("shuffle_outside_mask", shuffle_outside_mask, scratch, {1, 1, 1}, {32, 1, 1});
    expect(contains(outside, "shuffle reads a lane that is not in its mask"), "outside-mask report: " + outside);
    const std::string mixed = launch("mixed_collectives", mixed_collectives, scratch, {1, 1, 1}, {32, 1, 1});
    expect(contains(mixed, "different collectives"), "mixed-collective report: " + mixed);
    // After faults the emulator still runs kernels.
    expect(launch("shuffles", shuffles, out, {1, 1, 1}, {32, 1, 1}).empty(), "runs again after faults");

    // The posed device (BONSAI_EMU_ARCH): its attributes, its shared-memory limits in the launch
    // checks and the occupancy calculator, and sm_90a-only instructions failing elsewhere.
    {
        CUmodule module = nullptr;
        CUfunction f = nullptr;
        expect(cuModuleLoadData(&module, nullptr) == CUDA_SUCCESS &&
                   cuModuleGetFunction(&f, module, "touch_dynamic") == CUDA_SUCCESS,
               "the fake driver finds touch_dynamic");
        const emu::DeviceSpec initial = emu::device();
        const struct {
            int arch, sms, optin, threads_per_sm;
        } poses[] = {{80, 108, 166912, 2048}, {86, 82, 101376, 1536}, {89, 128, 101376, 1536},
                     {90, 132, 232448, 2048}, {100, 148, 232448, 2048}, {120, 170, 101376, 1536}};
        for (const auto& p : poses) {
            const std::string as = " posed as sm_" + std::to_string(p.arch);
            expect(emu::pose_as(p.arch), "pose_as" + as);
            int major = -1, minor = -1, sms = -1, optin = -1, threads = -1;
            cuDeviceGetAttribute(&major, 75, 0);
            cuDeviceGetAttribute(&minor, 76, 0);
            cuDeviceGetAttribute(&sms, 16, 0);
            cuDeviceGetAttribute(&optin, 97, 0);
            cuDeviceGetAttribute(&threads, 39, 0);
            expect(major * 10 + minor == p.arch && sms == p.sms && optin == p.optin && threads == p.threads_per_sm,
                   "device attributes" + as);
            expect(cuFuncSetAttribute(f, 8, optin + 1) == CUDA_ERROR_INVALID_VALUE,
                   "opting in to more shared memory than the device has fails" + as);
            expect(cuFuncSetAttribute(f, 8, optin) == CUDA_SUCCESS, "opting in to all of it succeeds" + as);
            std::vector<int> args = {optin, 0};
            int* data = args.data();
            void* params[] = {&data};
            expect(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, (unsigned)optin, nullptr, params, nullptr) == CUDA_SUCCESS &&
                       args[1] == 1,
                   "a launch with all the opt-in shared memory runs" + as);
            expect(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, (unsigned)optin + 16, nullptr, params, nullptr) ==
                       CUDA_ERROR_INVALID_VALUE,
                   "a launch over the opt-in limit fails" + as);
            int blocks = -1;
            cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f, 1024, 0);
            expect(blocks == p.threads_per_sm / 1024, "1024-thread CTAs per SM" + as);
            cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f, 128, (size_t)optin);
            expect(blocks == 1, "one CTA with all the shared memory per SM" + as);
            cuFuncSetAttribute(f, 8, emu::kDefaultSmemPerBlock);

            std::vector<int> flag(1, 0);
            const std::string fault = launch("hopper_only", hopper_only, flag, {1, 1, 1}, {128, 1, 1});
            if (p.arch == 90)
                expect(fault.empty() && flag[0] == 1, "wgmma runs" + as + ": " + fault);
            else
                expect(contains(fault, "wgmma.fence (wgmma_fence) is an sm_90a instruction") && flag[0] == 0,
                       "wgmma fails the launch" + as + ": " + fault);
        }
        expect(!emu::pose_as(75), "no sm_75 pose");
        emu::pose_as(initial.arch);
    }

    std::printf("emu selftest: %s (%d failure(s))\n", failures ? "FAILED" : "ok", failures);
    return failures ? 1 : 0;
}

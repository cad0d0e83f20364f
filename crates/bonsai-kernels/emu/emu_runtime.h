// The interface between the emulated device code (cuda_emu.h, compiled into the kernel
// translation unit) and the emulator's scheduler (emu_sched.cpp): who is running now, and the
// collectives that make a fiber wait for its warp or its CTA.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace emu {

// CUDA's built-in index types.
struct EmuDim3 {
    unsigned x, y, z;
};

constexpr int kWarpSize = 32;

// A thread's cp.async copies in flight. They land only when a cp.async.wait_group covers their
// group (or the thread exits), so a kernel that reads shared memory before waiting reads stale
// data here, as it may on the GPU.
struct AsyncCopies {
    struct Copy {
        void* dst;
        const void* src;  // null: zero-fill
        unsigned bytes;
        unsigned long long group;
    };
    std::vector<Copy> pending;  // in issue order, so in group order
    unsigned long long committed = 0;  // groups committed so far; uncommitted copies get this id

    void issue(void* dst, const void* src, unsigned bytes) { pending.push_back(Copy{dst, src, bytes, committed}); }
    void commit() { ++committed; }
    // Completes every copy of the groups older than the newest `keep` committed ones.
    void wait(unsigned long long keep) {
        const unsigned long long done_below = committed > keep ? committed - keep : 0;
        size_t n = 0;
        while (n < pending.size() && pending[n].group < done_below) ++n;
        land(n);
    }
    void land(size_t n);  // performs and drops the first n pending copies
};

// One emulated GPU thread (a fiber).
struct ThreadState {
    EmuDim3 thread_idx;
    int linear;  // x + y * bx + z * bx * by
    int lane;
    int warp;
    AsyncCopies copies;
    // The last ld_acquire_gpu: its address, the value it read and since when (clock_ns) it has
    // read that value there (acquire_polled).
    const void* poll_addr;
    unsigned poll_value;
    long long poll_since_ns;
};

// One CTA being executed on the current OS thread.
struct CtaState {
    EmuDim3 block_idx;
    EmuDim3 block_dim;
    EmuDim3 grid_dim;
    unsigned char* dynamic_smem;  // `extern __shared__` storage, 128-byte aligned
    const char* kernel_name;
    unsigned long long serial;  // distinct for every CTA this OS thread runs (never 0)
};

// The fiber running now and its CTA. (Not initial-exec: the library's TLS block holds every
// kernel's __shared__ arrays, far too big for the static TLS a dlopen()ed library may use.)
extern __thread ThreadState* t_thread;
extern __thread CtaState* t_cta;

// A warp collective: every lane named in `mask` arrives with a pointer to its own operands
// (living on its fiber stack, valid while it waits); the last lane to arrive calls
// `complete(lanes, mask)` once, where lanes[l] is lane l's pointer (null for lanes not in the
// mask), and every participant resumes afterwards. `what` names the operation in error reports;
// lanes meeting at one collective must agree on `complete` and `mask`.
using CompleteFn = void (*)(void* const* lanes, uint32_t mask);
void warp_collective(uint32_t mask, void* operands, CompleteFn complete, const char* what);

// __syncthreads(): waits for every not-yet-exited thread of the CTA.
void block_barrier();

// Reports a kernel bug found by the emulator (e.g. a shuffle from a lane outside the mask) and
// fails the launch; does not return.
[[noreturn]] void kernel_fault(const char* what);

// Called by ld_acquire_gpu after its load of `value` from `addr`, usually inside a spin loop that
// waits for another CTA (a grid barrier): lets the CTA's other fibers run, and fails the launch (as
// kernel_fault) when the wait cannot end: another CTA of the cooperative launch has failed, or
// this thread has read the same value at the same address for kAcquireStallSeconds.
void acquire_polled(const void* addr, unsigned value);
constexpr long long kAcquireStallSeconds = 120;

// Nanoseconds of a monotonic clock (clock64 stand-in).
long long clock_ns();

}  // namespace emu

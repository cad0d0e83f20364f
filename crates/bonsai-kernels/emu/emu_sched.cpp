// The emulator's execution engine: CTAs on a small pool of OS threads (a cooperative grid: one
// OS thread per CTA, emu_coop.cpp), each CTA's threads as cooperative fibers on one OS thread
// that switch only at synchronisation points (and at ld_acquire_gpu: acquire_polled).
//
// A fiber runs until it reaches __syncthreads or a warp collective, or exits. A warp collective
// completes when every lane of its mask has arrived (the last one computes all results); the
// CTA barrier completes when every not-yet-exited thread has arrived. If no fiber can run and
// some have not exited, the kernel deadlocked: the launch fails with a report of who waits where.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

#include "emu_cta.h"
#include "emu_fiber.h"
#include "emu_pool.h"

namespace emu {

__thread ThreadState* t_thread = nullptr;
__thread CtaState* t_cta = nullptr;

namespace {

constexpr int kMaxThreadsPerBlock = 1024;
constexpr size_t kDefaultStackKiB = 128;
constexpr size_t kSmemAlignment = 128;
// Fresh dynamic shared memory is filled with this byte (f32 NaN), so reading it unwritten shows.
constexpr int kSmemPoison = 0xff;

enum class Status { Runnable, AtWarpCollective, AtBarrier, Exited };

struct Fiber {
    FiberContext context;
    ThreadState state;
    Status status = Status::Exited;
};

// The lanes of one warp gathering at a collective.
struct WarpMeeting {
    uint32_t arrived = 0;
    uint32_t mask = 0;
    CompleteFn complete = nullptr;
    const char* what = nullptr;
    void* operands[kWarpSize] = {};
};

size_t stack_bytes() {
    const char* env = std::getenv("BONSAI_EMU_STACK_KB");
    const size_t kib = env && std::atoi(env) > 0 ? (size_t)std::atoi(env) : kDefaultStackKiB;
    return kib * 1024;
}

// Everything one OS thread needs to run CTAs.
struct Worker {
    std::vector<unsigned char*> stacks;
    size_t stack_size = stack_bytes();
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    std::unique_ptr<Fiber[]> fibers{new Fiber[kMaxThreadsPerBlock]};
    WarpMeeting warps[kMaxThreadsPerBlock / kWarpSize];
    FiberContext scheduler;
    int n_threads = 0;
    int live = 0;
    int barrier_arrived = 0;
    int current = -1;
    CtaState cta{};
    std::vector<unsigned char> smem;
    const GridLaunch* launch = nullptr;
    bool faulted = false;
    std::string fault;
    std::vector<int> order;  // the fibers in the order one scheduling pass visits them
    unsigned long long cta_serial = 0;
    // Set while this worker runs a CTA of a cooperative launch: true once another CTA of it failed.
    const std::atomic<bool>* cooperative_failed = nullptr;

    Worker() = default;
    Worker(const Worker&) = delete;
    Worker& operator=(const Worker&) = delete;
    ~Worker() {
        for (unsigned char* s : stacks) munmap(s - page, stack_size + page);
    }

    // Stack of fiber i, with a guard page below it (an overflow faults instead of corrupting).
    unsigned char* stack(int i) {
        while ((int)stacks.size() <= i) {
            void* p = mmap(nullptr, stack_size + page, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (p == MAP_FAILED) {
                std::fprintf(stderr, "bonsai emu: cannot map a fiber stack\n");
                std::abort();
            }
            mprotect(p, page, PROT_NONE);
            stacks.push_back(static_cast<unsigned char*>(p) + page);
        }
        return stacks[i];
    }
    Fiber& me() { return fibers[current]; }
};

// In which order one pass over a CTA's fibers runs them (BONSAI_EMU_SCHEDULE). Racy code
// (a missing barrier) behaves differently under different orders, so running more than one
// exposes more: `forward` (thread 0 first, the default), `reverse`, or `shuffle[:SEED]` (warps in
// a fresh seeded order each pass, lanes of a warp in order).
struct Schedule {
    enum class Kind { Forward, Reverse, Shuffle } kind = Kind::Forward;
    unsigned long long seed = 0;

    static unsigned long long next(unsigned long long* state) {  // SplitMix64
        unsigned long long z = (*state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }

    void fill(std::vector<int>& order, int n, unsigned long long* state) const {
        order.resize((size_t)n);
        for (int i = 0; i < n; ++i) order[(size_t)i] = kind == Kind::Reverse ? n - 1 - i : i;
        if (kind != Kind::Shuffle) return;
        const int warps = (n + kWarpSize - 1) / kWarpSize;
        int warp_order[kMaxThreadsPerBlock / kWarpSize];
        for (int i = 0; i < warps; ++i) warp_order[i] = i;
        for (int i = warps - 1; i > 0; --i) std::swap(warp_order[i], warp_order[next(state) % (unsigned)(i + 1)]);
        size_t at = 0;
        for (int i = 0; i < warps; ++i)
            for (int t = warp_order[i] * kWarpSize; t < std::min(n, (warp_order[i] + 1) * kWarpSize); ++t) order[at++] = t;
    }
};

const Schedule& schedule_from_env() {
    static const Schedule schedule = [] {
        Schedule s;
        const char* env = std::getenv("BONSAI_EMU_SCHEDULE");
        const std::string value = env ? env : "forward";
        if (value == "reverse") s.kind = Schedule::Kind::Reverse;
        else if (value.rfind("shuffle", 0) == 0) {
            s.kind = Schedule::Kind::Shuffle;
            if (value.size() > 8 && value[7] == ':') s.seed = std::strtoull(value.c_str() + 8, nullptr, 10);
        } else if (value != "forward") {
            std::fprintf(stderr, "bonsai emu: BONSAI_EMU_SCHEDULE=%s is not forward, reverse or shuffle[:SEED]\n", value.c_str());
            std::abort();
        }
        return s;
    }();
    return schedule;
}

thread_local Worker* t_worker = nullptr;

Worker& worker() {
    // Lives as long as its OS thread: pool threads never end; a cooperative launch's own threads
    // free theirs (release_worker) before they end.
    if (!t_worker) t_worker = new Worker();
    return *t_worker;
}

std::string where(const Worker& w) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "kernel %s block (%u,%u,%u)", w.launch->kernel_name, w.cta.block_idx.x,
                  w.cta.block_idx.y, w.cta.block_idx.z);
    return buf;
}

// Compact list of thread indices: "0-31,64,66-95".
std::string ranges(const std::vector<int>& ids) {
    std::string out;
    for (size_t i = 0; i < ids.size();) {
        size_t j = i;
        while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
        if (!out.empty()) out += ",";
        out += std::to_string(ids[i]);
        if (j > i) out += "-" + std::to_string(ids[j]);
        i = j + 1;
    }
    return out;
}

std::string deadlock_report(Worker& w) {
    std::vector<int> at_barrier, exited;
    std::string warps;
    for (int i = 0; i < w.n_threads; ++i) {
        if (w.fibers[i].status == Status::AtBarrier) at_barrier.push_back(i);
        if (w.fibers[i].status == Status::Exited) exited.push_back(i);
    }
    for (int warp = 0; warp * kWarpSize < w.n_threads; ++warp) {
        const WarpMeeting& m = w.warps[warp];
        if (!m.arrived) continue;
        std::vector<int> lanes;
        for (int l = 0; l < kWarpSize; ++l)
            if (m.arrived >> l & 1u) lanes.push_back(warp * kWarpSize + l);
        char buf[160];
        std::snprintf(buf, sizeof buf, "; threads %s wait at %s (mask 0x%08x) for the rest of warp %d",
                      ranges(lanes).c_str(), m.what, m.mask, warp);
        warps += buf;
    }
    std::string report = "deadlock in " + where(w) + " (" + std::to_string(w.n_threads) + " threads)";
    if (!at_barrier.empty()) report += "; threads " + ranges(at_barrier) + " wait at __syncthreads";
    report += warps;
    if (!exited.empty()) report += "; threads " + ranges(exited) + " have exited";
    return report;
}

// Back to the scheduler; returns when this fiber is resumed.
void yield(Status status) {
    Worker& w = worker();
    Fiber& f = w.me();
    f.status = status;
    fiber_switch(&f.context, &w.scheduler);
}

void release_barrier(Worker& w) {
    for (int i = 0; i < w.n_threads; ++i)
        if (w.fibers[i].status == Status::AtBarrier) w.fibers[i].status = Status::Runnable;
    w.barrier_arrived = 0;
}

void fiber_main(void*) {
    Worker& w = worker();
    w.launch->thunk(w.launch->args);
    AsyncCopies& copies = w.me().state.copies;
    copies.land(copies.pending.size());  // an exiting thread's copies still land
    w.live -= 1;
    // An exiting thread no longer holds back the CTA barrier.
    if (w.barrier_arrived > 0 && w.barrier_arrived == w.live) release_barrier(w);
    yield(Status::Exited);
    std::abort();  // an exited fiber is never resumed
}

// Runs one CTA to completion on this OS thread; false (with w.fault set) on a kernel bug.
bool run_cta(Worker& w, EmuDim3 block_idx) {
    const GridLaunch& l = *w.launch;
    w.cta.block_idx = block_idx;
    w.cta.serial = ++w.cta_serial;
    w.n_threads = (int)(l.block.x * l.block.y * l.block.z);
    w.live = w.n_threads;
    w.barrier_arrived = 0;
    for (auto& m : w.warps) m.arrived = 0;
    if (l.dynamic_smem_bytes) std::memset(w.cta.dynamic_smem, kSmemPoison, l.dynamic_smem_bytes);
    for (int i = 0; i < w.n_threads; ++i) {
        Fiber& f = w.fibers[i];
        const unsigned x = i % l.block.x, y = (i / l.block.x) % l.block.y, z = i / (l.block.x * l.block.y);
        f.state.thread_idx = EmuDim3{x, y, z};
        f.state.linear = i;
        f.state.lane = i % kWarpSize;
        f.state.warp = i / kWarpSize;
        f.state.copies.pending.clear();
        f.state.copies.committed = 0;
        f.state.poll_addr = nullptr;
        f.state.poll_value = 0;
        f.state.poll_since_ns = 0;
        f.status = Status::Runnable;
#if defined(__SANITIZE_ADDRESS__)
        // The previous CTA's fibers were abandoned mid-frame: clear their stack redzones.
        __asan_unpoison_memory_region(w.stack(i), w.stack_size);
#endif
        fiber_init(&f.context, w.stack(i), w.stack_size, fiber_main, nullptr);
    }
    t_cta = &w.cta;
    const Schedule& schedule = schedule_from_env();
    std::vector<int>& order = w.order;
    unsigned long long stream = schedule.seed ^ (((unsigned long long)block_idx.z << 42) |
                                                 ((unsigned long long)block_idx.y << 21) | block_idx.x);
    while (w.live > 0) {
        bool ran = false;
        schedule.fill(order, w.n_threads, &stream);
        for (int i : order) {
            if (w.fibers[i].status != Status::Runnable) continue;
            ran = true;
            w.current = i;
            t_thread = &w.fibers[i].state;
            fiber_switch(&w.scheduler, &w.fibers[i].context);
            if (w.faulted) return false;
        }
        if (!ran && w.live > 0) {
            w.fault = deadlock_report(w);
            w.faulted = true;
            return false;
        }
    }
    return true;
}

}  // namespace

void warp_collective(uint32_t mask, void* operands, CompleteFn complete, const char* what) {
    Worker& w = worker();
    const ThreadState& t = *t_thread;
    if (!(mask >> t.lane & 1u)) kernel_fault("a warp collective's mask leaves out the calling lane");
    const int warp_threads = std::min(kWarpSize, w.n_threads - t.warp * kWarpSize);
    if (warp_threads < kWarpSize && (mask >> warp_threads) != 0)
        kernel_fault("a warp collective's mask names lanes past the end of the CTA");
    WarpMeeting& m = w.warps[t.warp];
    if (m.arrived == 0) {
        m.mask = mask;
        m.complete = complete;
        m.what = what;
    } else if (m.complete != complete || m.mask != mask || std::strcmp(m.what, what) != 0) {
        char buf[200];
        std::snprintf(buf, sizeof buf, "lanes of one warp meet at different collectives: %s (mask 0x%08x) and %s (mask 0x%08x)",
                      m.what, m.mask, what, mask);
        kernel_fault(buf);
    }
    m.operands[t.lane] = operands;
    m.arrived |= 1u << t.lane;
    if (m.arrived != mask) {
        yield(Status::AtWarpCollective);
        return;
    }
    void* lanes[kWarpSize];
    for (int l = 0; l < kWarpSize; ++l) lanes[l] = (mask >> l & 1u) ? m.operands[l] : nullptr;
    m.arrived = 0;
    complete(lanes, mask);
    for (int l = 0; l < kWarpSize; ++l)
        if ((mask >> l & 1u) && l != t.lane) w.fibers[t.warp * kWarpSize + l].status = Status::Runnable;
}

void block_barrier() {
    Worker& w = worker();
    w.barrier_arrived += 1;
    if (w.barrier_arrived == w.live) {
        release_barrier(w);
        return;
    }
    yield(Status::AtBarrier);
}

void kernel_fault(const char* what) {
    Worker& w = worker();
    const ThreadState& t = *t_thread;
    char buf[120];
    std::snprintf(buf, sizeof buf, " thread (%u,%u,%u): ", t.thread_idx.x, t.thread_idx.y, t.thread_idx.z);
    w.fault = where(w) + buf + what;
    w.faulted = true;
    yield(Status::Exited);
    std::abort();  // a faulted fiber is never resumed
}

void acquire_polled(const void* addr, unsigned value) {
    Worker& w = worker();
    ThreadState& t = *t_thread;
    const long long now = clock_ns();
    if (t.poll_addr != addr || t.poll_value != value) {
        t.poll_addr = addr;
        t.poll_value = value;
        t.poll_since_ns = now;
    } else if (now - t.poll_since_ns > kAcquireStallSeconds * 1000000000ll) {
        char buf[200];
        std::snprintf(buf, sizeof buf,
                      "ld_acquire_gpu has read %u at %p for %lld s: a grid barrier (or flag) that never completes",
                      value, addr, kAcquireStallSeconds);
        kernel_fault(buf);
    }
    if (w.cooperative_failed && w.cooperative_failed->load(std::memory_order_acquire))
        kernel_fault("abandoned: another CTA of this cooperative launch failed");
    yield(Status::Runnable);
}

void AsyncCopies::land(size_t n) {
    for (size_t i = 0; i < n; ++i) {
        const Copy& c = pending[i];
        if (c.src) std::memcpy(c.dst, c.src, c.bytes);
        else std::memset(c.dst, 0, c.bytes);
    }
    pending.erase(pending.begin(), pending.begin() + (std::ptrdiff_t)n);
}

long long clock_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// emu_cta.h
bool run_blocks(const GridLaunch& launch, const std::function<bool(EmuDim3*)>& next_block, std::string* fault,
                const std::atomic<bool>* cooperative_failed) {
    Worker& w = worker();
    w.launch = &launch;
    w.cooperative_failed = cooperative_failed;
    w.faulted = false;
    w.fault.clear();
    w.cta = CtaState{{0, 0, 0}, launch.block, launch.grid, nullptr, launch.kernel_name, w.cta_serial};
    if (launch.dynamic_smem_bytes) {
        w.smem.resize(launch.dynamic_smem_bytes + kSmemAlignment);
        auto base = reinterpret_cast<uintptr_t>(w.smem.data());
        w.cta.dynamic_smem = reinterpret_cast<unsigned char*>((base + kSmemAlignment - 1) & ~(kSmemAlignment - 1));
    }
    EmuDim3 block;
    bool ok = true;
    while (ok && next_block(&block)) ok = run_cta(w, block);
    if (!ok) *fault = w.fault;
    w.cooperative_failed = nullptr;
    t_thread = nullptr;
    t_cta = nullptr;
    return ok;
}

void release_worker() {
    delete t_worker;
    t_worker = nullptr;
}

EmuDim3 block_of(unsigned long long i, EmuDim3 g) {
    return EmuDim3{(unsigned)(i % g.x), (unsigned)((i / g.x) % g.y), (unsigned)(i / ((unsigned long long)g.x * g.y))};
}

std::string run_grid(const GridLaunch& launch) {
    const EmuDim3 g = launch.grid, b = launch.block;
    const unsigned long long threads = (unsigned long long)b.x * b.y * b.z;
    if (threads == 0 || threads > (unsigned long long)kMaxThreadsPerBlock)
        return std::string("kernel ") + launch.kernel_name + ": block of " + std::to_string(threads) +
               " threads (must be 1..1024)";
    const unsigned long long blocks = (unsigned long long)g.x * g.y * g.z;
    if (launch.cooperative) {
        if (blocks > kMaxCooperativeCtas)
            return std::string("kernel ") + launch.kernel_name + ": cooperative launch of " + std::to_string(blocks) +
                   " CTAs, over the emulator's limit of " + std::to_string(kMaxCooperativeCtas);
        return run_cooperative(launch, blocks);
    }
    return run_parallel(blocks, [&](std::atomic<unsigned long long>& next, std::string* fault) {
        return run_blocks(launch,
                          [&](EmuDim3* block) {
                              const unsigned long long i = next.fetch_add(1);
                              if (i >= blocks) return false;
                              *block = block_of(i, g);
                              return true;
                          },
                          fault, nullptr);
    });
}

}  // namespace emu

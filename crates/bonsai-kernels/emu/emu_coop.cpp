// Cooperative launches on the emulator (see emu_cta.h): every CTA of the grid at once.
#include <atomic>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "emu_cta.h"

namespace emu {

// Every CTA at once, CTA 0 on the calling thread and each other one on a fresh OS thread, so a
// CTA may spin on memory another one writes. When a CTA fails, the others give up at their next
// ld_acquire_gpu (acquire_polled) instead of waiting for it forever; its fault is the report.
std::string run_cooperative(const GridLaunch& launch, unsigned long long blocks) {
    std::atomic<bool> failed{false};
    std::mutex fault_lock;
    std::string first_fault;
    const auto record = [&](const std::string& fault) {
        {
            std::lock_guard<std::mutex> g(fault_lock);
            if (first_fault.empty()) first_fault = fault;
        }
        failed.store(true, std::memory_order_release);
    };
    const auto run_one = [&](unsigned long long i) {
        bool handed_out = false;
        std::string fault;
        const bool ok = run_blocks(launch,
                                   [&](EmuDim3* block) {
                                       if (handed_out) return false;
                                       handed_out = true;
                                       *block = block_of(i, launch.grid);
                                       return true;
                                   },
                                   &fault, &failed);
        if (!ok) record(fault);
    };
    std::vector<std::thread> threads;
    try {
        for (unsigned long long i = 1; i < blocks; ++i)
            threads.emplace_back([&run_one, i] {
                run_one(i);
                release_worker();
            });
    } catch (const std::system_error& e) {
        record(std::string("kernel ") + launch.kernel_name + ": cannot start an OS thread for each of its " +
               std::to_string(blocks) + " cooperative CTAs (" + e.what() + ")");
    }
    if (!failed.load()) run_one(0);
    for (std::thread& t : threads) t.join();
    return first_fault;
}

}  // namespace emu

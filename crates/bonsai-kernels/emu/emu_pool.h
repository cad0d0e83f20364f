// A small pool of OS threads that the emulator spreads a grid's CTAs over.
#pragma once

#include <atomic>
#include <functional>
#include <string>

namespace emu {

// Work(next, fault) takes items by `next.fetch_add(1)` until they run out, returning false
// with *fault set on failure. run_parallel runs it on the calling thread and on up to
// BONSAI_EMU_THREADS - 1 pool threads (default: the CPU count, at most 8), stops handing out
// items after a failure, and returns the first fault ("" if none).
using ParallelWork = std::function<bool(std::atomic<unsigned long long>& next, std::string* fault)>;
std::string run_parallel(unsigned long long n_items, const ParallelWork& work);

}  // namespace emu

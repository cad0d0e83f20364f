// How the emulator runs CTAs on one OS thread (emu_sched.cpp), and the cooperative launches
// built on it (emu_coop.cpp).
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "emu_grid.h"

namespace emu {

// Runs the CTAs handed out by `next_block` one after another on this OS thread until none is
// left; false with *fault set on a kernel bug. `cooperative_failed` (null outside cooperative
// launches) turns true when another CTA of the launch failed: a CTA waiting for it then gives up.
bool run_blocks(const GridLaunch& launch, const std::function<bool(EmuDim3*)>& next_block, std::string* fault,
                const std::atomic<bool>* cooperative_failed);

// Frees this OS thread's CTA runner (fiber stacks); for threads that end.
void release_worker();

// CTA `i` of grid `g`, x fastest.
EmuDim3 block_of(unsigned long long i, EmuDim3 g);

// Runs all `blocks` CTAs of a cooperative launch at once, one OS thread each (emu_coop.cpp).
std::string run_cooperative(const GridLaunch& launch, unsigned long long blocks);

}  // namespace emu

// Running one kernel launch on the CPU (emu_sched.cpp), as the fake driver sees it.
#pragma once

#include <cstddef>
#include <string>

#include "emu_runtime.h"

namespace emu {

// Calls the kernel with its parameters unpacked from CUDA's `void** kernelParams`.
using KernelThunk = void (*)(void** args);

struct GridLaunch {
    const char* kernel_name;
    KernelThunk thunk;
    void** args;
    EmuDim3 grid;
    EmuDim3 block;
    size_t dynamic_smem_bytes;
    // A cooperative launch (CU_LAUNCH_ATTRIBUTE_COOPERATIVE): every CTA runs at once on its own
    // OS thread, so CTAs may wait for each other (a grid barrier); at most kMaxCooperativeCtas.
    bool cooperative = false;
};

// The most CTAs a cooperative launch may have here (one OS thread each); the fake driver refuses
// more with CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE. Launchers cap their grids under emulation
// through BONSAI_COOP_CTAS (scripts/emu.sh sets it).
constexpr unsigned long long kMaxCooperativeCtas = 64;

// Runs every CTA of the grid (on up to BONSAI_EMU_THREADS OS threads; a cooperative grid on one
// OS thread per CTA) and returns once all are done. Returns an empty string on success, else a report of the kernel bug found (deadlock,
// shuffle outside its mask, ...) naming the kernel, the block and the threads involved.
std::string run_grid(const GridLaunch& launch);

}  // namespace emu

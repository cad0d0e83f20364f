// State shared by the fake driver's files: streams, graphs and the work items both carry.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "emu_table.h"
#include "fake_cuda.h"

struct EmuFunction {
    const emu::KernelEntry* entry;
};

// One unit of stream work: run at once, or recorded while the stream captures a graph.
struct EmuWork {
    enum class Kind { Kernel, Copy, Set8, Set16, Set32, HostFn } kind;
    // Kernel: the function, its launch shape and a copy of every parameter's bytes, each at a
    // 16-byte aligned offset of `param_bytes`.
    const emu::KernelEntry* kernel = nullptr;
    unsigned grid[3] = {1, 1, 1};
    unsigned block[3] = {1, 1, 1};
    unsigned smem = 0;
    std::vector<std::max_align_t> param_bytes;
    std::vector<size_t> param_offsets;
    // Copy / Set: destination, source or value, element count.
    void* dst = nullptr;
    const void* src = nullptr;
    size_t count = 0;
    unsigned value = 0;
    // HostFn
    CUhostFn host_fn = nullptr;
    void* user_data = nullptr;
};

struct EmuGraph {
    std::vector<EmuWork> nodes;
};

struct EmuStream {
    bool capturing = false;
    EmuGraph* graph = nullptr;
};

namespace emu {

// The stream a handle names (null and the legacy/per-thread handles: the default stream).
EmuStream* stream_of(CUstream handle);
// Runs `work` now or appends it to the capturing stream's graph.
CUresult submit(CUstream stream, EmuWork work);
// Runs one work item now.
CUresult execute(const EmuWork& work);
// The error every later call reports after a kernel failed (CUDA's sticky errors); 0 if none.
CUresult sticky_error();

}  // namespace emu

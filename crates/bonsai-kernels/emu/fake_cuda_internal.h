// State shared by the fake driver's files: streams, graphs and the work items both carry.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "emu_table.h"
#include "fake_cuda.h"

// Shared-memory limits of the emulated device (CUDA's for sm_90).
constexpr int kDefaultSmemPerBlock = 48 * 1024;
constexpr int kOptInSmemPerBlock = 227 * 1024;
// CUfunction_attribute CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES.
constexpr int kAttrMaxDynamicSmem = 8;

struct EmuFunction {
    const emu::KernelEntry* entry;
    // Dynamic shared memory a launch may ask for: 48 KB unless raised with cuFuncSetAttribute,
    // as on the GPU (a kernel that forgets to raise it fails to launch there, and here).
    int max_dynamic_smem = kDefaultSmemPerBlock;
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
    bool cooperative = false;  // every CTA at once (GridLaunch::cooperative); kept by graph capture
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

// Stream-ordered allocations freed while a stream captured: CUDA turns the alloc / free pair
// into graph memory nodes whose address every replay reuses, so the memory must outlive the
// capture. Freed when the last graph (captured or instantiated) holding them goes.
struct EmuGraphMemory {
    std::vector<CUdeviceptr> freed_in_capture;
    ~EmuGraphMemory();
};

struct EmuGraph {
    std::vector<EmuWork> nodes;
    std::shared_ptr<EmuGraphMemory> memory = std::make_shared<EmuGraphMemory>();
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

// Async copies to host memory land late, as on a GPU: cuMemcpyDtoHAsync takes its bytes at once
// (stream order: later work cannot change them) but writes them to the host only when the host
// waits for them: a stream or context synchronise, or an event recorded after the copy. A host
// read without that wait sees the old bytes, so the emulator catches it (fake_cuda_stream.cpp).
// The copy's ticket, for an event recorded after it.
unsigned long long post_host_copy(void* dst, const void* src, size_t bytes);
// The tickets issued so far (an event records this).
unsigned long long host_copy_tickets();
// Writes every pending host copy up to `ticket` (all: ~0ull).
void land_host_copies(unsigned long long ticket);

}  // namespace emu

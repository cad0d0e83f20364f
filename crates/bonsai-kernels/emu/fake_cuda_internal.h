// State shared by the fake driver's files: streams, graphs and the work items both carry.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "emu_device.h"
#include "emu_table.h"
#include "fake_cuda.h"

// CUfunction_attribute values the fake driver answers.
enum : int {
    kAttrMaxThreadsPerBlock = 0,
    kAttrStaticSmem = 1,
    kAttrNumRegs = 4,
    kAttrBinaryVersion = 6,
    kAttrMaxDynamicSmem = 8,
};

// What the real compile of a kernel needs from an SM, read from the cubin the library loads
// (compiled for the posed architecture): all zero when the image is not a cubin.
struct KernelResources {
    int static_smem = 0;   // bytes of __shared__ arrays (.nv.shared.<kernel>)
    int registers = 0;     // per thread (EIATTR_REGCOUNT in .nv.info)
    int launch_bound = 0;  // __launch_bounds__' threads per CTA (EIATTR_MAX_THREADS), 0: none
};

struct EmuFunction {
    const emu::KernelEntry* entry;
    KernelResources resources;
    // Dynamic shared memory a launch may ask for: 48 KB less the static shared memory unless
    // raised with cuFuncSetAttribute, as on the GPU (a kernel that forgets to raise it fails to
    // launch there, and here).
    int max_dynamic_smem = emu::kDefaultSmemPerBlock;
};

namespace emu {
// The most threads a CTA of `f` may have on the posed device: 1024, its launch bound, and what
// its registers leave of the register file.
int max_threads_per_block(const EmuFunction& f);
}  // namespace emu

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
// CTAs of `f` with `block_size` threads and `smem` bytes of dynamic shared memory one SM of the
// posed device holds at once (cuOccupancyMaxActiveBlocksPerMultiprocessor); 0 when such a CTA
// cannot launch at all.
int ctas_per_sm(const EmuFunction& f, int block_size, size_t smem);
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

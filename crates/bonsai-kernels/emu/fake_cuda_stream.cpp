// The fake driver's streams, launches and graphs. Work runs synchronously on submission, except
// while a stream captures: then it is recorded (kernel parameters copied at record time, as
// CUDA does) and replayed by cuGraphLaunch; and async copies to the host land only when the host
// waits for them (post_host_copy).
#include <algorithm>
#include <chrono>
#include <mutex>
#include <vector>
#include <cstdio>
#include <cstring>

#include "emu_grid.h"
#include "fake_cuda_internal.h"

namespace emu {

namespace {
EmuStream g_default_stream;
CUresult g_sticky = CUDA_SUCCESS;
}  // namespace

CUresult sticky_error() { return g_sticky; }

namespace {
struct HostCopy {
    unsigned long long ticket;
    void* dst;
    std::vector<unsigned char> bytes;
};
std::mutex g_host_copies_lock;
std::vector<HostCopy> g_host_copies;
unsigned long long g_tickets = 0;
}  // namespace

unsigned long long post_host_copy(void* dst, const void* src, size_t bytes) {
    std::lock_guard<std::mutex> g(g_host_copies_lock);
    const auto* from = static_cast<const unsigned char*>(src);
    g_host_copies.push_back({++g_tickets, dst, std::vector<unsigned char>(from, from + bytes)});
    return g_tickets;
}

unsigned long long host_copy_tickets() {
    std::lock_guard<std::mutex> g(g_host_copies_lock);
    return g_tickets;
}

void land_host_copies(unsigned long long ticket) {
    std::lock_guard<std::mutex> g(g_host_copies_lock);
    auto landed = std::stable_partition(g_host_copies.begin(), g_host_copies.end(),
                                        [&](const HostCopy& c) { return c.ticket > ticket; });
    for (auto it = landed; it != g_host_copies.end(); ++it) std::memcpy(it->dst, it->bytes.data(), it->bytes.size());
    g_host_copies.erase(landed, g_host_copies.end());
}

EmuStream* stream_of(CUstream handle) {
    if (handle == nullptr || handle == EMU_STREAM_LEGACY || handle == EMU_STREAM_PER_THREAD) return &g_default_stream;
    return handle;
}

CUresult execute(const EmuWork& w) {
    if (g_sticky != CUDA_SUCCESS) return g_sticky;
    switch (w.kind) {
        case EmuWork::Kind::Kernel: {
            std::vector<void*> args(w.param_offsets.size());
            auto* base = reinterpret_cast<unsigned char*>(const_cast<std::max_align_t*>(w.param_bytes.data()));
            for (size_t i = 0; i < args.size(); ++i) args[i] = base + w.param_offsets[i];
            const GridLaunch launch{w.kernel->name, w.kernel->thunk, args.data(), {w.grid[0], w.grid[1], w.grid[2]},
                                    {w.block[0], w.block[1], w.block[2]}, w.smem, w.cooperative};
            const std::string fault = run_grid(launch);
            if (!fault.empty()) {
                std::fprintf(stderr, "bonsai emu: %s\n", fault.c_str());
                g_sticky = CUDA_ERROR_LAUNCH_FAILED;
                return g_sticky;
            }
            return CUDA_SUCCESS;
        }
        case EmuWork::Kind::Copy: std::memmove(w.dst, w.src, w.count); return CUDA_SUCCESS;
        case EmuWork::Kind::Set8: std::memset(w.dst, (int)(w.value & 0xff), w.count); return CUDA_SUCCESS;
        case EmuWork::Kind::Set16:
            for (size_t i = 0; i < w.count; ++i) static_cast<uint16_t*>(w.dst)[i] = (uint16_t)w.value;
            return CUDA_SUCCESS;
        case EmuWork::Kind::Set32:
            for (size_t i = 0; i < w.count; ++i) static_cast<uint32_t*>(w.dst)[i] = w.value;
            return CUDA_SUCCESS;
        case EmuWork::Kind::HostFn: w.host_fn(w.user_data); return CUDA_SUCCESS;
    }
    return CUDA_ERROR_UNKNOWN;
}

CUresult submit(CUstream stream, EmuWork work) {
    EmuStream* s = stream_of(stream);
    if (s->capturing) {
        s->graph->nodes.push_back(std::move(work));
        return CUDA_SUCCESS;
    }
    return execute(work);
}

namespace {
constexpr size_t kParamAlignment = 16;
}

CUresult launch(CUfunction f, const unsigned grid[3], const unsigned block[3], unsigned smem, CUstream stream,
                void** params, bool cooperative) {
    if (!f || !f->entry) return CUDA_ERROR_INVALID_HANDLE;
    if (f->entry->n_params > 0 && !params) return CUDA_ERROR_INVALID_VALUE;
    const DeviceSpec& device = emu::device();
    if ((long long)smem > f->max_dynamic_smem) {
        std::fprintf(stderr,
                     "bonsai emu: kernel %s asks for %u bytes of dynamic shared memory, over its limit of %d "
                     "(raise CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES first, up to %d on sm_%d)\n",
                     f->entry->name, smem, f->max_dynamic_smem, device.smem_optin_per_block, device.arch);
        return CUDA_ERROR_INVALID_VALUE;
    }
    const unsigned long long threads = (unsigned long long)block[0] * block[1] * block[2];
    if (f->resources.launch_bound > 0 && threads > (unsigned long long)f->resources.launch_bound) {
        std::fprintf(stderr, "bonsai emu: kernel %s launched with %llu threads per CTA, over its __launch_bounds__ of %d\n",
                     f->entry->name, threads, f->resources.launch_bound);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (threads <= (unsigned long long)kMaxThreadsPerBlock && threads > (unsigned long long)max_threads_per_block(*f)) {
        std::fprintf(stderr,
                     "bonsai emu: kernel %s launched with %llu threads per CTA; its %d registers per thread allow %d "
                     "on sm_%d\n",
                     f->entry->name, threads, f->resources.registers, max_threads_per_block(*f), device.arch);
        return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
    }
    if (threads == 0 || threads > (unsigned long long)kMaxThreadsPerBlock || block[0] > (unsigned)kMaxThreadsPerBlock ||
        block[1] > (unsigned)kMaxThreadsPerBlock || block[2] > 64 || grid[0] == 0 || grid[1] == 0 || grid[2] == 0 ||
        grid[1] > 65535 || grid[2] > 65535) {
        std::fprintf(stderr, "bonsai emu: kernel %s launched with grid (%u,%u,%u) of blocks (%u,%u,%u): out of range\n",
                     f->entry->name, grid[0], grid[1], grid[2], block[0], block[1], block[2]);
        return CUDA_ERROR_INVALID_VALUE;
    }
    const unsigned long long ctas = (unsigned long long)grid[0] * grid[1] * grid[2];
    // As the driver: a cooperative grid must be resident all at once on the posed device.
    const unsigned long long resident = (unsigned long long)ctas_per_sm(*f, (int)threads, smem) * device.sm_count;
    if (cooperative && ctas > resident) {
        std::fprintf(stderr,
                     "bonsai emu: cooperative launch of kernel %s with %llu CTAs, more than sm_%d holds at once (%llu)\n",
                     f->entry->name, ctas, device.arch, resident);
        return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
    }
    if (cooperative && ctas > kMaxCooperativeCtas) {
        std::fprintf(stderr,
                     "bonsai emu: cooperative launch of kernel %s with %llu CTAs, over the emulator's limit of %llu "
                     "(one OS thread per CTA; cap the grid with BONSAI_COOP_CTAS)\n",
                     f->entry->name, ctas, kMaxCooperativeCtas);
        return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
    }
    EmuWork w{EmuWork::Kind::Kernel};
    w.kernel = f->entry;
    w.cooperative = cooperative;
    for (int i = 0; i < 3; ++i) {
        w.grid[i] = grid[i];
        w.block[i] = block[i];
    }
    w.smem = smem;
    size_t total = 0;
    for (size_t i = 0; i < f->entry->n_params; ++i) {
        w.param_offsets.push_back(total);
        total += (f->entry->param_sizes[i] + kParamAlignment - 1) / kParamAlignment * kParamAlignment;
    }
    w.param_bytes.resize(total / sizeof(std::max_align_t) + 1);
    auto* base = reinterpret_cast<unsigned char*>(w.param_bytes.data());
    for (size_t i = 0; i < f->entry->n_params; ++i) std::memcpy(base + w.param_offsets[i], params[i], f->entry->param_sizes[i]);
    return submit(stream, std::move(w));
}

}  // namespace emu

using emu::stream_of;

EMU_API CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                unsigned bz, unsigned smem, CUstream stream, void** params, void** extra) {
    if (extra) return CUDA_ERROR_NOT_SUPPORTED;
    const unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
    return emu::launch(f, grid, block, smem, stream, params, false);
}

EMU_API CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                           unsigned by, unsigned bz, unsigned smem, CUstream stream, void** params) {
    const unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
    return emu::launch(f, grid, block, smem, stream, params, true);
}

EMU_API CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
    if (!config) return CUDA_ERROR_INVALID_VALUE;
    if (extra) return CUDA_ERROR_NOT_SUPPORTED;
    const unsigned grid[3] = {config->gridDimX, config->gridDimY, config->gridDimZ};
    const unsigned block[3] = {config->blockDimX, config->blockDimY, config->blockDimZ};
    if (config->numAttrs > 0 && !config->attrs) return CUDA_ERROR_INVALID_VALUE;
    bool cooperative = false;
    for (unsigned i = 0; i < config->numAttrs; ++i)
        if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE) cooperative = config->attrs[i].value.cooperative != 0;
    return emu::launch(f, grid, block, config->sharedMemBytes, config->hStream, params, cooperative);
}

EMU_API CUresult cuLaunchHostFunc(CUstream stream, CUhostFn fn, void* user_data) {
    EmuWork w{EmuWork::Kind::HostFn};
    w.host_fn = fn;
    w.user_data = user_data;
    return emu::submit(stream, std::move(w));
}

EMU_API CUresult cuStreamCreate(CUstream* out, unsigned) {
    *out = new EmuStream();
    return CUDA_SUCCESS;
}
EMU_API CUresult cuStreamCreateWithPriority(CUstream* out, unsigned flags, int) { return cuStreamCreate(out, flags); }
EMU_API CUresult cuStreamDestroy_v2(CUstream s) {
    if (s != stream_of(s)) return CUDA_SUCCESS;  // the default stream is never destroyed
    delete s;
    return CUDA_SUCCESS;
}
// One queue of late host copies for all streams: any stream's synchronise lands them all (a
// coarser wait than CUDA's, never a finer one).
EMU_API CUresult cuStreamSynchronize(CUstream) {
    emu::land_host_copies(~0ull);
    return emu::sticky_error();
}
EMU_API CUresult cuStreamQuery(CUstream s) { return cuStreamSynchronize(s); }
EMU_API CUresult cuStreamWaitEvent(CUstream, CUevent, unsigned) { return CUDA_SUCCESS; }
EMU_API CUresult cuCtxSynchronize() { return cuStreamSynchronize(nullptr); }

EMU_API CUresult cuStreamBeginCapture_v2(CUstream stream, int) {
    EmuStream* s = stream_of(stream);
    if (s->capturing) return CUDA_ERROR_ILLEGAL_STATE;
    s->capturing = true;
    s->graph = new EmuGraph();
    return CUDA_SUCCESS;
}
EMU_API CUresult cuStreamBeginCapture(CUstream stream, int mode) { return cuStreamBeginCapture_v2(stream, mode); }
EMU_API CUresult cuStreamEndCapture(CUstream stream, CUgraph* graph) {
    EmuStream* s = stream_of(stream);
    if (!s->capturing) return CUDA_ERROR_ILLEGAL_STATE;
    s->capturing = false;
    *graph = s->graph;
    s->graph = nullptr;
    return CUDA_SUCCESS;
}
EMU_API CUresult cuStreamIsCapturing(CUstream stream, int* status) {
    *status = stream_of(stream)->capturing ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
}

// An executable graph is a copy of the captured one.
EMU_API CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph, unsigned long long) {
    if (!graph) return CUDA_ERROR_INVALID_VALUE;
    *exec = new EmuGraph(*graph);
    return CUDA_SUCCESS;
}
EMU_API CUresult cuGraphInstantiate_v2(CUgraphExec* exec, CUgraph graph, void*, char*, size_t) {
    return cuGraphInstantiateWithFlags(exec, graph, 0);
}
EMU_API CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) {
    if (!exec) return CUDA_ERROR_INVALID_VALUE;
    if (stream_of(stream)->capturing) return CUDA_ERROR_NOT_SUPPORTED;
    for (const EmuWork& w : exec->nodes) {
        const CUresult r = emu::execute(w);
        if (r != CUDA_SUCCESS) return r;
    }
    return CUDA_SUCCESS;
}
EMU_API CUresult cuGraphUpload(CUgraphExec, CUstream) { return CUDA_SUCCESS; }
EMU_API CUresult cuGraphExecDestroy(CUgraphExec exec) {
    delete exec;
    return CUDA_SUCCESS;
}
EMU_API CUresult cuGraphDestroy(CUgraph graph) {
    delete graph;
    return CUDA_SUCCESS;
}

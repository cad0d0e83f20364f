// The fake CUDA driver (libcuda.so of the emulator): one device, the GPU emu_device.h poses as
// (BONSAI_EMU_ARCH; an H200 by default), whose memory is host memory, modules whose functions
// are the kernel sources compiled for the CPU (emu_table.h), and streams that run work at once
// (fake_cuda_stream.cpp). Only the calls bonsai (through cudarc)
// makes are implemented; cudarc resolves each symbol on first use and names a missing one.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "fake_cuda_internal.h"

extern "C" const emu::KernelEntry* emu_kernel_table(size_t* count);

struct EmuContext {};
struct EmuModule {};
struct EmuEvent {
    std::chrono::steady_clock::time_point at;
    // The late host copies it waits for (emu::post_host_copy): those issued before its last record.
    unsigned long long host_copies = 0;
};

namespace {

constexpr int kDriverVersion = 13000;
constexpr const char* kDeviceName = "bonsai CPU emulator";
constexpr size_t kAllocAlignment = 256;  // cudaMalloc's guarantee

EmuContext g_context;
EmuModule g_module;
std::mutex g_lock;
std::unordered_map<std::string, EmuFunction> g_functions;
std::unordered_map<void*, size_t> g_allocations;
size_t g_allocated = 0;

// The posed device's attributes (emu_device.h); the figures every architecture shares are here.
int attribute(int which) {
    const emu::DeviceSpec& d = emu::device();
    switch (which) {
        case 1: return emu::kMaxThreadsPerBlock;  // max threads per block
        case 2: case 3: return 1024;         // max block dim x, y
        case 4: return 64;                   // max block dim z
        case 5: return 2147483647;           // max grid dim x
        case 6: case 7: return 65535;        // max grid dim y, z
        case 8: return emu::kDefaultSmemPerBlock;  // shared memory per block
        case 9: return 64 * 1024;            // constant memory
        case 10: return 32;                  // warp size
        case 12: return 65536;               // registers per block
        case 13: return d.clock_khz;
        case 16: return d.sm_count;
        case 31: return 1;                   // concurrent kernels
        case 36: return d.memory_clock_khz;
        case 37: return d.bus_width_bits;
        case 38: return d.l2_bytes;
        case 39: return d.threads_per_sm;
        case 41: return 1;                   // unified addressing
        case 75: return d.arch / 10;         // compute capability major
        case 76: return d.arch % 10;         // compute capability minor
        case 81: return d.smem_per_sm;
        case 82: return 65536;               // registers per SM
        case 95: return 1;                   // cooperative launch
        case 97: return d.smem_optin_per_block;
        case 106: return d.max_ctas_per_sm;
        case 111: return emu::kReservedSmemPerCta;
        case 115: return 1;                  // memory pools: cudarc then uses cuMemAllocAsync / cuMemFreeAsync (a free inside a capture belongs to the graph: EmuGraphMemory)
        case 120: return d.arch >= 90;       // thread block clusters
        default: return 0;
    }
}

// Exactly `bytes` (at least 1), so AddressSanitizer (BONSAI_EMU_ASAN=1) flags any access past
// the end; null when out of memory.
void* allocate(size_t bytes) {
    void* p = nullptr;
    return posix_memalign(&p, kAllocAlignment, bytes ? bytes : 1) == 0 ? p : nullptr;
}

const char* error_name(CUresult r) {
    switch (r) {
        case CUDA_SUCCESS: return "CUDA_SUCCESS";
        case CUDA_ERROR_INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
        case CUDA_ERROR_OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
        case CUDA_ERROR_NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
        case CUDA_ERROR_NO_DEVICE: return "CUDA_ERROR_NO_DEVICE";
        case CUDA_ERROR_INVALID_DEVICE: return "CUDA_ERROR_INVALID_DEVICE";
        case CUDA_ERROR_INVALID_CONTEXT: return "CUDA_ERROR_INVALID_CONTEXT";
        case CUDA_ERROR_INVALID_HANDLE: return "CUDA_ERROR_INVALID_HANDLE";
        case CUDA_ERROR_ILLEGAL_STATE: return "CUDA_ERROR_ILLEGAL_STATE";
        case CUDA_ERROR_NOT_FOUND: return "CUDA_ERROR_NOT_FOUND";
        case CUDA_ERROR_NOT_READY: return "CUDA_ERROR_NOT_READY";
        case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: return "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
        case CUDA_ERROR_LAUNCH_FAILED: return "CUDA_ERROR_LAUNCH_FAILED";
        case CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE: return "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE";
        case CUDA_ERROR_NOT_SUPPORTED: return "CUDA_ERROR_NOT_SUPPORTED";
        case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED: return "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED";
        default: return "CUDA_ERROR_UNKNOWN";
    }
}

const char* error_string(CUresult r) {
    switch (r) {
        case CUDA_SUCCESS: return "no error";
        case CUDA_ERROR_LAUNCH_FAILED: return "the emulated kernel failed (see the 'bonsai emu:' line on stderr)";
        case CUDA_ERROR_NOT_FOUND: return "named symbol not found (not in the emulator's kernel table)";
        case CUDA_ERROR_OUT_OF_MEMORY: return "out of memory";
        case CUDA_ERROR_NOT_SUPPORTED: return "operation not supported by the bonsai CPU emulator";
        case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES:
            return "too many resources requested for launch (see the 'bonsai emu:' line on stderr)";
        case CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE:
            return "too many CTAs for a cooperative launch (see the 'bonsai emu:' line on stderr)";
        default: return error_name(r);
    }
}

}  // namespace

EMU_API CUresult cuInit(unsigned) {
    emu::device();  // an unknown BONSAI_EMU_ARCH ends the process here, before any work
    return CUDA_SUCCESS;
}
EMU_API CUresult cuDriverGetVersion(int* version) {
    *version = kDriverVersion;
    return CUDA_SUCCESS;
}
EMU_API CUresult cuGetErrorName(CUresult r, const char** out) {
    *out = error_name(r);
    return CUDA_SUCCESS;
}
EMU_API CUresult cuGetErrorString(CUresult r, const char** out) {
    *out = error_string(r);
    return CUDA_SUCCESS;
}

// ---- device ----
EMU_API CUresult cuDeviceGetCount(int* count) {
    *count = 1;
    return CUDA_SUCCESS;
}
EMU_API CUresult cuDeviceGet(CUdevice* device, int ordinal) {
    if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
    *device = 0;
    return CUDA_SUCCESS;
}
EMU_API CUresult cuDeviceGetName(char* name, int len, CUdevice) {
    if (len <= 0) return CUDA_ERROR_INVALID_VALUE;
    std::strncpy(name, kDeviceName, (size_t)len - 1);
    name[len - 1] = '\0';
    return CUDA_SUCCESS;
}
EMU_API CUresult cuDeviceGetAttribute(int* value, int which, CUdevice) {
    *value = attribute(which);
    return CUDA_SUCCESS;
}
EMU_API CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice) {
    *bytes = emu::device().total_memory;
    return CUDA_SUCCESS;
}
EMU_API CUresult cuDeviceGetUuid(unsigned char* uuid, CUdevice) {
    std::memcpy(uuid, "bonsai-emulator!", 16);
    return CUDA_SUCCESS;
}
EMU_API CUresult cuDeviceGetUuid_v2(unsigned char* uuid, CUdevice d) { return cuDeviceGetUuid(uuid, d); }

// ---- context: one, always current ----
EMU_API CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice) {
    *ctx = &g_context;
    return CUDA_SUCCESS;
}
EMU_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice) { return CUDA_SUCCESS; }
EMU_API CUresult cuCtxSetCurrent(CUcontext) { return CUDA_SUCCESS; }
EMU_API CUresult cuCtxGetCurrent(CUcontext* ctx) {
    *ctx = &g_context;
    return CUDA_SUCCESS;
}
EMU_API CUresult cuCtxGetDevice(CUdevice* device) {
    *device = 0;
    return CUDA_SUCCESS;
}
EMU_API CUresult cuCtxPushCurrent_v2(CUcontext) { return CUDA_SUCCESS; }
EMU_API CUresult cuCtxPopCurrent_v2(CUcontext* ctx) {
    if (ctx) *ctx = &g_context;
    return CUDA_SUCCESS;
}
EMU_API CUresult cuCtxSetFlags(unsigned) { return CUDA_SUCCESS; }
EMU_API CUresult cuCtxSetLimit(int, size_t) { return CUDA_SUCCESS; }
EMU_API CUresult cuCtxGetLimit(size_t* value, int) {
    *value = 0;
    return CUDA_SUCCESS;
}
EMU_API CUresult cuCtxDestroy_v2(CUcontext) { return CUDA_SUCCESS; }

// ---- memory: device pointers are host pointers ----
EMU_API CUresult cuMemAlloc_v2(CUdeviceptr* ptr, size_t bytes) {
    void* p = allocate(bytes);
    if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
    std::lock_guard<std::mutex> g(g_lock);
    g_allocations[p] = bytes;
    g_allocated += bytes;
    *ptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}
EMU_API CUresult cuMemFree_v2(CUdeviceptr ptr) {
    void* p = (void*)(uintptr_t)ptr;
    std::lock_guard<std::mutex> g(g_lock);
    auto it = g_allocations.find(p);
    if (it == g_allocations.end()) return ptr == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    g_allocated -= it->second;
    g_allocations.erase(it);
    std::free(p);
    return CUDA_SUCCESS;
}
EMU_API CUresult cuMemAllocAsync(CUdeviceptr* ptr, size_t bytes, CUstream) { return cuMemAlloc_v2(ptr, bytes); }
// During a capture the free becomes part of the graph (fake_cuda_internal.h, EmuGraphMemory).
EMU_API CUresult cuMemFreeAsync(CUdeviceptr ptr, CUstream stream) {
    EmuStream* s = emu::stream_of(stream);
    if (s->capturing) {
        s->graph->memory->freed_in_capture.push_back(ptr);
        return CUDA_SUCCESS;
    }
    return cuMemFree_v2(ptr);
}
EmuGraphMemory::~EmuGraphMemory() {
    for (CUdeviceptr p : freed_in_capture) cuMemFree_v2(p);
}
EMU_API CUresult cuMemHostAlloc(void** ptr, size_t bytes, unsigned) {
    *ptr = allocate(bytes);
    return *ptr ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
EMU_API CUresult cuMemAllocHost_v2(void** ptr, size_t bytes) { return cuMemHostAlloc(ptr, bytes, 0); }
EMU_API CUresult cuMemFreeHost(void* ptr) {
    emu::land_host_copies(~0ull);  // none may land in freed memory
    std::free(ptr);
    return CUDA_SUCCESS;
}
EMU_API CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
    const size_t total = emu::device().total_memory;
    std::lock_guard<std::mutex> g(g_lock);
    *total_bytes = total;
    *free_bytes = g_allocated < total ? total - g_allocated : 0;
    return CUDA_SUCCESS;
}

namespace {
CUresult copy(void* dst, const void* src, size_t bytes, CUstream stream) {
    EmuWork w{EmuWork::Kind::Copy};
    w.dst = dst;
    w.src = src;
    w.count = bytes;
    return emu::submit(stream, std::move(w));
}
CUresult set(EmuWork::Kind kind, CUdeviceptr dst, unsigned value, size_t count, CUstream stream) {
    EmuWork w{kind};
    w.dst = (void*)(uintptr_t)dst;
    w.value = value;
    w.count = count;
    return emu::submit(stream, std::move(w));
}
}  // namespace

#define EMU_PTR(p) ((void*)(uintptr_t)(p))
EMU_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n) { return copy(EMU_PTR(dst), src, n, nullptr); }
EMU_API CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n) {
    emu::land_host_copies(~0ull);  // a synchronous copy waits for all work before it
    return copy(dst, EMU_PTR(src), n, nullptr);
}
EMU_API CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) { return copy(EMU_PTR(dst), EMU_PTR(src), n, nullptr); }
EMU_API CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) { return copy(EMU_PTR(dst), EMU_PTR(src), n, nullptr); }
EMU_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n, CUstream s) { return copy(EMU_PTR(dst), src, n, s); }
EMU_API CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, CUstream s) {
    if (emu::stream_of(s)->capturing) return copy(dst, EMU_PTR(src), n, s);
    if (CUresult e = emu::sticky_error()) return e;
    emu::post_host_copy(dst, EMU_PTR(src), n);
    return CUDA_SUCCESS;
}
EMU_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
    return copy(EMU_PTR(dst), EMU_PTR(src), n, s);
}
EMU_API CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) { return copy(EMU_PTR(dst), EMU_PTR(src), n, s); }
EMU_API CUresult cuMemsetD8_v2(CUdeviceptr p, unsigned char v, size_t n) { return set(EmuWork::Kind::Set8, p, v, n, nullptr); }
EMU_API CUresult cuMemsetD8Async(CUdeviceptr p, unsigned char v, size_t n, CUstream s) { return set(EmuWork::Kind::Set8, p, v, n, s); }
EMU_API CUresult cuMemsetD16_v2(CUdeviceptr p, unsigned short v, size_t n) { return set(EmuWork::Kind::Set16, p, v, n, nullptr); }
EMU_API CUresult cuMemsetD16Async(CUdeviceptr p, unsigned short v, size_t n, CUstream s) { return set(EmuWork::Kind::Set16, p, v, n, s); }
EMU_API CUresult cuMemsetD32_v2(CUdeviceptr p, unsigned v, size_t n) { return set(EmuWork::Kind::Set32, p, v, n, nullptr); }
EMU_API CUresult cuMemsetD32Async(CUdeviceptr p, unsigned v, size_t n, CUstream s) { return set(EmuWork::Kind::Set32, p, v, n, s); }

// ---- events: the time of recording (work before it has already run) ----
EMU_API CUresult cuEventCreate(CUevent* event, unsigned) {
    *event = new EmuEvent{std::chrono::steady_clock::now()};
    return CUDA_SUCCESS;
}
EMU_API CUresult cuEventDestroy_v2(CUevent event) {
    delete event;
    return CUDA_SUCCESS;
}
EMU_API CUresult cuEventRecord(CUevent event, CUstream stream) {
    if (!emu::stream_of(stream)->capturing) {
        event->at = std::chrono::steady_clock::now();
        event->host_copies = emu::host_copy_tickets();
    }
    return CUDA_SUCCESS;
}
EMU_API CUresult cuEventRecordWithFlags(CUevent event, CUstream stream, unsigned) { return cuEventRecord(event, stream); }
// Only the host copies issued before the event's last record land (none if never recorded).
EMU_API CUresult cuEventSynchronize(CUevent event) {
    emu::land_host_copies(event->host_copies);
    return emu::sticky_error();
}
EMU_API CUresult cuEventQuery(CUevent event) { return cuEventSynchronize(event); }
EMU_API CUresult cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
    *ms = std::chrono::duration<float, std::milli>(end->at - start->at).count();
    return CUDA_SUCCESS;
}
EMU_API CUresult cuEventElapsedTime_v2(float* ms, CUevent start, CUevent end) { return cuEventElapsedTime(ms, start, end); }

// ---- modules and functions: the code comes from the compiled-in table; the image, the real
// cubin the library compiled for the posed architecture, gives each kernel's resources ----
namespace {

// The resources of every kernel in an ELF64 cubin. `.nv.shared.<name>`'s size is the static
// shared memory, except that from sm_90 on ptxas counts in it the 1 KB the driver reserves per
// CTA (a kernel without __shared__ arrays has 1024 there), which the driver does not count
// against the opt-in limit: gemv_b1_prepare opts in to all of it and runs on the H200. The
// `.nv.info` section holds EIATTR_REGCOUNT records (0x2f: symbol index, registers) and
// `.nv.info.<name>` EIATTR_MAX_THREADS (0x05: x, y, z); a record is a format byte, an attribute
// byte, a u16 size, then `size` payload bytes for format 4. Not an ELF image (PTX, or a caller's
// placeholder): nothing. The image has no length, so the section table is trusted within sane
// sizes: the library's own compiler wrote it.
std::unordered_map<std::string, KernelResources> cubin_resources(const void* image) {
    std::unordered_map<std::string, KernelResources> found;
    const auto* bytes = static_cast<const unsigned char*>(image);
    if (!bytes || std::memcmp(bytes, "\x7f" "ELF", 4) != 0 || bytes[4] != 2 || bytes[5] != 1) return found;
    auto u16 = [&](uint64_t at) { uint16_t v; std::memcpy(&v, bytes + at, 2); return v; };
    auto u32 = [&](uint64_t at) { uint32_t v; std::memcpy(&v, bytes + at, 4); return v; };
    auto u64 = [&](uint64_t at) { uint64_t v; std::memcpy(&v, bytes + at, 8); return v; };
    const unsigned cubin_arch = (u32(0x30) >> 8) & 0xff;  // e_flags: EF_CUDA_SM
    const int reserved_in_section = cubin_arch >= 90 ? emu::kReservedSmemPerCta : 0;
    const uint64_t shoff = u64(0x28);
    const uint16_t shentsize = u16(0x3a), shnum = u16(0x3c), shstrndx = u16(0x3e);
    if (shentsize != 64 || shstrndx >= shnum || shoff > (1ull << 32)) return found;
    struct Section {
        const char* name;
        uint32_t type, link, info;
        uint64_t offset, size;
    };
    std::vector<Section> sections(shnum);
    const uint64_t names = u64(shoff + (uint64_t)shstrndx * 64 + 0x18);
    for (unsigned i = 0; i < shnum; ++i) {
        const uint64_t sh = shoff + (uint64_t)i * 64;
        sections[i] = {reinterpret_cast<const char*>(bytes + names + u32(sh)), u32(sh + 4), u32(sh + 0x28),
                       u32(sh + 0x2c), u64(sh + 0x18), u64(sh + 0x20)};
    }
    auto records = [&](const Section& sec, auto&& each) {
        for (uint64_t at = sec.offset; at + 4 <= sec.offset + sec.size;) {
            const unsigned format = bytes[at], attribute = bytes[at + 1], len = u16(at + 2);
            if (format == 4) each(attribute, at + 4, len);
            at += 4 + (format == 4 ? len : 0);
        }
    };
    constexpr uint32_t kSymtab = 2;
    const char* symbol_names = nullptr;
    uint64_t symbols = 0, symbol_count = 0;
    for (const Section& sec : sections) {
        if (sec.type != kSymtab || sec.link >= shnum) continue;
        symbols = sec.offset;
        symbol_count = sec.size / 24;
        symbol_names = reinterpret_cast<const char*>(bytes + sections[sec.link].offset);
    }
    for (const Section& sec : sections) {
        auto suffix = [&](const char* prefix) -> const char* {
            const size_t n = std::strlen(prefix);
            return std::strncmp(sec.name, prefix, n) == 0 ? sec.name + n : nullptr;
        };
        if (const char* kernel = suffix(".nv.shared.")) {
            if (std::strncmp(kernel, "reserved.", 9) != 0)
                found[kernel].static_smem = std::max(0, (int)sec.size - reserved_in_section);
        } else if (const char* kernel = suffix(".nv.info.")) {
            records(sec, [&](unsigned attribute, uint64_t at, unsigned len) {
                if (attribute == 0x05 && len == 12) found[kernel].launch_bound = (int)(u32(at) * u32(at + 4) * u32(at + 8));
            });
        } else if (std::strcmp(sec.name, ".nv.info") == 0 && symbol_names) {
            records(sec, [&](unsigned attribute, uint64_t at, unsigned len) {
                if (attribute != 0x2f || len != 8 || u32(at) >= symbol_count) return;
                found[symbol_names + u32(symbols + (uint64_t)u32(at) * 24)].registers = (int)u32(at + 4);
            });
        }
    }
    return found;
}

}  // namespace

EMU_API CUresult cuModuleLoadData(CUmodule* module, const void* image) {
    std::lock_guard<std::mutex> g(g_lock);
    if (g_functions.empty()) {
        size_t count = 0;
        const emu::KernelEntry* table = emu_kernel_table(&count);
        for (size_t i = 0; i < count; ++i) g_functions[table[i].name] = EmuFunction{&table[i]};
    }
    for (const auto& [name, resources] : cubin_resources(image)) {
        auto it = g_functions.find(name);
        if (it == g_functions.end()) continue;
        it->second.resources = resources;
        it->second.max_dynamic_smem = std::max(0, emu::kDefaultSmemPerBlock - resources.static_smem);
    }
    *module = &g_module;
    return CUDA_SUCCESS;
}
EMU_API CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned, void*, void**) {
    return cuModuleLoadData(module, image);
}
EMU_API CUresult cuModuleUnload(CUmodule) { return CUDA_SUCCESS; }
EMU_API CUresult cuModuleGetFunction(CUfunction* f, CUmodule, const char* name) {
    std::lock_guard<std::mutex> g(g_lock);
    auto it = g_functions.find(name);
    if (it == g_functions.end()) return CUDA_ERROR_NOT_FOUND;
    *f = &it->second;
    return CUDA_SUCCESS;
}
int emu::max_threads_per_block(const EmuFunction& f) {
    int limit = emu::kMaxThreadsPerBlock;
    if (f.resources.launch_bound > 0) limit = std::min(limit, f.resources.launch_bound);
    if (f.resources.registers > 0) {
        // Registers are allocated per warp in units of 256; a CTA's warps share 64K of them.
        const int per_warp = (f.resources.registers * 32 + 255) / 256 * 256;
        limit = std::min(limit, 65536 / per_warp * 32);
    }
    return limit;
}

EMU_API CUresult cuFuncGetAttribute(int* value, int which, CUfunction f) {
    if (!f) return CUDA_ERROR_INVALID_HANDLE;
    switch (which) {
        case kAttrMaxThreadsPerBlock: *value = emu::max_threads_per_block(*f); break;
        case kAttrStaticSmem: *value = f->resources.static_smem; break;
        case kAttrNumRegs: *value = f->resources.registers; break;
        case kAttrBinaryVersion: *value = emu::device().arch; break;
        case kAttrMaxDynamicSmem: *value = f->max_dynamic_smem; break;
        default: *value = 0;
    }
    return CUDA_SUCCESS;
}
// As the driver: static plus dynamic shared memory may not exceed the device's opt-in limit.
EMU_API CUresult cuFuncSetAttribute(CUfunction f, int which, int value) {
    if (!f) return CUDA_ERROR_INVALID_HANDLE;
    if (which == kAttrMaxDynamicSmem) {
        const emu::DeviceSpec& d = emu::device();
        if (value < 0 || value + f->resources.static_smem > d.smem_optin_per_block) {
            std::fprintf(stderr,
                         "bonsai emu: kernel %s: %d bytes of dynamic shared memory plus its %d static exceed "
                         "sm_%d's opt-in limit of %d\n",
                         f->entry->name, value, f->resources.static_smem, d.arch, d.smem_optin_per_block);
            return CUDA_ERROR_INVALID_VALUE;
        }
        f->max_dynamic_smem = value;
    }
    return CUDA_SUCCESS;
}
EMU_API CUresult cuFuncSetCacheConfig(CUfunction, int) { return CUDA_SUCCESS; }
// As the posed device limits them: threads (whole warps), registers (per warp in units of 256),
// CTAs, and static plus dynamic shared memory with the per-CTA reserve. Coarser than the GPU's
// calculator (no allocation granularities, no carveout choice), so it may exceed its answer.
int emu::ctas_per_sm(const EmuFunction& f, int block_size, size_t smem) {
    const emu::DeviceSpec& d = emu::device();
    if (block_size <= 0 || block_size > emu::max_threads_per_block(f) || smem > (size_t)f.max_dynamic_smem) return 0;
    const int warps = (block_size + 31) / 32;
    const int by_threads = d.threads_per_sm / (warps * 32);
    const int per_warp_registers = (std::max(f.resources.registers, 1) * 32 + 255) / 256 * 256;
    const int by_registers = 65536 / per_warp_registers / warps;
    const int by_smem = d.smem_per_sm / ((int)smem + f.resources.static_smem + emu::kReservedSmemPerCta);
    return std::min({by_threads, by_registers, by_smem, d.max_ctas_per_sm});
}

EMU_API CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, CUfunction f, int block_size, size_t smem) {
    if (!f) return CUDA_ERROR_INVALID_HANDLE;
    if (!blocks) return CUDA_ERROR_INVALID_VALUE;
    *blocks = emu::ctas_per_sm(*f, block_size, smem);
    return CUDA_SUCCESS;
}
EMU_API CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* blocks, CUfunction f, int block_size,
                                                                      size_t smem, unsigned) {
    return cuOccupancyMaxActiveBlocksPerMultiprocessor(blocks, f, block_size, smem);
}

// NVRTC dlopens libcuda.so.1 and asks for private export tables; having none, it carries on as
// on a machine without a driver.
EMU_API CUresult cuGetExportTable(const void** table, const void*) {
    *table = nullptr;
    return CUDA_ERROR_NOT_SUPPORTED;
}

// Types and constants of the CUDA driver API that the fake driver (fake_cuda*.cpp) implements,
// with the values of CUDA 13.0's cuda.h (no CUDA header is needed to build the emulator).
#pragma once

#include <cstddef>
#include <cstdint>

#define EMU_API extern "C" __attribute__((visibility("default")))

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
struct EmuContext;
struct EmuModule;
struct EmuFunction;
struct EmuStream;
struct EmuEvent;
struct EmuGraph;
typedef EmuContext* CUcontext;
typedef EmuModule* CUmodule;
typedef EmuFunction* CUfunction;
typedef EmuStream* CUstream;
typedef EmuEvent* CUevent;
typedef EmuGraph* CUgraph;
typedef EmuGraph* CUgraphExec;
typedef void (*CUhostFn)(void* user_data);

enum : CUresult {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_ILLEGAL_STATE = 401,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
    CUDA_ERROR_LAUNCH_FAILED = 719,
    CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE = 720,
    CUDA_ERROR_NOT_SUPPORTED = 801,
    CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901,
    CUDA_ERROR_UNKNOWN = 999,
};

// CUlaunchAttribute: an id, then a 64-byte union of values (8-byte aligned). Only
// CU_LAUNCH_ATTRIBUTE_COOPERATIVE changes what the emulator does; the others (programmatic
// stream serialization: launches run one after another here anyway) are accepted and ignored.
struct CUlaunchAttribute {
    int id;
    char pad[4];
    union {
        char bytes[64];
        int cooperative;  // CU_LAUNCH_ATTRIBUTE_COOPERATIVE
        void* align_as_pointer;
    } value;
};
static_assert(sizeof(CUlaunchAttribute) == 72, "cuda.h's CUlaunchAttribute is 72 bytes");
enum : int { CU_LAUNCH_ATTRIBUTE_COOPERATIVE = 2 };

// CUlaunchConfig (cuLaunchKernelEx).
struct CUlaunchConfig {
    unsigned gridDimX, gridDimY, gridDimZ;
    unsigned blockDimX, blockDimY, blockDimZ;
    unsigned sharedMemBytes;
    CUstream hStream;
    CUlaunchAttribute* attrs;
    unsigned numAttrs;
};

// Special stream handles of cuda.h.
#define EMU_STREAM_LEGACY ((CUstream)0x1)
#define EMU_STREAM_PER_THREAD ((CUstream)0x2)

enum : int {
    CU_STREAM_CAPTURE_STATUS_NONE = 0,
    CU_STREAM_CAPTURE_STATUS_ACTIVE = 1,
};

namespace emu {
struct KernelEntry;
// Runs (or, while `stream` captures, records) a launch; `cooperative`: all CTAs at once (emu_grid.h).
// Defined in fake_cuda_stream.cpp.
CUresult launch(CUfunction f, const unsigned grid[3], const unsigned block[3], unsigned smem, CUstream stream,
                void** params, bool cooperative);
}  // namespace emu

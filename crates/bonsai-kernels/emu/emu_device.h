// The GPU the emulator poses as. BONSAI_EMU_ARCH (80, 86, 89, 90, 100 or 120; default 90) picks
// one of the architectures bonsai supports, with the figures of a GPU users own of it: what
// cuDeviceGetAttribute reports (compute capability, SMs, shared memory, threads per SM), the
// limits the fake driver's launch checks and occupancy calculator enforce, and whether the
// sm_90a-only instructions may execute. Production code never reads the variable: it sees only
// what the fake driver reports, as it would on that GPU.
#pragma once

namespace emu {

struct DeviceSpec {
    int arch;             // compute capability as major * 10 + minor (sm_XX as XX)
    const char* model;    // the GPU whose figures these are
    int sm_count;
    int smem_optin_per_block;  // CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
    int smem_per_sm;
    int threads_per_sm;
    int max_ctas_per_sm;
    int l2_bytes;
    unsigned long long total_memory;  // reported, not reserved
    int clock_khz;
    int memory_clock_khz;
    int bus_width_bits;
};

// Shared memory every CTA may use without opting in, and what the driver sets aside per CTA on
// sm_80 and later: the same on every posed architecture.
constexpr int kDefaultSmemPerBlock = 48 * 1024;
constexpr int kReservedSmemPerCta = 1024;
constexpr int kMaxThreadsPerBlock = 1024;

// The posed device: BONSAI_EMU_ARCH's on first use (an unknown value ends the process with a
// message), or the last pose_as.
const DeviceSpec& device();
// Poses as `arch` from now on (the emulator's selftest runs every architecture in one process);
// false, changing nothing, when the table has no such architecture.
bool pose_as(int arch);
// The architectures the emulator can pose as, for messages: "80, 86, 89, 90, 100, 120".
const char* posable_archs();

// The twins of sm_90a-only instructions (wgmma and its fences: emu_ptx.h) call this first. Real
// code for any other architecture has no such instruction (ptx.cuh compiles them to __trap()
// there), so a launcher that picks a Hopper kernel on another GPU must fail here too: the launch
// fails with a report naming `instruction` unless the posed device is 9.0.
void require_sm90a(const char* instruction);

}  // namespace emu

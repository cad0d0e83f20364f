// The posed GPU (emu_device.h): one row per architecture bonsai supports, with the figures of a
// GPU of it (CUDA Programming Guide, "Compute Capabilities", and the vendors' specifications).
#include "emu_device.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "emu_runtime.h"

namespace emu {

namespace {

constexpr unsigned long long kGiB = 1ull << 30;

// Shared memory per SM and the opt-in limit per CTA: 228 / 227 KB on sm_90 and sm_100, 164 / 163
// KB on sm_80, 100 / 99 KB on the consumer parts (sm_86, sm_89, sm_120), which also hold fewer
// threads per SM (1536).
constexpr DeviceSpec kDevices[] = {
    {80, "A100 80GB", 108, 163 * 1024, 164 * 1024, 2048, 32, 40 << 20, 80 * kGiB, 1410000, 1593000, 5120},
    {86, "RTX 3090", 82, 99 * 1024, 100 * 1024, 1536, 16, 6 << 20, 24 * kGiB, 1695000, 9751000, 384},
    {89, "RTX 4090", 128, 99 * 1024, 100 * 1024, 1536, 24, 72 << 20, 24 * kGiB, 2520000, 10501000, 384},
    {90, "H200", 132, 227 * 1024, 228 * 1024, 2048, 32, 60 << 20, 141 * kGiB, 1980000, 3201000, 6144},
    {100, "B200", 148, 227 * 1024, 228 * 1024, 2048, 32, 126 << 20, 180 * kGiB, 1965000, 3996000, 8192},
    {120, "RTX 5090", 170, 99 * 1024, 100 * 1024, 1536, 32, 96 << 20, 32 * kGiB, 2407000, 14001000, 512},
};
constexpr int kDefaultArch = 90;

const DeviceSpec* find(int arch) {
    for (const DeviceSpec& d : kDevices)
        if (d.arch == arch) return &d;
    return nullptr;
}

// BONSAI_EMU_ARCH as "90" or "sm_90"; unset or empty: the default.
const DeviceSpec* from_env() {
    const char* env = std::getenv("BONSAI_EMU_ARCH");
    if (!env || !*env) return find(kDefaultArch);
    const char* digits = std::strncmp(env, "sm_", 3) == 0 ? env + 3 : env;
    char* end = nullptr;
    const long arch = std::strtol(digits, &end, 10);
    const DeviceSpec* d = (end != digits && *end == '\0') ? find((int)arch) : nullptr;
    if (!d) {
        std::fprintf(stderr, "bonsai emu: BONSAI_EMU_ARCH=%s is not an architecture the emulator poses as (%s)\n", env,
                     posable_archs());
        std::exit(2);
    }
    return d;
}

std::atomic<const DeviceSpec*> g_posed{nullptr};

}  // namespace

const DeviceSpec& device() {
    if (const DeviceSpec* d = g_posed.load(std::memory_order_acquire)) return *d;
    static const DeviceSpec* const initial = from_env();
    const DeviceSpec* expected = nullptr;
    g_posed.compare_exchange_strong(expected, initial, std::memory_order_acq_rel);
    return *g_posed.load(std::memory_order_acquire);
}

bool pose_as(int arch) {
    const DeviceSpec* d = find(arch);
    if (d) g_posed.store(d, std::memory_order_release);
    return d != nullptr;
}

const char* posable_archs() {
    static const std::string list = [] {
        std::string s;
        for (const DeviceSpec& d : kDevices) s += (s.empty() ? "" : ", ") + std::to_string(d.arch);
        return s;
    }();
    return list.c_str();
}

void require_sm90a(const char* instruction) {
    const DeviceSpec& d = device();
    if (d.arch == 90) return;
    char message[320];
    std::snprintf(message, sizeof message,
                  "%s is an sm_90a instruction, but the emulated device is sm_%d (%s, BONSAI_EMU_ARCH): a launcher "
                  "picked a Hopper-only kernel for a device without it",
                  instruction, d.arch, d.model);
    kernel_fault(message);
}

}  // namespace emu

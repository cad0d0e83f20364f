// The table of kernels the fake driver looks names up in. scripts/emu.sh appends one
// EMU_KERNEL(name) line per registry entry point to the kernel translation unit; the templates
// below unpack CUDA's `void** kernelParams` by the kernel's own parameter types and record each
// parameter's size (graph capture copies parameters at record time, as CUDA does).
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

namespace emu {

struct KernelEntry {
    const char* name;
    void (*thunk)(void** args);
    const size_t* param_sizes;
    size_t n_params;
};

template <class F, F Kernel>
struct KernelTraits;

template <class... Params, void (*Kernel)(Params...)>
struct KernelTraits<void (*)(Params...), Kernel> {
    template <size_t... I>
    static void call(void** args, std::index_sequence<I...>) {
        Kernel(*static_cast<std::remove_cv_t<std::remove_reference_t<Params>>*>(args[I])...);
    }
    static void thunk(void** args) { call(args, std::index_sequence_for<Params...>{}); }
    // One extra slot so a kernel without parameters still has an array.
    static constexpr size_t sizes[sizeof...(Params) + 1] = {sizeof(Params)..., 0};
    static constexpr size_t count = sizeof...(Params);
};

}  // namespace emu

#define EMU_KERNEL(name)                                                                         \
    emu::KernelEntry{#name, &emu::KernelTraits<decltype(&name), &name>::thunk,                   \
                     emu::KernelTraits<decltype(&name), &name>::sizes,                           \
                     emu::KernelTraits<decltype(&name), &name>::count}

// Minimal cooperative fibers for the emulator: a fiber is a stack and a saved stack pointer.
// On x86-64 the switch is a few instructions (callee-saved registers, MXCSR and the x87 control
// word); elsewhere, or with -DBONSAI_EMU_UCONTEXT, ucontext is used (slower: it saves the signal
// mask with a system call). Under AddressSanitizer every switch is announced to it.
#pragma once

#include <cstddef>

#if defined(__x86_64__) && !defined(BONSAI_EMU_UCONTEXT)
#define BONSAI_EMU_ASM_FIBERS 1
#else
#include <ucontext.h>
#endif

namespace emu {

using FiberEntry = void (*)(void* arg);

struct FiberContext {
#if defined(BONSAI_EMU_ASM_FIBERS)
    void* sp = nullptr;
#else
    ucontext_t uc;
#endif
    FiberEntry entry = nullptr;
    void* arg = nullptr;
    // The stack this context runs on (learnt at the first switch away from an OS thread's own).
    const void* stack_bottom = nullptr;
    size_t stack_size = 0;
};

// Prepares `fiber` to run entry(arg) on [stack, stack + size) when first switched to. `entry`
// must never return (it switches away for good instead).
void fiber_init(FiberContext* fiber, void* stack, size_t size, FiberEntry entry, void* arg);

// Saves the running context into `from` and resumes `to`.
void fiber_switch(FiberContext* from, FiberContext* to);

}  // namespace emu

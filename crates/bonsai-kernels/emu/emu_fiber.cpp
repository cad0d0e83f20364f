// Fiber switching for the emulator (see emu_fiber.h).
#include "emu_fiber.h"

#include <cstdint>

#if defined(__x86_64__)

// emu_fiber_swap(save_sp, load_sp): push the callee-saved state, store rsp, load the other
// stack's rsp, pop its state, return into it. A fresh stack "returns" into the trampoline,
// which calls r13(r12) with a 16-byte aligned stack.
asm(R"(
    .text
    .p2align 4
    .hidden emu_fiber_swap
    .type emu_fiber_swap, @function
emu_fiber_swap:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size emu_fiber_swap, .-emu_fiber_swap

    .p2align 4
    .hidden emu_fiber_trampoline
    .type emu_fiber_trampoline, @function
emu_fiber_trampoline:
    movq %r12, %rdi
    callq *%r13
    ud2
    .size emu_fiber_trampoline, .-emu_fiber_trampoline
)");

extern "C" void emu_fiber_swap(void** save_sp, void* load_sp);
extern "C" void emu_fiber_trampoline();

namespace emu {

namespace {
constexpr uint32_t kDefaultMxcsr = 0x1f80;   // all exceptions masked, round to nearest
constexpr uint16_t kDefaultFpuControl = 0x037f;
}  // namespace

void fiber_init(FiberContext* fiber, void* stack, size_t size, FiberEntry entry, void* arg) {
    auto top = (reinterpret_cast<uintptr_t>(stack) + size) & ~uintptr_t{15};
    auto* slot = reinterpret_cast<uint64_t*>(top);
    // Layout popped by emu_fiber_swap, from the new rsp upward: control words, r15, r14, r13,
    // r12, rbx, rbp, return address. After `ret` rsp == top, 16-byte aligned for the call.
    *--slot = reinterpret_cast<uint64_t>(&emu_fiber_trampoline);
    *--slot = 0;                                        // rbp
    *--slot = 0;                                        // rbx
    *--slot = reinterpret_cast<uint64_t>(arg);          // r12
    *--slot = reinterpret_cast<uint64_t>(entry);        // r13
    *--slot = 0;                                        // r14
    *--slot = 0;                                        // r15
    *--slot = kDefaultMxcsr | (uint64_t{kDefaultFpuControl} << 32);
    fiber->sp = slot;
}

void fiber_switch(FiberContext* from, FiberContext* to) { emu_fiber_swap(&from->sp, to->sp); }

}  // namespace emu

#else

namespace emu {

namespace {
void start(unsigned entry_hi, unsigned entry_lo, unsigned arg_hi, unsigned arg_lo) {
    const auto entry = reinterpret_cast<FiberEntry>((uintptr_t{entry_hi} << 32) | entry_lo);
    entry(reinterpret_cast<void*>((uintptr_t{arg_hi} << 32) | arg_lo));
}
}  // namespace

void fiber_init(FiberContext* fiber, void* stack, size_t size, FiberEntry entry, void* arg) {
    getcontext(&fiber->uc);
    fiber->uc.uc_stack.ss_sp = stack;
    fiber->uc.uc_stack.ss_size = size;
    fiber->uc.uc_link = nullptr;
    // makecontext passes int arguments only: split the pointers into halves.
    const auto e = reinterpret_cast<uintptr_t>(entry), a = reinterpret_cast<uintptr_t>(arg);
    makecontext(&fiber->uc, reinterpret_cast<void (*)()>(&start), 4, (unsigned)(e >> 32), (unsigned)e,
                (unsigned)(a >> 32), (unsigned)a);
}

void fiber_switch(FiberContext* from, FiberContext* to) { swapcontext(&from->uc, &to->uc); }

}  // namespace emu

#endif

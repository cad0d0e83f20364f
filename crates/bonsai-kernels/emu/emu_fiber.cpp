// Fiber switching for the emulator (see emu_fiber.h).
#include "emu_fiber.h"

#include <cstdint>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

namespace emu {

namespace {

#if defined(__SANITIZE_ADDRESS__)
thread_local FiberContext* t_switching_from = nullptr;
#endif

// Called right after a context starts or resumes: completes AddressSanitizer's view of the switch
// and records the stack bounds of the context we came from.
void after_switch(void* fake_stack) {
#if defined(__SANITIZE_ADDRESS__)
    const void* bottom = nullptr;
    size_t size = 0;
    __sanitizer_finish_switch_fiber(fake_stack, &bottom, &size);
    FiberContext* from = t_switching_from;
    if (from && !from->stack_bottom) {
        from->stack_bottom = bottom;
        from->stack_size = size;
    }
#else
    (void)fake_stack;
#endif
}

void fiber_start(void* context) {
    after_switch(nullptr);
    auto* fiber = static_cast<FiberContext*>(context);
    fiber->entry(fiber->arg);
}

// fiber_init's part common to both switch mechanisms: a fresh context that will run entry(arg)
// on [stack, stack + size).
void fiber_reset(FiberContext* fiber, void* stack, size_t size, FiberEntry entry, void* arg) {
    *fiber = FiberContext{};
    fiber->entry = entry;
    fiber->arg = arg;
    fiber->stack_bottom = stack;
    fiber->stack_size = size;
}

}  // namespace

}  // namespace emu

#if defined(BONSAI_EMU_ASM_FIBERS)

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
constexpr uint32_t kDefaultMxcsr = 0x1f80;  // all exceptions masked, round to nearest
constexpr uint16_t kDefaultFpuControl = 0x037f;

void swap(FiberContext* from, FiberContext* to) { emu_fiber_swap(&from->sp, to->sp); }
}  // namespace

void fiber_init(FiberContext* fiber, void* stack, size_t size, FiberEntry entry, void* arg) {
    fiber_reset(fiber, stack, size, entry, arg);
    auto top = (reinterpret_cast<uintptr_t>(stack) + size) & ~uintptr_t{15};
    auto* slot = reinterpret_cast<uint64_t*>(top);
    // Layout popped by emu_fiber_swap, from the new rsp upward: control words, r15, r14, r13,
    // r12, rbx, rbp, return address. After `ret` rsp == top, 16-byte aligned for the call.
    *--slot = reinterpret_cast<uint64_t>(&emu_fiber_trampoline);
    *--slot = 0;                                          // rbp
    *--slot = 0;                                          // rbx
    *--slot = reinterpret_cast<uint64_t>(fiber);          // r12: fiber_start's argument
    *--slot = reinterpret_cast<uint64_t>(&fiber_start);   // r13
    *--slot = 0;                                          // r14
    *--slot = 0;                                          // r15
    *--slot = kDefaultMxcsr | (uint64_t{kDefaultFpuControl} << 32);
    fiber->sp = slot;
}

}  // namespace emu

#else

namespace emu {

namespace {
// makecontext passes int arguments only: the context pointer travels in two halves.
void start_from_ucontext(unsigned hi, unsigned lo) {
    fiber_start(reinterpret_cast<void*>((uintptr_t{hi} << 32) | lo));
}
void swap(FiberContext* from, FiberContext* to) { swapcontext(&from->uc, &to->uc); }
}  // namespace

void fiber_init(FiberContext* fiber, void* stack, size_t size, FiberEntry entry, void* arg) {
    fiber_reset(fiber, stack, size, entry, arg);
    getcontext(&fiber->uc);
    fiber->uc.uc_stack.ss_sp = stack;
    fiber->uc.uc_stack.ss_size = size;
    fiber->uc.uc_link = nullptr;
    const auto self = reinterpret_cast<uintptr_t>(fiber);
    makecontext(&fiber->uc, reinterpret_cast<void (*)()>(&start_from_ucontext), 2, (unsigned)(self >> 32),
                (unsigned)self);
}

}  // namespace emu

#endif

namespace emu {

void fiber_switch(FiberContext* from, FiberContext* to) {
#if defined(__SANITIZE_ADDRESS__)
    void* fake_stack = nullptr;
    t_switching_from = from;
    __sanitizer_start_switch_fiber(&fake_stack, to->stack_bottom, to->stack_size);
    swap(from, to);
    after_switch(fake_stack);
#else
    swap(from, to);
#endif
}

}  // namespace emu

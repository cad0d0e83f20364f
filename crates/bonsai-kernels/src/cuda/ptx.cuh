// Every inline-PTX instruction the kernels use, each behind one small wrapper. Concatenated right
// after prelude.cuh. Kernel files must not contain `asm` themselves: the CPU emulator of the
// library (crates/bonsai-kernels/emu/) compiles the same sources with BONSAI_EMU defined and
// supplies a plain C++ version of every wrapper below, so a new wrapper needs its emulated twin.
//
// Fragment layouts (PTX ISA, "Matrix fragments for mma.m16n8k16" / "m16n8k8"), with
// g = lane / 4 and t = lane % 4:
//   m16n8k16 (f16/bf16) A (row-major 16x16): a[0] = (row g,   k 2t..2t+1), a[1] = (row g+8, k 2t..2t+1),
//                                            a[2] = (row g,   k 2t+8..+9), a[3] = (row g+8, k 2t+8..+9)
//                       B (16x8, "col"):     b0 = (k 2t..2t+1, col g),     b1 = (k 2t+8..2t+9, col g)
//                       C/D (16x8 f32):      c[0..1] = (row g, cols 2t, 2t+1), c[2..3] = (row g+8, same)
//   m16n8k8 (tf32)      A (16x8):            a[0] = (g, t), a[1] = (g+8, t), a[2] = (g, t+4), a[3] = (g+8, t+4)
//                       B (8x8):             b0 = (k t, col g), b1 = (k t+4, col g)
//                       C/D: as above.
//   m16n8k128 (b1)      A (16x128 bits):     a0 bit j = (row g, k 32t + j), a1 bit j = (row g + 8, k 32t + j)
//                       B (128x8 bits):      b bit j = (k 32t + j, col g)
//                       C/D (16x8 s32):      as the f32 C/D above (measured on the H200: scripts/lab/mma_rate.cu).
// Each 32-bit register holding two 16-bit values keeps the lower k (or column) in its low half.
#ifndef BONSAI_EMU

// f16 <-> f32, round to nearest even (no cuda_fp16.h under NVRTC).
__device__ __forceinline__ float f16_to_f32(u16 h) {
    float f;
    asm("{ .reg .b16 t; mov.b16 t, %1; cvt.f32.f16 %0, t; }" : "=f"(f) : "h"(h));
    return f;
}
__device__ __forceinline__ u16 f32_to_f16(float f) {
    u16 h;
    asm("{ .reg .b16 t; cvt.rn.f16.f32 t, %1; mov.b16 %0, t; }" : "=h"(h) : "f"(f));
    return h;
}
// f32 -> bf16, round to nearest even.
__device__ __forceinline__ u16 f32_to_bf16_rn(float f) {
    u16 h;
    asm("{ .reg .b16 t; cvt.rn.bf16.f32 t, %1; mov.b16 %0, t; }" : "=h"(h) : "f"(f));
    return h;
}
// f32 -> tf32 (round to nearest, ties away from zero), returned as the f32 bit pattern with the
// low 13 mantissa bits cleared, ready for an mma operand.
__device__ __forceinline__ u32 f32_to_tf32(float f) {
    u32 r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(f));
    return r;
}

// 2^x on the special-function unit, subnormal inputs and results flushed to zero. exp2f compiles
// to this same MUFU.EX2 plus a range compare and two predicated multiplies that keep subnormal
// results; where those do not matter (softmax weights below 2^-126) this saves 3 of 4
// instructions. Same accuracy as exp2f on normal results (<= 2 ulp).
__device__ __forceinline__ float exp2_ftz(float x) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}

// Shared-memory address of a generic pointer into shared memory (for cp.async / ldmatrix).
// The compiler builtin, not inline PTX: the compiler then sees the address-space conversion and
// folds constant offsets into the ldmatrix / cp.async address (with an opaque cvta every
// distinct address cost a 64-bit add, a carry and a move in the hot loop).
__device__ __forceinline__ u32 smem_addr(const void* p) { return (u32)__cvta_generic_to_shared(p); }
// Asynchronous global -> shared copies. 16-byte pieces bypass L1 (.cg); 4-byte pieces cannot.
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_addr(dst)), "l"(src) : "memory");
}
// As cp_async16, but when `valid` is false nothing is read and the 16 destination bytes are zeroed
// (src must still be a mappable address; pass the tensor base).
__device__ __forceinline__ void cp_async16_zfill(void* dst, const void* src, bool valid) {
    const int src_bytes = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_addr(dst)), "l"(src), "r"(src_bytes)
                 : "memory");
}
__device__ __forceinline__ void cp_async4(void* dst, const void* src) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(smem_addr(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// ldmatrix: each of the 4 (or 2) 8x8 b16 matrices is given by 8 row addresses, lanes 8i..8i+7
// supplying matrix i's rows (x2: lanes 0..15). Lane l receives, for matrix i, r[i] = the two b16
// of row l/4 at columns 2(l%4), 2(l%4)+1. `.trans` delivers the transposed matrix instead.
__device__ __forceinline__ void ldmatrix_x4(u32* r, const void* row_addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(row_addr)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(u32* r, const void* row_addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(row_addr)));
}
__device__ __forceinline__ void ldmatrix_x2(u32* r, const void* row_addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(smem_addr(row_addr)));
}
__device__ __forceinline__ void ldmatrix_x2_trans(u32* r, const void* row_addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(smem_addr(row_addr)));
}

// D = A B + C on tensor cores, f32 accumulators updated in place (layouts at the top of the file).
__device__ __forceinline__ void mma_bf16_16x8x16(float* c, const u32* a, u32 b0, u32 b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma_f16_16x8x16(float* c, const u32* a, u32 b0, u32 b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// D = popc(A AND B) + C over k = 128, s32 accumulators updated in place: the binary mma, one
// instruction for 16,384 bit products (native BMMA.168128 on sm_80..sm_90; layout at the top of
// the file). Not volatile: pure arithmetic, free to schedule. m16n8k256 with a zero k half made
// the decode GEMV rebuild its A quads for every mma (ptxas gave the result the A registers); k128
// needs none of those moves (12% fewer loop instructions, faster: docs/kernel-notes.md, "The
// decode GEMV (binary tensor core)").
__device__ __forceinline__ void mma_b1_and_popc_16x8x128(int* c, u32 a0, u32 a1, u32 b) {
    asm("mma.sync.aligned.m16n8k128.row.col.s32.b1.b1.s32.and.popc {%0,%1,%2,%3}, {%4,%5}, {%6}, "
        "{%0,%1,%2,%3};"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a0), "r"(a1), "r"(b));
}
__device__ __forceinline__ void mma_tf32_16x8x8(float* c, const u32* a, u32 b0, u32 b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The decode timeline (`BONSAI_TRACE=1`, crate::trace): the library is then compiled with
// BONSAI_TRACE defined (its own cache entry; the embedded SASS never has it), and while the host
// has set bonsai_trace_on, thread 0 of CTA 0 of every kernel appends (GPU nanosecond clock, event)
// when it calls griddep_launch_dependents (TRACE_STARTED: the GEMVs do so first thing) and when
// its griddep_wait returns (TRACE_RELEASED: the previous kernel has completed), and a kernel's
// own phase marks (TRACE_MARK_BASE + i: TRACE_MARK, below; the binary GEMV's TC_MARK). Without the define
// the hooks are empty. Layout mirrored in trace.rs.
#ifdef BONSAI_TRACE
#define TRACE_CAPACITY 65536
#define TRACE_STARTED 1u
#define TRACE_RELEASED 2u
#define TRACE_MARK_BASE 16u
__constant__ int bonsai_trace_on;
__device__ unsigned bonsai_trace_len;
// Per event: the %globaltimer value, then event | blockDim.x << 8 | gridDim.x << 20 | gridDim.y << 44.
__device__ unsigned long long bonsai_trace[TRACE_CAPACITY][2];
__device__ __forceinline__ bool trace_thread() {
    return threadIdx.x == 0 && threadIdx.y == 0 && blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0 &&
           bonsai_trace_on;
}
// Appends one event (time, packed word) to the buffer; dropped once it is full.
__device__ __forceinline__ void trace_append(unsigned long long ns, unsigned long long word) {
    const unsigned slot = atomicAdd(&bonsai_trace_len, 1u);
    if (slot < TRACE_CAPACITY) {
        bonsai_trace[slot][0] = ns;
        bonsai_trace[slot][1] = word;
    }
}
__device__ __forceinline__ void trace_record(unsigned event) {
    unsigned long long now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    trace_append(now, (unsigned long long)event | ((unsigned long long)blockDim.x << 8) |
                          ((unsigned long long)gridDim.x << 20) | ((unsigned long long)gridDim.y << 44));
}
// A kernel's phase marks (slot i: when CTA 0's thread 0 reached phase i), kept in registers and
// appended together at the kernel's end (TRACE_MARKS_END): one global atomic per kernel, not one
// per mark on the kernel's critical path. A kernel that marks opens the set with
// TRACE_MARKS_BEGIN; slots must be compile-time constants (registers, no local memory).
#define TRACE_MARK_SLOTS 16
struct TraceMarks {
    bool on;
    unsigned long long t[TRACE_MARK_SLOTS];
};
__device__ __forceinline__ unsigned long long trace_now() {
    unsigned long long now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    return now;
}
__device__ __forceinline__ void trace_marks_end(const TraceMarks& m) {
    if (!m.on) return;
    unsigned n = 0;
#pragma unroll
    for (int i = 0; i < TRACE_MARK_SLOTS; ++i) n += m.t[i] != 0;
    unsigned slot = atomicAdd(&bonsai_trace_len, n);
    const unsigned long long geometry = ((unsigned long long)blockDim.x << 8) | ((unsigned long long)gridDim.x << 20) |
                                        ((unsigned long long)gridDim.y << 44);
#pragma unroll
    for (int i = 0; i < TRACE_MARK_SLOTS; ++i) {
        if (m.t[i] == 0) continue;
        if (slot < TRACE_CAPACITY) {
            bonsai_trace[slot][0] = m.t[i];
            bonsai_trace[slot][1] = (TRACE_MARK_BASE + i) | geometry;
        }
        ++slot;
    }
}
// Every CTA's end (thread 0 of every CTA of the binary GEMVs and prepares, and of each decode
// attention CTA that takes keys, at the kernel's end), as event TRACE_CTA_END with its CTA
// (blockIdx.x + gridDim.x * blockIdx.y) and SM: trace.rs's CTA table (the spread of CTA ends
// after the release, and which CTAs / SMs come last; the next kernel is released only after the
// last). Only under BONSAI_TRACE=cta (BONSAI_TRACE_CTA_ENDS): one atomic per CTA delays each
// CTA's exit by a round trip. Word: event | CTA << 8 | smid << 20 | gridDim.x << 28 |
// blockDim.x << 40. Inside the persistent decode chain it records once per stage per CTA.
#define TRACE_CTA_END 3u
__device__ __forceinline__ void trace_cta_end() {
    if (threadIdx.x != 0 || threadIdx.y != 0 || !bonsai_trace_on) return;
    const unsigned long long now = trace_now();
    unsigned smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    const unsigned cta = blockIdx.x + gridDim.x * blockIdx.y;  // a 2-D grid's CTAs, row by row
    trace_append(now, TRACE_CTA_END | ((unsigned long long)(cta & 0xFFFu) << 8) |
                          ((unsigned long long)(smid & 0xFFu) << 20) | ((unsigned long long)(gridDim.x & 0xFFFu) << 28) |
                          ((unsigned long long)(blockDim.x & 0x7FFu) << 40));
}
#ifdef BONSAI_TRACE_CTA_ENDS
#define TRACE_CTA_ENDS trace_cta_end()
#else
#define TRACE_CTA_ENDS
#endif
#define TRACE_MARKS_BEGIN TraceMarks trace_marks_ = {trace_thread(), {}}
#define TRACE_MARK(i)                                         \
    do {                                                      \
        if (trace_marks_.on) trace_marks_.t[(i)] = trace_now(); \
    } while (0)
#define TRACE_MARKS_END trace_marks_end(trace_marks_)
#else
#define TRACE_MARKS_BEGIN
#define TRACE_MARK(i)
#define TRACE_MARKS_END
#define TRACE_CTA_ENDS
#endif

// Programmatic dependent launch (sm_90+; no-ops before). `griddep_wait` blocks until the grid this
// launch depends on has completed and its memory is visible; `griddep_launch_dependents` lets the
// next grid in the stream start its prologue early. Both are no-ops on launches without the
// programmatic-serialization attribute.
__device__ __forceinline__ void griddep_wait() {
#ifdef BONSAI_TRACE
    const bool tracing = trace_thread();  // the flag's load overlaps the wait
#endif
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
#ifdef BONSAI_TRACE
    if (tracing) trace_record(TRACE_RELEASED);
#endif
}
__device__ __forceinline__ void griddep_launch_dependents() {
#ifdef BONSAI_TRACE
    if (trace_thread()) trace_record(TRACE_STARTED);
#endif
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// A 64-bit word written and read whole at GPU scope (single-copy atomic: a reader sees all of one
// store or all of another), for a value and its ready flag in one word: the reader polls the word
// itself, with no fence, counter or second load (b1_planes_epilogue, matmul_gemv_b1.cu).
// Relaxed: no ordering of other memory; L2, never a stale L1 line.
__device__ __forceinline__ void st_relaxed_gpu_u64(unsigned long long* p, unsigned long long v) {
    asm volatile("st.relaxed.gpu.global.b64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ unsigned long long ld_relaxed_gpu_u64(const unsigned long long* p) {
    unsigned long long v;
    asm volatile("ld.relaxed.gpu.global.b64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

// Asks the memory system to bring `bytes` (a multiple of 16, 16-byte aligned) at `p` into L2 and
// returns at once (sm_90 bulk prefetch; a no-op before). A hint: it changes no value anywhere.
__device__ __forceinline__ void prefetch_l2_bulk(const void* p, unsigned bytes) {
#if __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
#endif
}


// ---- wgmma (sm_90a: the library is compiled for sm_90a on sm_90 devices) ----
// A warpgroup (4 consecutive warps, the first warp index divisible by 4) issues one
// m64nNk16 product asynchronously: warp w of the group supplies and receives rows 16w..16w+15.
// A comes from registers in the m16n8k16 A layout above (per warp); B (16 x N, "K-major": each of
// the N columns' 16 k values contiguous) comes from shared memory in the 128-byte swizzle:
// `b_block` (1024-byte aligned) holds N rows of 128 bytes (64 f16 of k), and 16-byte chunk c of
// row n lies at chunk position c ^ (n % 8); this instruction's k 0..15 are chunks
// k_chunk, k_chunk + 1 (k_chunk in {0, 2, 4, 6}). D: d[4j + 0..1] = (row g, cols 8j + 2t, +1),
// d[4j + 2..3] = (row g + 8, same cols), as mma.sync's C repeated over N / 8.
// Ordering: wgmma_fence before the first wgmma after registers it reads (A, D) were written by
// other instructions; wgmma_commit closes a group; wgmma_wait<N> returns when at most N groups are
// pending: D and the A registers may be touched, and B's shared memory reused, only after that.
// Shared memory written by ordinary stores or cp.async that a wgmma reads next needs
// fence_proxy_async_smem in the writing threads before the barrier that publishes it.
// The descriptor (wgmma_desc_sw128 below) of a tile whose low word is `lo`: plain arithmetic,
// outside the architecture guard because wgmma_f16_m64k16_rs (after it) is compiled for every
// architecture.
__device__ __forceinline__ unsigned long long wgmma_desc_sw128_of_lo(u32 lo) {
    return (unsigned long long)lo | ((unsigned long long)(1024 >> 4) << 32) | (1ull << 62);
}
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define BONSAI_WGMMA 1
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int PENDING>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(PENDING) : "memory");
}
__device__ __forceinline__ void fence_proxy_async_smem() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
// The matrix descriptor of a 128-byte-swizzled K-major tile at shared address `addr`: start
// address >> 4 (bits 0-13), leading byte offset 16 >> 4 (unused by this layout), stride byte
// offset 1024 >> 4 between 8-row groups (bits 32-45), layout 1 = 128-byte swizzle (bits 62-63).
// Its low word (start and leading byte offset) is wgmma_desc_lo's (after the emulator guard), the
// high word wgmma_desc_sw128_of_lo's constant.
__device__ __forceinline__ unsigned long long wgmma_desc_sw128(u32 addr) {
    return wgmma_desc_sw128_of_lo(((addr & 0x3FFFF) >> 4) | (1u << 16));
}
// The accumulator operand lists of the m64n256 (128 f32 per thread), m64n128 (64) and m64n64 (32)
// forms, and the matching "{%0, ..}" register lists (the operands that follow start at %128 /
// %64 / %32).
#define BONSAI_WGMMA_D8(d, o)                                                                              \
    "+f"(d[o]), "+f"(d[o + 1]), "+f"(d[o + 2]), "+f"(d[o + 3]), "+f"(d[o + 4]), "+f"(d[o + 5]), "+f"(d[o + 6]), \
        "+f"(d[o + 7])
#define BONSAI_WGMMA_D32(d) BONSAI_WGMMA_D8(d, 0), BONSAI_WGMMA_D8(d, 8), BONSAI_WGMMA_D8(d, 16), BONSAI_WGMMA_D8(d, 24)
#define BONSAI_WGMMA_D64(d)                                                                                  \
    BONSAI_WGMMA_D32(d), BONSAI_WGMMA_D8(d, 32), BONSAI_WGMMA_D8(d, 40), BONSAI_WGMMA_D8(d, 48),              \
        BONSAI_WGMMA_D8(d, 56)
#define BONSAI_WGMMA_R32                                                                                     \
    "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27," \
    "%28,%29,%30,%31}"
#define BONSAI_WGMMA_R64                                                                                     \
    "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27," \
    "%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53," \
    "%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}"
#define BONSAI_WGMMA_D128(d)                                                                                 \
    BONSAI_WGMMA_D64(d), BONSAI_WGMMA_D8(d, 64), BONSAI_WGMMA_D8(d, 72), BONSAI_WGMMA_D8(d, 80),               \
        BONSAI_WGMMA_D8(d, 88), BONSAI_WGMMA_D8(d, 96), BONSAI_WGMMA_D8(d, 104), BONSAI_WGMMA_D8(d, 112),      \
        BONSAI_WGMMA_D8(d, 120)
#define BONSAI_WGMMA_R128                                                                                    \
    "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26," \
    "%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50," \
    "%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74," \
    "%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98," \
    "%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118," \
    "%119,%120,%121,%122,%123,%124,%125,%126,%127}"
__device__ __forceinline__ void wgmma_f16_m64n128k16_rs_desc(float* d, const u32* a, unsigned long long desc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " BONSAI_WGMMA_R64
                 ", {%64,%65,%66,%67}, %68, p, 1, 1, 0;\n}\n"
                 : BONSAI_WGMMA_D64(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc)
                 : "memory");
}
__device__ __forceinline__ void wgmma_f16_m64n128k16_rs(float* d, const u32* a, const void* b_block, int k_chunk) {
    wgmma_f16_m64n128k16_rs_desc(d, a, wgmma_desc_sw128(smem_addr(b_block) + (u32)(k_chunk * 16)));
}
// The same with N = 256 (128 accumulators per thread; `b_block` holds 256 rows).
__device__ __forceinline__ void wgmma_f16_m64n256k16_rs_desc(float* d, const u32* a, unsigned long long desc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 " BONSAI_WGMMA_R128
                 ", {%128,%129,%130,%131}, %132, p, 1, 1, 0;\n}\n"
                 : BONSAI_WGMMA_D128(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc)
                 : "memory");
}
__device__ __forceinline__ void wgmma_f16_m64n256k16_rs(float* d, const u32* a, const void* b_block, int k_chunk) {
    wgmma_f16_m64n256k16_rs_desc(d, a, wgmma_desc_sw128(smem_addr(b_block) + (u32)(k_chunk * 16)));
}
// The same with N = 64 (32 accumulators per thread; `b_block` holds 64 rows).
__device__ __forceinline__ void wgmma_f16_m64n64k16_rs_desc(float* d, const u32* a, unsigned long long desc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " BONSAI_WGMMA_R32
                 ", {%32,%33,%34,%35}, %36, p, 1, 1, 0;\n}\n"
                 : BONSAI_WGMMA_D32(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc)
                 : "memory");
}
__device__ __forceinline__ void wgmma_f16_m64n64k16_rs(float* d, const u32* a, const void* b_block, int k_chunk) {
    wgmma_f16_m64n64k16_rs_desc(d, a, wgmma_desc_sw128(smem_addr(b_block) + (u32)(k_chunk * 16)));
}
// bf16 A (registers) x bf16 B (the K-major 128-byte-swizzled tile of wgmma_f16_m64n128k16_rs),
// N = 128. `accumulate` 0 ignores d's old values (d = A.B, the scale-d operand): a fresh
// product needs no zeroed accumulators.
__device__ __forceinline__ void wgmma_bf16_m64n128k16_rs(float* d, const u32* a, const void* b_block, int k_chunk,
                                                         int accumulate) {
    const unsigned long long desc = wgmma_desc_sw128(smem_addr(b_block) + (u32)(k_chunk * 16));
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " BONSAI_WGMMA_R64
                 ", {%64,%65,%66,%67}, %68, p, 1, 1, 0;\n}\n"
                 : BONSAI_WGMMA_D64(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate)
                 : "memory");
}
// The matrix descriptor of an MN-major ("transposed") 128-byte-swizzled B at shared address
// `addr` (1024-byte aligned): B's k rows are 128-byte rows of 64 consecutive n (16-byte chunk c
// of row k at chunk position c ^ (k % 8)), 8 k rows per 1024-byte block (stride byte offset
// 1024), and the next 64 n start `n_block_bytes` further (leading byte offset). PTX ISA,
// "Shared Memory Matrix Layout": MN-major 128B swizzle = ((8,8,m),(8,k)):((1,8,LBO),(64,SBO))
// in bf16 elements.
__device__ __forceinline__ unsigned long long wgmma_desc_sw128_mn(u32 addr, u32 n_block_bytes) {
    return (unsigned long long)((addr & 0x3FFFF) >> 4) | ((unsigned long long)((n_block_bytes & 0x3FFFF) >> 4) << 16) |
           ((unsigned long long)(1024 >> 4) << 32) | (1ull << 62);
}
// d += A.B, bf16, N = 128, with B MN-major (imm-trans-b = 1): `b_rows` holds this product's 16
// k rows (two 1024-byte blocks) of n 0..63, and n 64..127 lie `n_block_bytes` further. A
// row-major [k][n] matrix (e.g. attention's V, [key][dim]) staged in 128-byte rows is read in
// place.
__device__ __forceinline__ void wgmma_bf16_m64n128k16_rs_mn(float* d, const u32* a, const void* b_rows,
                                                            u32 n_block_bytes) {
    const unsigned long long desc = wgmma_desc_sw128_mn(smem_addr(b_rows), n_block_bytes);
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " BONSAI_WGMMA_R64
                 ", {%64,%65,%66,%67}, %68, p, 1, 1, 1;\n}\n"
                 : BONSAI_WGMMA_D64(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc)
                 : "memory");
}
// tf32 x tf32 -> f32, m64n128k8, BOTH operands from shared memory ("ss"): tf32 requires K-major
// A and B, each a 128-byte-swizzled tile like b_block above (rows of 128 bytes = 32 tf32 of k,
// 16-byte chunk c of row r at chunk position c ^ (r % 8), 1024-byte aligned): `a_block` holds the
// warpgroup's 64 A rows, `b_block` 128 B rows (columns of the product). This instruction's k
// 0..7 are chunks 2 k_step, 2 k_step + 1 (k_step 0..3): the descriptors start 32 k_step bytes
// into the tiles. The tensor cores read the top 19 bits of each f32 pattern (tf32). D as above;
// `accumulate` false ignores D's old contents (scale-d = 0: D = A B), true adds to them.
__device__ __forceinline__ void wgmma_tf32_m64n128k8_ss(float* d, const void* a_block, const void* b_block,
                                                        int k_step, bool accumulate) {
    const unsigned long long a_desc = wgmma_desc_sw128(smem_addr(a_block) + (u32)(k_step * 32));
    const unsigned long long b_desc = wgmma_desc_sw128(smem_addr(b_block) + (u32)(k_step * 32));
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 " BONSAI_WGMMA_R64 ", %64, %65, p, 1, 1;\n}\n"
                 : BONSAI_WGMMA_D64(d)
                 : "l"(a_desc), "l"(b_desc), "r"((int)accumulate)
                 : "memory");
}
#else
// Not sm_90a: the kernels that use these are never launched there (the launcher picks them on
// compute capability 9.0 only); they trap if they ever are.
__device__ __forceinline__ void wgmma_fence() { __trap(); }
__device__ __forceinline__ void wgmma_commit() { __trap(); }
template <int PENDING>
__device__ __forceinline__ void wgmma_wait() { __trap(); }
__device__ __forceinline__ void fence_proxy_async_smem() { __trap(); }
__device__ __forceinline__ void wgmma_f16_m64n128k16_rs(float*, const u32*, const void*, int) { __trap(); }
__device__ __forceinline__ void wgmma_f16_m64n128k16_rs_desc(float*, const u32*, unsigned long long) { __trap(); }
__device__ __forceinline__ void wgmma_f16_m64n64k16_rs_desc(float*, const u32*, unsigned long long) { __trap(); }
__device__ __forceinline__ void wgmma_f16_m64n256k16_rs_desc(float*, const u32*, unsigned long long) { __trap(); }
__device__ __forceinline__ void wgmma_f16_m64n64k16_rs(float*, const u32*, const void*, int) { __trap(); }
__device__ __forceinline__ void wgmma_f16_m64n256k16_rs(float*, const u32*, const void*, int) { __trap(); }
__device__ __forceinline__ void wgmma_bf16_m64n128k16_rs(float*, const u32*, const void*, int, int) { __trap(); }
__device__ __forceinline__ void wgmma_bf16_m64n128k16_rs_mn(float*, const u32*, const void*, u32) { __trap(); }
__device__ __forceinline__ void wgmma_tf32_m64n128k8_ss(float*, const void*, const void*, int, bool) { __trap(); }
#endif


#endif  // BONSAI_EMU

// The low word of wgmma_desc_sw128 for a tile: the start address >> 4 (bits 0-13) and the leading
// byte offset field (bit 16). A wgmma that starts a 16-byte multiple `off` past the tile has low
// word lo + off / 16 (shared addresses stay below 2^18: nothing carries out of the start field).
__device__ __forceinline__ u32 wgmma_desc_lo(const void* tile) {
    return ((smem_addr(tile) & 0x3FFFF) >> 4) | (1u << 16);
}

// N = 256, 128 or 64 by a template argument.
template <int N>
__device__ __forceinline__ void wgmma_f16_m64k16_rs(float* d, const u32* a, const void* b_block, int k_chunk) {
    static_assert(N == 256 || N == 128 || N == 64, "wgmma N is 256, 128 or 64 here");
    if constexpr (N == 256) {
        wgmma_f16_m64n256k16_rs(d, a, b_block, k_chunk);
    } else if constexpr (N == 128) {
        wgmma_f16_m64n128k16_rs(d, a, b_block, k_chunk);
    } else {
        wgmma_f16_m64n64k16_rs(d, a, b_block, k_chunk);
    }
}
// The same with the caller's wgmma_desc_lo(b_block), computed once for several wgmmas: the
// descriptor then costs an add per wgmma instead of being rebuilt from the address (4 uniform
// instructions). The emulator reads b_block and checks b_lo's start field against it modulo the
// field's 14 bits (its smem_addr is a host address, whose low 18 bits may wrap within a tile).
template <int N>
__device__ __forceinline__ void wgmma_f16_m64k16_rs(float* d, const u32* a, const void* b_block, int k_chunk,
                                                    u32 b_lo) {
    static_assert(N == 256 || N == 128 || N == 64, "wgmma N is 256, 128 or 64 here");
#ifdef BONSAI_EMU
    if (((b_lo ^ wgmma_desc_lo(b_block)) & 0x3FFFu) != 0) emu::kernel_fault("a wgmma descriptor that is not its tile's");
    wgmma_f16_m64k16_rs<N>(d, a, b_block, k_chunk);
#else
    const unsigned long long desc = wgmma_desc_sw128_of_lo(b_lo + (u32)k_chunk);
    if constexpr (N == 256) {
        wgmma_f16_m64n256k16_rs_desc(d, a, desc);
    } else if constexpr (N == 128) {
        wgmma_f16_m64n128k16_rs_desc(d, a, desc);
    } else {
        wgmma_f16_m64n64k16_rs_desc(d, a, desc);
    }
#endif
}
__device__ __forceinline__ float bf16_to_f32(u16 h) { return __int_as_float(((u32)h) << 16); }
// Two 16-bit values in one register, `lo` in the low half (the lower k / column of a fragment).
__device__ __forceinline__ u32 pack_b16(u16 lo, u16 hi) { return (u32)lo | ((u32)hi << 16); }

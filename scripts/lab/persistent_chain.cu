// Lab: what a persistent decode kernel could reach on this GPU, before writing one.
//
// One cooperative grid (one CTA per SM) walks 36 synthetic layers of Bonsai-8B's decode step.
// Each stage streams that stage's weight bytes (split evenly over the CTAs, every layer in its own
// buffer, so nothing stays in L2) and ends in a grid barrier, as a real stage would (its output is
// every later stage's input). Variants:
//   barrier   : the barriers alone (no weights): the fixed cost of the stage chain.
//   stream    : each CTA loads its slice after the barrier (no overlap across stages).
//   prefetch  : each CTA cp.asyncs the NEXT stage's slice into shared memory (double buffer)
//               before it waits at the barrier: DRAM keeps streaming through every barrier.
//   ring      : one producer warp per CTA streams every stage's slice, in order, through a ring
//               of 8 KB shared-memory chunks (up to RING_SLOTS chunks, ~one layer's slice,
//               ahead), never waiting on a barrier, only on ring space; the other 15 warps pass
//               the grid barriers and consume each stage's chunks as they land. The bound of a
//               persistent decode kernel whose weight stream is decoupled from its dependencies.
//   ring_tma  : the same ring fed by one producer thread with bulk copies (TMA,
//               cp.async.bulk ... mbarrier::complete_tx) of 16 KB chunks, each slot's mbarrier
//               completing when its bytes land: the whole ring can be in flight.
//   tma_nobar : ring_tma without the grid barriers: the ring's own streaming rate.
//   tma_sleep : ring_tma whose barrier poll sleeps 64 ns between reads of the counter.
//   bar_load  : the barriers alone while one thread per CTA bulk-prefetches the step's bytes into
//               L2 (DRAM busy): a grid barrier's cost under a weight stream.
//   tma_l2+N  : ring_tma whose producer also asks L2 for each chunk N layers ahead (bulk prefetch),
//               so DRAM keeps streaming while the ring waits on the consumers.
//   tma_ifN   : ring_tma whose producer keeps at most N chunks in flight (waits for chunk i - N
//               to land before it issues chunk i): a throttled stream, shorter DRAM / L2 queues,
//               so the barriers' own round trips may queue less.
//   act_ifN   : tma_ifN (act_all: unthrottled) with the activations a real stage moves: before its
//               barrier each CTA writes its share of the next stage's input (16 bits per element,
//               plain stores), after it every CTA reads the whole input from L2 (ld.global.cg)
//               before it consumes the stage's weights. The floor of a persistent decode step
//               whose GEMVs cost nothing.
//   act_only  : act_all without weights: the barrier + activation chain alone.
//   rlx_only, rlx_all : act_only, act_all with barriers that neither release nor acquire (timing
//               only: what the release's fence costs, idle and under the stream).
//   flag_only, flag_all, flag_if4 : no grid barrier: each stage's input travels as 64-bit words
//               (payload + epoch, relaxed stores), polled word by word (act_only / act_all /
//               act_if4 with the data as its own signal).
//   l2_aN     : act_all's chain with the weights asked into L2 N stages ahead by fire-and-forget
//               bulk prefetches (one thread per CTA, its own slices) and read from L2 by the
//               consumers after the activations: no weight bytes in flight to the SM while it
//               waits at a barrier.
//   l2sm_aN   : l2_aN (a0: no L2 prefetch), each stage's slice copied from L2 into shared memory
//               one stage early, right after the activations are read.
//   bar_tma, bar_ldg (+ _rlx): the barriers alone while a warp of each CTA streams weights the
//               whole time, by TMA into shared memory or by plain loads (relaxed barriers: _rlx).
//               Against bar_load (DRAM as busy, nothing in flight on the SM itself).
//   floor     : one kernel reading all the bytes once (the copy-speed bound of the step).
// Build: nvcc -O3 -arch=sm_90 -o persistent_chain persistent_chain.cu   Run: ./persistent_chain
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); std::exit(1); } } while (0)

constexpr int THREADS = 512;
constexpr int LAYERS = 36;
// Bytes per stage of one Bonsai-8B layer (Q1_0: K/8 + K/64 bytes per row): qkv with RoPE and the
// kv write, attention at a short context (~0.5 MB of cache), attn_out, gate_up, down. (Before
// 2026-12-01's eighth session a sixth, empty stage stood for a separate kv-write launch.)
constexpr long long STAGE_BYTES[] = {6144LL * 4096 * 9 / 64, 512 * 1024, 4096LL * 4096 * 9 / 64,
                                     24576LL * 4096 * 9 / 64, 4096LL * 12288 * 9 / 64};
// Each stage's input, 16 bits per element (act_* variants): the normed x, q|k|v, the attention's
// heads, the normed residual, the SwiGLU features.
__host__ __device__ constexpr int x_bytes(int stage) {
    return stage == 1 ? 6144 * 2 : stage == 4 ? 12288 * 2 : 4096 * 2;
}
constexpr int MAX_X_BYTES = 12288 * 2;
constexpr int STAGES = sizeof(STAGE_BYTES) / sizeof(STAGE_BYTES[0]);
// Largest per-CTA slice held in shared memory, times two buffers.
constexpr int MAX_SLICE = 112 * 1024;

// The barrier counter's arrive and poll: release / acquire, or RELAXED (timing only).
template <bool RELAXED = false>
__device__ __forceinline__ void counter_add(unsigned* p, unsigned v) {
    if (RELAXED) asm volatile("red.relaxed.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
    else asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
template <bool RELAXED = false>
__device__ __forceinline__ unsigned counter_read(const unsigned* p) {
    unsigned v;
    if (RELAXED) asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    else asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
// Thread 0's part of grid barrier number `n`: arrive, then poll until every CTA has (BACKOFF:
// sleeping between polls). RELAXED: no release / acquire (orders no data: it times the signal
// alone, without the fence a release implies).
template <bool BACKOFF = false, bool RELAXED = false>
__device__ __forceinline__ void grid_arrive_and_wait(unsigned* counter, unsigned n) {
    counter_add<RELAXED>(counter, 1);
    const unsigned target = (n + 1) * gridDim.x;
    while (counter_read<RELAXED>(counter) < target) {
        if (BACKOFF) __nanosleep(64);
    }
}
// Grid barrier number `n` (0, 1, ...): all writes before it are visible to every CTA after it.
__device__ __forceinline__ void grid_barrier(unsigned* counter, unsigned n) {
    __syncthreads();
    if (threadIdx.x == 0) grid_arrive_and_wait(counter, n);
    __syncthreads();
}
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

struct Chain {
    const uint4* const* stage_ptr;  // [LAYERS * STAGES] device pointers to each stage's bytes
    const long long* slice;         // [STAGES] bytes per CTA (multiple of 16)
    unsigned* counter;
    unsigned* sink;
    // Non-null in the traced ring_tma run: per (stage, CTA) three %globaltimer figures (ns) of
    // consumer thread 0: before its grid barrier, after it, and the time spent waiting for the
    // stage's chunks to land.
    unsigned long long* trace = nullptr;
    // Two buffers of MAX_X_BYTES: stage s reads act[s & 1] and writes act[(s + 1) & 1] (act_*).
    uint4* act[2] = {nullptr, nullptr};
    unsigned run = 0;  // launch number: flag_* epochs differ between launches
};
__device__ __forceinline__ unsigned long long global_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ const uint4* slice_of(const Chain& c, int s) {
    const int stage = s % STAGES;
    return c.stage_ptr[s] + (long long)blockIdx.x * (c.slice[stage] / 16);
}

// MODE 0: barriers only; 1: load after the barrier; 2: prefetch the next slice before it.
template <int MODE>
__global__ void __launch_bounds__(THREADS, 1) chain(Chain c) {
    extern __shared__ uint4 buf[];
    uint4* half[2] = {buf, buf + MAX_SLICE / 16};
    unsigned acc = 0;
    const int total = LAYERS * STAGES;
    if (MODE == 2) {
        const uint4* src = slice_of(c, 0);
        for (long long i = threadIdx.x; i < c.slice[0] / 16; i += THREADS) cp_async16(&half[0][i], &src[i]);
        cp_commit();
    }
    for (int s = 0; s < total; ++s) {
        const long long n16 = c.slice[s % STAGES] / 16;
        if (MODE == 2) {
            __syncthreads();  // every thread is done reading the buffer the next slice goes into
            if (s + 1 < total) {
                const uint4* src = slice_of(c, s + 1);
                const long long m16 = c.slice[(s + 1) % STAGES] / 16;
                for (long long i = threadIdx.x; i < m16; i += THREADS) cp_async16(&half[(s + 1) & 1][i], &src[i]);
            }
            cp_commit();
            cp_wait<1>();  // this stage's slice has landed (for this thread; the barrier makes it CTA-wide)
        }
        grid_barrier(c.counter, s);  // the previous stage's outputs are ready
        if (MODE == 1) {
            const uint4* src = slice_of(c, s);
            for (long long i = threadIdx.x; i < n16; i += THREADS) {
                uint4 v = __ldcs(&src[i]);
                acc ^= v.x ^ v.y ^ v.z ^ v.w;
            }
        } else if (MODE == 2) {
            for (long long i = threadIdx.x; i < n16; i += THREADS) {
                uint4 v = half[s & 1][i];
                acc ^= v.x ^ v.y ^ v.z ^ v.w;
            }
        }
    }
    if (acc == 0x9e3779b9u) c.sink[threadIdx.x] = acc;  // keeps the loads
}

// The ring variant: 8 KB chunks, RING_SLOTS of them; the producer keeps RING_DEPTH commit groups
// in flight (RING_SLOTS > RING_DEPTH, so the chunk it waits to overwrite is always published).
constexpr int CHUNK16 = 512;  // uint4 per chunk
constexpr int RING_SLOTS = 2 * MAX_SLICE / (CHUNK16 * 16);
constexpr int RING_DEPTH = 8;
constexpr int CONSUMER_WARPS = THREADS / 32 - 1;
constexpr int CONSUMERS = CONSUMER_WARPS * 32;
static_assert(RING_SLOTS > RING_DEPTH, "the producer must publish a chunk before it can wait to reuse its slot");

// The consumer warps' barrier (named barrier 1): the producer warp never takes part.
__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 1, %0;" ::"n"(CONSUMERS) : "memory"); }
// BACKOFF: sleep between polls (fewer L2 requests on the counter's line while DRAM is busy).
template <bool BACKOFF = false, bool RELAXED = false>
__device__ __forceinline__ void grid_barrier_consumers(unsigned* counter, unsigned n) {
    consumers_sync();
    if (threadIdx.x == 0) grid_arrive_and_wait<BACKOFF, RELAXED>(counter, n);
    consumers_sync();
}
__device__ __forceinline__ unsigned ld_volatile_shared(const unsigned* p) { return *(volatile const unsigned*)p; }

// A consumer warp's share of one landed chunk (m uint4) XORed into acc, then the warp frees the
// slot (`freed`: CONSUMER_WARPS per chunk).
__device__ __forceinline__ void consume_chunk(const uint4* chunk, long long m, unsigned* freed, unsigned& acc) {
    for (long long i = threadIdx.x; i < m; i += CONSUMERS) {
        const uint4 v = chunk[i];
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    __threadfence_block();  // this lane's reads of the slot, before the warp frees it
    __syncwarp();
    if (threadIdx.x % 32 == 0) atomicAdd(freed, 1u);
}

__global__ void __launch_bounds__(THREADS, 1) chain_ring(Chain c) {
    extern __shared__ uint4 buf[];
    // published[slot]: how many chunks the slot has held (filled and visible); freed[slot]: consumer
    // warps done with the slot's chunks, cumulative (CONSUMER_WARPS per chunk).
    __shared__ unsigned published[RING_SLOTS], freed[RING_SLOTS];
    for (int i = threadIdx.x; i < RING_SLOTS; i += THREADS) published[i] = freed[i] = 0;
    __syncthreads();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int total = LAYERS * STAGES;
    if (warp == CONSUMER_WARPS) {  // the producer
        long long issued = 0, marked = 0;
        auto publish_oldest = [&]() {
            __threadfence_block();  // this lane's landed copies, before the flag
            __syncwarp();
            if (lane == 0) *(volatile unsigned*)&published[marked % RING_SLOTS] = (unsigned)(marked / RING_SLOTS + 1);
            ++marked;
        };
        for (int s = 0; s < total; ++s) {
            const uint4* src = slice_of(c, s);
            const long long n16 = c.slice[s % STAGES] / 16;
            for (long long first = 0; first < n16; first += CHUNK16) {
                const int slot = (int)(issued % RING_SLOTS);
                const unsigned round = (unsigned)(issued / RING_SLOTS);
                while (ld_volatile_shared(&freed[slot]) < round * CONSUMER_WARPS) {
                }
                const long long m = n16 - first < CHUNK16 ? n16 - first : CHUNK16;
                for (long long i = lane; i < m; i += 32) cp_async16(&buf[slot * CHUNK16 + i], &src[first + i]);
                cp_commit();
                ++issued;
                if (issued - marked > RING_DEPTH) {
                    cp_wait<RING_DEPTH>();
                    publish_oldest();
                }
            }
        }
        cp_wait<0>();
        while (marked < issued) publish_oldest();
        return;
    }
    unsigned acc = 0;
    long long chunk = 0;
    for (int s = 0; s < total; ++s) {
        grid_barrier_consumers(c.counter, s);  // the previous stage's outputs are ready
        const long long n16 = c.slice[s % STAGES] / 16;
        for (long long first = 0; first < n16; first += CHUNK16, ++chunk) {
            const int slot = (int)(chunk % RING_SLOTS);
            const unsigned want = (unsigned)(chunk / RING_SLOTS + 1);
            while (ld_volatile_shared(&published[slot]) < want) {
            }
            __threadfence_block();  // the chunk's reads after the flag's
            const long long m = n16 - first < CHUNK16 ? n16 - first : CHUNK16;
            consume_chunk(&buf[slot * CHUNK16], m, &freed[slot], acc);
        }
    }
    if (acc == 0x9e3779b9u) c.sink[threadIdx.x] = acc;  // keeps the loads
}

// ring_tma: 16 KB chunks, every slot an mbarrier (one arrival, the producer's expect_tx).
constexpr int TMA_CHUNK = 16 * 1024;
constexpr int TMA_SLOTS = 2 * MAX_SLICE / TMA_CHUNK;
// This CTA's slice of stage t asked into L2 in 16 KB bulk prefetches (fire and forget).
__device__ __forceinline__ void prefetch_slice_l2(const Chain& c, int t) {
    const char* src = reinterpret_cast<const char*>(slice_of(c, t));
    const long long bytes = c.slice[t % STAGES];
    for (long long off = 0; off < bytes; off += TMA_CHUNK) {
        const unsigned n = (unsigned)(bytes - off < TMA_CHUNK ? bytes - off : TMA_CHUNK);
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(src + off), "r"(n) : "memory");
    }
}
// The l2_* producer thread: stages first.. prefetched, stage t once the consumers have begun
// stage t - AHEAD (`begun`: stages begun, in shared memory).
template <int AHEAD>
__device__ __forceinline__ void prefetch_stages_ahead(const Chain& c, const volatile int& begun, int first) {
    for (int t = first; t < LAYERS * STAGES; ++t) {
        while (begun < t - AHEAD + 1) {
        }
        prefetch_slice_l2(c, t);
    }
}
// This CTA's share of stage s's input (the previous stage's output), written by the consumers
// before the stage's barrier.
__device__ __forceinline__ void write_act_share(const Chain& c, int s, unsigned acc) {
    const int share16 = (x_bytes(s % STAGES) / 16 + gridDim.x - 1) / gridDim.x;
    uint4* dst = c.act[s & 1] + (long long)blockIdx.x * share16;
    const int end16 = x_bytes(s % STAGES) / 16 - blockIdx.x * share16;
    for (int i = threadIdx.x; i < share16 && i < end16; i += CONSUMERS) dst[i] = make_uint4(acc, s, i, 0);
}
// Stage s's whole input (every CTA wrote a share) read from L2 by the consumers into acc.
__device__ __forceinline__ void read_act(const Chain& c, int s, unsigned& acc) {
    const uint4* src = c.act[s & 1];
    for (int i = threadIdx.x; i < x_bytes(s % STAGES) / 16; i += CONSUMERS) {
        const uint4 v = __ldcg(&src[i]);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
}

__device__ __forceinline__ unsigned smem_addr(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mbar_init(unsigned long long* bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(unsigned long long* bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned long long* bar, unsigned parity) {
    asm volatile(
        "{\n .reg .pred done;\n wait_%=:\n"
        " mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        " @!done bra wait_%=;\n}" ::"r"(smem_addr(bar)),
        "r"(parity)
        : "memory");
}
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, unsigned bytes, unsigned long long* bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     smem_addr(dst)),
                 "l"(src), "r"(bytes), "r"(smem_addr(bar))
                 : "memory");
}

// BARRIERS false: the consumers skip the grid barriers (the ring's streaming rate alone);
// BACKOFF: the barrier's poll sleeps between reads; L2_AHEAD: with each chunk the producer also
// asks L2 for the same chunk L2_AHEAD layers later (DRAM streams into L2 regardless of the ring);
// INFLIGHT > 0: at most that many chunks requested and not yet landed; ACTIVATIONS: each stage
// writes its share of the next stage's input before the barrier and reads its whole input after.
// RELAXED: the barriers without release / acquire (timing only; see grid_arrive_and_wait).
// FLAGS: no barrier at all; the activations are 64-bit words (32 payload bits and the stage's
// epoch), stored relaxed (single-copy atomic) and polled word by word until each carries this
// stage's epoch: the data is its own signal, no fence, no counter (needs BARRIERS false).
template <bool BARRIERS, bool BACKOFF = false, int L2_AHEAD = 0, int INFLIGHT = 0, bool ACTIVATIONS = false,
          bool RELAXED = false, bool FLAGS = false>
__global__ void __launch_bounds__(THREADS, 1) chain_ring_tma(Chain c) {
    extern __shared__ uint4 buf[];
    __shared__ __align__(8) unsigned long long full[TMA_SLOTS];
    __shared__ unsigned freed[TMA_SLOTS];
    if (threadIdx.x < TMA_SLOTS) {
        mbar_init(&full[threadIdx.x], 1);
        freed[threadIdx.x] = 0;
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    __syncthreads();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int total = LAYERS * STAGES;
    constexpr long long CHUNK_U4 = TMA_CHUNK / 16;
    if (warp == CONSUMER_WARPS) {  // the producer: one thread
        if (lane != 0) return;
        // The first L2_AHEAD layers ahead of the ring: asked for at once.
        for (int s = 0; s < L2_AHEAD * STAGES && s < total; ++s) {
            const char* p = reinterpret_cast<const char*>(slice_of(c, s));
            for (long long off = 0; off < c.slice[s % STAGES]; off += TMA_CHUNK) {
                const long long left = c.slice[s % STAGES] - off;
                asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p + off),
                             "r"((unsigned)(left < TMA_CHUNK ? left : TMA_CHUNK))
                             : "memory");
            }
        }
        long long issued = 0;
        for (int s = 0; s < total; ++s) {
            const uint4* src = slice_of(c, s);
            const long long n16 = c.slice[s % STAGES] / 16;
            for (long long first = 0; first < n16; first += CHUNK_U4, ++issued) {
                const int slot = (int)(issued % TMA_SLOTS);
                const unsigned round = (unsigned)(issued / TMA_SLOTS);
                while (ld_volatile_shared(&freed[slot]) < round * CONSUMER_WARPS) {
                }
                if (INFLIGHT > 0 && issued >= INFLIGHT) {  // chunk issued - INFLIGHT has landed
                    const long long old = issued - INFLIGHT;
                    mbar_wait(&full[old % TMA_SLOTS], (unsigned)(old / TMA_SLOTS) & 1u);
                }
                const unsigned bytes = (unsigned)((n16 - first < CHUNK_U4 ? n16 - first : CHUNK_U4) * 16);
                mbar_expect_tx(&full[slot], bytes);
                bulk_copy(&buf[slot * CHUNK_U4], &src[first], bytes, &full[slot]);
                if (L2_AHEAD > 0 && s + L2_AHEAD * STAGES < total)
                    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(
                                     slice_of(c, s + L2_AHEAD * STAGES) + first),
                                 "r"(bytes)
                                 : "memory");
            }
        }
        return;
    }
    unsigned acc = 0;
    long long chunk = 0;
    for (int s = 0; s < total; ++s) {
        const bool traced = c.trace != nullptr && threadIdx.x == 0;
        unsigned long long* rec = traced ? c.trace + 3 * ((long long)s * gridDim.x + blockIdx.x) : nullptr;
        if (traced) rec[0] = global_ns();
        const unsigned epoch = c.run * 1000u + (unsigned)s + 1u;
        if (FLAGS) {  // this CTA's share of stage s's input as flagged words, then all of it polled
            const int words = x_bytes(s % STAGES) / 4;
            const int share = (words + gridDim.x - 1) / gridDim.x;
            unsigned long long* w = reinterpret_cast<unsigned long long*>(c.act[s & 1]);
            for (int i = blockIdx.x * share + threadIdx.x; i < (blockIdx.x + 1) * share && i < words; i += CONSUMERS) {
                const unsigned long long v = ((unsigned long long)epoch << 32) | (acc ^ (unsigned)i);
                asm volatile("st.relaxed.gpu.global.b64 [%0], %1;" ::"l"(w + i), "l"(v) : "memory");
            }
            for (int i = threadIdx.x; i < words; i += CONSUMERS) {
                unsigned long long v;
                do {
                    asm volatile("ld.relaxed.gpu.global.b64 %0, [%1];" : "=l"(v) : "l"(w + i) : "memory");
                } while ((unsigned)(v >> 32) != epoch);
                acc ^= (unsigned)v;
            }
            consumers_sync();
        }
        if (ACTIVATIONS) write_act_share(c, s, acc);
        if (BARRIERS) grid_barrier_consumers<BACKOFF, RELAXED>(c.counter, s);  // the previous stage's outputs are ready
        if (ACTIVATIONS) {  // the whole input, before the weights
            read_act(c, s, acc);
            consumers_sync();  // a real stage stages x in shared memory before its first product
        }
        if (traced) rec[1] = global_ns();
        unsigned long long waited = 0;
        const long long n16 = c.slice[s % STAGES] / 16;
        for (long long first = 0; first < n16; first += CHUNK_U4, ++chunk) {
            const int slot = (int)(chunk % TMA_SLOTS);
            const unsigned long long w0 = traced ? global_ns() : 0;
            mbar_wait(&full[slot], (unsigned)(chunk / TMA_SLOTS) & 1u);
            if (traced) waited += global_ns() - w0;
            const long long m = n16 - first < CHUNK_U4 ? n16 - first : CHUNK_U4;
            consume_chunk(&buf[slot * CHUNK_U4], m, &freed[slot], acc);
        }
        if (traced) rec[2] = waited;
    }
    if (acc == 0x9e3779b9u) c.sink[threadIdx.x] = acc;  // keeps the loads
}

// The grid barriers alone while one thread per CTA keeps DRAM busy with bulk L2 prefetches of
// the step's bytes (fire and forget): the barrier's cost under a full weight stream.
__global__ void __launch_bounds__(THREADS, 1) barriers_under_load(Chain c) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int total = LAYERS * STAGES;
    if (warp == CONSUMER_WARPS) {
        if (lane != 0) return;
        for (int s = 0; s < total; ++s) prefetch_slice_l2(c, s);
        return;
    }
    for (int s = 0; s < total; ++s) grid_barrier_consumers(c.counter, s);
}

// The grid barriers alone while warp 15 of every CTA streams weights the whole time (until the
// CTA's last barrier): TMA: one thread, bulk copies of 16 KB into shared-memory slots, 4 in
// flight; else the warp's lanes with plain 16-byte streaming loads, 8 per lane in flight. Does a
// barrier slow down because DRAM is busy (bar_load: no) or because its own SM has loads in flight?
template <bool TMA, bool RELAXED>
__global__ void __launch_bounds__(THREADS, 1) barriers_under_stream(Chain c) {
    extern __shared__ uint4 buf[];
    __shared__ __align__(8) unsigned long long full[4];
    __shared__ volatile unsigned done;
    if (threadIdx.x < 4) mbar_init(&full[threadIdx.x], 1);
    if (threadIdx.x == 0) done = 0;
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    __syncthreads();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int total = LAYERS * STAGES;
    if (warp == CONSUMER_WARPS) {
        if (TMA && lane != 0) return;
        unsigned acc = 0;
        long long issued = 0;
        for (int s = 0; !done; s = (s + 1) % total) {
            const uint4* src = slice_of(c, s);
            const long long n16 = c.slice[s % STAGES] / 16;
            if (TMA) {
                for (long long first = 0; first < n16 && !done; first += TMA_CHUNK / 16, ++issued) {
                    const int slot = (int)(issued % 4);
                    if (issued >= 4) mbar_wait(&full[slot], (unsigned)((issued - 4) / 4) & 1u);
                    const long long m = n16 - first < TMA_CHUNK / 16 ? n16 - first : TMA_CHUNK / 16;
                    mbar_expect_tx(&full[slot], (unsigned)(m * 16));
                    bulk_copy(&buf[slot * (TMA_CHUNK / 16)], &src[first], (unsigned)(m * 16), &full[slot]);
                }
            } else {
                for (long long first = 0; first < n16 && !done; first += 32 * 8) {
                    uint4 v[8];
#pragma unroll
                    for (int u = 0; u < 8; ++u) {
                        const long long i = first + u * 32 + lane;
                        v[u] = i < n16 ? __ldcs(&src[i]) : make_uint4(0, 0, 0, 0);
                    }
#pragma unroll
                    for (int u = 0; u < 8; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
                }
            }
        }
        if (TMA)  // the copies still in flight land before the CTA exits
            for (long long j = issued > 4 ? issued - 4 : 0; j < issued; ++j) mbar_wait(&full[j % 4], (unsigned)(j / 4) & 1u);
        if (acc == 0x9e3779b9u) c.sink[threadIdx.x] = acc;
        return;
    }
    for (int s = 0; s < total; ++s) grid_barrier_consumers<false, RELAXED>(c.counter, s);
    if (threadIdx.x == 0) done = 1;
}

// l2_aN: the weights reach L2 ahead of their stage, by fire-and-forget bulk prefetches (nothing in
// flight on the SM itself), and the consumers read their slice from L2 after the barrier and the
// activations (act_all's chain). One producer thread per CTA prefetches its own slice of stage t
// once the consumers have begun stage t - AHEAD (a counter in shared memory), so L2 holds about
// AHEAD stages of weights at a time.
template <int AHEAD>
__global__ void __launch_bounds__(THREADS, 1) chain_l2(Chain c) {
    __shared__ volatile int begun;  // stages the consumers have begun
    if (threadIdx.x == 0) begun = 0;
    __syncthreads();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int total = LAYERS * STAGES;
    if (warp == CONSUMER_WARPS) {
        if (lane == 0) prefetch_stages_ahead<AHEAD>(c, begun, 0);
        return;
    }
    unsigned acc = 0;
    for (int s = 0; s < total; ++s) {
        if (threadIdx.x == 0) begun = s + 1;
        write_act_share(c, s, acc);
        grid_barrier_consumers(c.counter, s);
        read_act(c, s, acc);
        consumers_sync();
        const uint4* w = slice_of(c, s);
        const long long n16 = c.slice[s % STAGES] / 16;
        for (long long i = threadIdx.x; i < n16; i += CONSUMERS) {
            const uint4 v = __ldcs(&w[i]);
            acc ^= v.x ^ v.y ^ v.z ^ v.w;
        }
    }
    if (acc == 0x9e3779b9u) c.sink[threadIdx.x] = acc;  // keeps the loads
}

// l2sm_aN: l2_aN's prefetches (AHEAD 0: none), but each stage's slice is copied from L2 into
// shared memory (cp.async, double buffer) one stage early, issued right after the stage's
// activations: the copies are L2 hits that land while the stage computes, so little is in flight
// on the SM at its next barrier, and the stage's own weights are in shared memory when it starts.
template <int AHEAD>
__global__ void __launch_bounds__(THREADS, 1) chain_l2_smem(Chain c) {
    extern __shared__ uint4 buf[];
    uint4* half[2] = {buf, buf + MAX_SLICE / 16};
    __shared__ volatile int begun;
    if (threadIdx.x == 0) begun = 0;
    __syncthreads();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int total = LAYERS * STAGES;
    if (warp == CONSUMER_WARPS) {
        if (lane == 0 && AHEAD > 0) prefetch_stages_ahead<AHEAD>(c, begun, 1);
        return;
    }
    unsigned acc = 0;
    {
        const uint4* w = slice_of(c, 0);
        for (long long i = threadIdx.x; i < c.slice[0] / 16; i += CONSUMERS) cp_async16(&half[0][i], &w[i]);
        cp_commit();
    }
    for (int s = 0; s < total; ++s) {
        if (threadIdx.x == 0) begun = s + 1;
        write_act_share(c, s, acc);
        grid_barrier_consumers(c.counter, s);  // also: every consumer is done with half[(s + 1) & 1]
        read_act(c, s, acc);
        if (s + 1 < total) {
            const uint4* w = slice_of(c, s + 1);
            for (long long i = threadIdx.x; i < c.slice[(s + 1) % STAGES] / 16; i += CONSUMERS)
                cp_async16(&half[(s + 1) & 1][i], &w[i]);
        }
        cp_commit();
        cp_wait<1>();      // this thread's copies of slice s
        consumers_sync();  // everyone's
        const long long n16 = c.slice[s % STAGES] / 16;
        for (long long i = threadIdx.x; i < n16; i += CONSUMERS) {
            const uint4 v = half[s & 1][i];
            acc ^= v.x ^ v.y ^ v.z ^ v.w;
        }
    }
    if (acc == 0x9e3779b9u) c.sink[threadIdx.x] = acc;  // keeps the loads
}

__global__ void read_all(const uint4* p, long long n16, unsigned* sink) {
    unsigned acc = 0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n16; i += (long long)gridDim.x * blockDim.x) {
        uint4 v = __ldcs(&p[i]);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x9e3779b9u) sink[threadIdx.x] = acc;
}

float median(std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int main() {
    int sms = 0;
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    std::vector<long long> slice(STAGES);
    long long per_layer = 0;
    for (int s = 0; s < STAGES; ++s) {
        slice[s] = (STAGE_BYTES[s] / sms + 15) / 16 * 16;
        per_layer += slice[s] * sms;
        if (slice[s] > MAX_SLICE) { std::fprintf(stderr, "slice %d too big\n", s); return 1; }
    }
    const long long total_bytes = per_layer * LAYERS;
    uint4* weights;
    CHECK(cudaMalloc(&weights, total_bytes));
    CHECK(cudaMemset(weights, 1, total_bytes));
    std::vector<const uint4*> ptrs(LAYERS * STAGES);
    long long off = 0;
    for (int l = 0; l < LAYERS; ++l)
        for (int s = 0; s < STAGES; ++s) {
            ptrs[l * STAGES + s] = weights + off / 16;
            off += slice[s] * sms;
        }
    const uint4** d_ptrs;
    long long* d_slice;
    unsigned *counter, *sink;
    CHECK(cudaMalloc(&d_ptrs, ptrs.size() * sizeof(void*)));
    CHECK(cudaMemcpy(d_ptrs, ptrs.data(), ptrs.size() * sizeof(void*), cudaMemcpyHostToDevice));
    CHECK(cudaMalloc(&d_slice, STAGES * sizeof(long long)));
    CHECK(cudaMemcpy(d_slice, slice.data(), STAGES * sizeof(long long), cudaMemcpyHostToDevice));
    CHECK(cudaMalloc(&counter, 4));
    CHECK(cudaMalloc(&sink, 4 * THREADS));
    Chain c{d_ptrs, d_slice, counter, sink};
    // Twice the 16-bit activations' bytes: flag_* words carry 32 payload bits each.
    CHECK(cudaMalloc(&c.act[0], 2 * MAX_X_BYTES));
    CHECK(cudaMalloc(&c.act[1], 2 * MAX_X_BYTES));
    CHECK(cudaMemset(c.act[0], 0, 2 * MAX_X_BYTES));
    CHECK(cudaMemset(c.act[1], 0, 2 * MAX_X_BYTES));
    // act_only: the same chain with no weight bytes.
    long long* d_slice_zero;
    CHECK(cudaMalloc(&d_slice_zero, STAGES * sizeof(long long)));
    CHECK(cudaMemset(d_slice_zero, 0, STAGES * sizeof(long long)));
    Chain c_zero = c;
    c_zero.slice = d_slice_zero;
    const int smem = 2 * MAX_SLICE;
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    std::printf("persistent chain: %d CTAs x %d threads, %d layers x %d stages (%d grid barriers), %.1f MB per step\n",
                sms, THREADS, LAYERS, STAGES, LAYERS * STAGES, total_bytes / 1e6);
    struct Mode {
        const char* name;
        const void* fn;
        bool no_weights;
    };
    const Mode modes[] = {
        {"barrier", (const void*)chain<0>, false},
        {"stream", (const void*)chain<1>, false},
        {"prefetch", (const void*)chain<2>, false},
        {"ring", (const void*)chain_ring, false},
        {"ring_tma", (const void*)chain_ring_tma<true>, false},
        {"tma_nobar", (const void*)chain_ring_tma<false>, false},
        {"tma_sleep", (const void*)chain_ring_tma<true, true>, false},
        {"bar_load", (const void*)barriers_under_load, false},
        {"tma_l2+1", (const void*)chain_ring_tma<true, false, 1>, false},
        {"tma_if8", (const void*)chain_ring_tma<true, false, 0, 8>, false},
        {"tma_if4", (const void*)chain_ring_tma<true, false, 0, 4>, false},
        {"tma_if2", (const void*)chain_ring_tma<true, false, 0, 2>, false},
        {"nobar_if4", (const void*)chain_ring_tma<false, false, 0, 4>, false},
        {"nobar_if2", (const void*)chain_ring_tma<false, false, 0, 2>, false},
        {"act_only", (const void*)chain_ring_tma<true, false, 0, 0, true>, true},
        {"act_all", (const void*)chain_ring_tma<true, false, 0, 0, true>, false},
        {"act_if4", (const void*)chain_ring_tma<true, false, 0, 4, true>, false},
        {"act_if2", (const void*)chain_ring_tma<true, false, 0, 2, true>, false},
        {"rlx_only", (const void*)chain_ring_tma<true, false, 0, 0, true, true>, true},
        {"rlx_all", (const void*)chain_ring_tma<true, false, 0, 0, true, true>, false},
        {"flag_only", (const void*)chain_ring_tma<false, false, 0, 0, false, false, true>, true},
        {"flag_all", (const void*)chain_ring_tma<false, false, 0, 0, false, false, true>, false},
        {"flag_if4", (const void*)chain_ring_tma<false, false, 0, 4, false, false, true>, false},
        {"l2_a1", (const void*)chain_l2<1>, false},
        {"l2_a2", (const void*)chain_l2<2>, false},
        {"l2_a3", (const void*)chain_l2<3>, false},
        {"l2_a5", (const void*)chain_l2<5>, false},
        {"l2sm_a0", (const void*)chain_l2_smem<0>, false},
        {"l2sm_a2", (const void*)chain_l2_smem<2>, false},
        {"l2sm_a3", (const void*)chain_l2_smem<3>, false},
        {"l2sm_a5", (const void*)chain_l2_smem<5>, false},
        {"l2sm_a10", (const void*)chain_l2_smem<10>, false},
        {"bar_tma", (const void*)barriers_under_stream<true, false>, false},
        {"bar_tma_rlx", (const void*)barriers_under_stream<true, true>, false},
        {"bar_ldg", (const void*)barriers_under_stream<false, false>, false},
        {"bar_ldg_rlx", (const void*)barriers_under_stream<false, true>, false},
    };
    for (const Mode& m : modes) {
        CHECK(cudaFuncSetAttribute(m.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        std::vector<float> ms;
        for (int r = 0; r < 25; ++r) {
            CHECK(cudaMemset(counter, 0, 4));
            c.run = c_zero.run = 1000u * (unsigned)(&m - modes) + (unsigned)r + 1u;
            void* args[] = {m.no_weights ? (void*)&c_zero : (void*)&c};
            CHECK(cudaEventRecord(a));
            CHECK(cudaLaunchCooperativeKernel(m.fn, sms, THREADS, args, smem, 0));
            CHECK(cudaEventRecord(b));
            CHECK(cudaEventSynchronize(b));
            float t;
            CHECK(cudaEventElapsedTime(&t, a, b));
            if (r >= 3) ms.push_back(t);
        }
        const float us = median(ms) * 1e3f;
        // bar_*: the time is the barrier chain's (the stream stops with it): no bandwidth figure.
        const bool moves = m.fn != (const void*)chain<0> && !m.no_weights && std::strncmp(m.name, "bar", 3) != 0;
        std::printf("%-9s %8.1f us per step  %6.2f us per barrier-stage  %7.0f steps/s  %.2f TB/s\n", m.name, us,
                    us / (LAYERS * STAGES), 1e6 / us, moves ? total_bytes / (us * 1e-6) / 1e12 : 0.0);
    }
    // One traced ring_tma run: where each stage's time goes, over all stages and CTAs.
    {
        const int total = LAYERS * STAGES;
        unsigned long long* trace;
        CHECK(cudaMalloc(&trace, sizeof(unsigned long long) * 3 * total * sms));
        Chain t = c;
        t.trace = trace;
        void* args[] = {&t};
        CHECK(cudaFuncSetAttribute(chain_ring_tma<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        for (int r = 0; r < 2; ++r) {  // the second run is the one read
            CHECK(cudaMemset(counter, 0, 4));
            CHECK(cudaLaunchCooperativeKernel((const void*)chain_ring_tma<true>, sms, THREADS, args, smem, 0));
            CHECK(cudaDeviceSynchronize());
        }
        std::vector<unsigned long long> h(3 * (size_t)total * sms);
        CHECK(cudaMemcpy(h.data(), trace, h.size() * sizeof(h[0]), cudaMemcpyDeviceToHost));
        // Per stage: the spread of barrier arrivals (last - first), the barrier wait of the median
        // CTA, the data wait of the median and of the last-arriving CTA; sums over the step (us).
        double spread = 0, wait_med = 0, data_med = 0, data_last = 0, stage_span = 0;
        std::vector<double> per_stage_spread(STAGES, 0.0), per_stage_data_last(STAGES, 0.0);
        for (int s = 0; s < total; ++s) {
            std::vector<double> arrive(sms), wait(sms), data(sms);
            int last = 0;
            for (int b = 0; b < sms; ++b) {
                const unsigned long long* r = &h[3 * ((size_t)s * sms + b)];
                arrive[b] = (double)r[0];
                wait[b] = (double)(r[1] - r[0]);
                data[b] = (double)r[2];
                if (arrive[b] > arrive[last]) last = b;
            }
            const double first_arrival = *std::min_element(arrive.begin(), arrive.end());
            spread += arrive[last] - first_arrival;
            per_stage_spread[s % STAGES] += arrive[last] - first_arrival;
            std::vector<double> w = wait, d = data;
            std::sort(w.begin(), w.end());
            std::sort(d.begin(), d.end());
            wait_med += w[sms / 2];
            data_med += d[sms / 2];
            if (s > 0) {  // the last arriver's data wait in the stage before its late arrival
                const double dl = h[3 * ((size_t)(s - 1) * sms + last) + 2];
                data_last += dl;
                per_stage_data_last[(s - 1) % STAGES] += dl;
            }
            if (s + 1 < total) {
                double next_first = 1e300;
                for (int b = 0; b < sms; ++b) next_first = std::min(next_first, (double)h[3 * ((size_t)(s + 1) * sms + b)]);
                stage_span += next_first - first_arrival;
            }
        }
        std::printf("ring_tma traced (us per step): arrival spread %.1f, median barrier wait %.1f, median data wait %.1f, "
                    "last arriver's data wait %.1f, first-arrival to first-arrival %.1f\n",
                    spread / 1e3, wait_med / 1e3, data_med / 1e3, data_last / 1e3, stage_span / 1e3);
        std::printf("  per stage kind (us per step): spread");
        for (int k = 0; k < STAGES; ++k) std::printf(" %.1f", per_stage_spread[k] / 1e3);
        std::printf(" | last arriver's data wait");
        for (int k = 0; k < STAGES; ++k) std::printf(" %.1f", per_stage_data_last[k] / 1e3);
        std::printf("\n");
    }
    std::vector<float> ms;
    for (int r = 0; r < 25; ++r) {
        CHECK(cudaEventRecord(a));
        read_all<<<sms * 4, 512>>>(weights, total_bytes / 16, sink);
        CHECK(cudaEventRecord(b));
        CHECK(cudaEventSynchronize(b));
        float t;
        CHECK(cudaEventElapsedTime(&t, a, b));
        if (r >= 3) ms.push_back(t);
    }
    const float us = median(ms) * 1e3f;
    std::printf("%-9s %8.1f us per step  %7.0f steps/s  %.2f TB/s\n", "floor", us, 1e6 / us, total_bytes / (us * 1e-6) / 1e12);
    return 0;
}

// Warp- and CTA-level synchronisation intrinsics of the emulator (part of cuda_emu.h). Each one
// is a collective: the calling fiber deposits its operands and waits until every lane named in
// the mask has arrived; the last lane computes every lane's result (emu_runtime.h).
#pragma once

namespace emu {

// One lane's part of a shuffle: its value, the lane it reads (already resolved for width and
// mode; its own lane when the source falls outside its segment) and the value it receives.
struct ShuffleLane {
    unsigned long long value;
    int source;
    unsigned long long result;
};

inline void complete_shuffle(void* const* lanes, uint32_t mask) {
    for (int l = 0; l < kWarpSize; ++l) {
        if (!(mask >> l & 1u)) continue;
        ShuffleLane* me = static_cast<ShuffleLane*>(lanes[l]);
        if (!(mask >> me->source & 1u)) {
            char what[120];
            std::snprintf(what, sizeof what, "a shuffle reads a lane that is not in its mask (lane %d reads lane %d, mask 0x%08x)",
                          l, me->source, mask);
            kernel_fault(what);
        }
        me->result = static_cast<ShuffleLane*>(lanes[me->source])->value;
    }
}

enum class ShuffleMode { Index, Xor, Down, Up };

template <class T>
inline T shuffle(unsigned mask, T var, int arg, int width, ShuffleMode mode, const char* what) {
    static_assert(sizeof(T) <= 8, "shuffles move at most 64 bits");
    if (width <= 0 || width > kWarpSize || (width & (width - 1)) != 0)
        kernel_fault("a shuffle width must be a power of two <= 32");
    const int lane = t_thread->lane;
    const int segment = lane & ~(width - 1);
    int source = lane;
    switch (mode) {
        case ShuffleMode::Index: source = segment + (arg & (width - 1)); break;
        case ShuffleMode::Xor: {
            const int s = lane ^ arg;
            source = (s >= 0 && s < segment + width) ? s : lane;
            break;
        }
        case ShuffleMode::Down: source = (lane - segment) + arg < width ? lane + arg : lane; break;
        case ShuffleMode::Up: source = (lane - segment) >= arg ? lane - arg : lane; break;
    }
    ShuffleLane me{0, source, 0};
    std::memcpy(&me.value, &var, sizeof(T));
    warp_collective(mask, &me, complete_shuffle, what);
    T out;
    std::memcpy(&out, &me.result, sizeof(T));
    return out;
}

// __ballot_sync and friends: each lane's predicate in, the mask of true predicates out.
struct VoteLane {
    int predicate;
    uint32_t ballot;
};

inline void complete_vote(void* const* lanes, uint32_t mask) {
    uint32_t ballot = 0;
    for (int l = 0; l < kWarpSize; ++l)
        if ((mask >> l & 1u) && static_cast<VoteLane*>(lanes[l])->predicate) ballot |= 1u << l;
    for (int l = 0; l < kWarpSize; ++l)
        if (mask >> l & 1u) static_cast<VoteLane*>(lanes[l])->ballot = ballot;
}

inline uint32_t vote(unsigned mask, int predicate, const char* what) {
    VoteLane me{predicate != 0, 0};
    warp_collective(mask, &me, complete_vote, what);
    return me.ballot;
}

inline void complete_nothing(void* const*, uint32_t) {}

}  // namespace emu

template <class T>
inline T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize) {
    return emu::shuffle(mask, var, src_lane, width, emu::ShuffleMode::Index, "__shfl_sync");
}
template <class T>
inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize) {
    return emu::shuffle(mask, var, lane_mask, width, emu::ShuffleMode::Xor, "__shfl_xor_sync");
}
template <class T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
    return emu::shuffle(mask, var, (int)delta, width, emu::ShuffleMode::Down, "__shfl_down_sync");
}
template <class T>
inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize) {
    return emu::shuffle(mask, var, (int)delta, width, emu::ShuffleMode::Up, "__shfl_up_sync");
}
inline unsigned __ballot_sync(unsigned mask, int predicate) { return emu::vote(mask, predicate, "__ballot_sync"); }
inline int __any_sync(unsigned mask, int predicate) { return emu::vote(mask, predicate, "__any_sync") != 0; }
inline int __all_sync(unsigned mask, int predicate) {
    return emu::vote(mask, predicate, "__all_sync") == (uint32_t)mask;
}
inline void __syncwarp(unsigned mask = 0xffffffffu) {
    emu::warp_collective(mask, nullptr, emu::complete_nothing, "__syncwarp");
}
inline void __syncthreads() { emu::block_barrier(); }

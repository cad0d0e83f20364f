// Round 4 candidate: "stream" = the production kernel itself (run.sh puts
// crates/bonsai-kernels/src/ops/matmul_q1 on the include path, or a copy next to this file).
// Why it exists: round 3 ("lean") ran at 0.5-0.65 IPC with DRAM at 12%: one chunk of R words
// prefetched in registers leaves only 32 warps x R x 128 B ~ 8-16 KB of weights in flight per SM,
// far below the ~48 KB that 4.3 TB/s x ~1.5 us of loaded latency asks for (Little's law). The
// stream kernel keeps (D-1) x R x 144 B per warp in flight in a cp.async shared-memory ring.
#include "matmul_gemv_stream.cu"

#define STREAM_ENTRY(NAME, BITS, MODE, R, D)                                                    \
    __global__ void __launch_bounds__(512)                                                      \
        NAME(const u16* s, const u32* p, const float* x, float* y, int n, int k, int splits) { \
        gemv_stream<BITS, MODE, R, D>(s, p, x, y, n, k, splits);                                \
    }

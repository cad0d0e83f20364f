// A grid-wide barrier for cooperative launches (launch_ex.rs: Launch::cooperative), whose CTAs
// are all resident at once: without that guarantee a CTA could spin forever waiting for one that
// never gets an SM. Concatenated right after ptx.cuh; no entry points.
//
// Use: zero a u32 counter before the launch (stream-ordered memset); barrier number b (0, 1, ...)
// of the launch is grid_sync(counter, (b + 1) * CTAs), CTAs = gridDim.x * gridDim.y * gridDim.z.
// Every thread of every CTA must call it, the same number of times (it contains __syncthreads).
//
// Why it is correct (PTX ISA memory consistency model): a write W by any thread of CTA A before
// the barrier is ordered before thread 0 of A's red.release by the first __syncthreads (bar.sync
// synchronises the CTA's threads, and release is cumulative: it covers every write that happens
// before it). Thread 0 of CTA B leaves its spin on an ld.acquire that reads a counter value that
// includes A's add: either A's red itself or a later atomic add in the counter's modification
// order, which extends the observation order, so A's release synchronises with B's acquire. The
// second __syncthreads then orders B's acquire before every later read by every thread of B. So
// W happens before those reads and they see W (or a later write), for every pair of CTAs.
// The counter only grows, so no CTA can be fooled by an earlier barrier's arrivals; it wraps
// after 2^32 arrivals, far beyond one launch.
__device__ __forceinline__ void grid_sync(unsigned* counter, unsigned target) {
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
        red_release_gpu_add(counter, 1);
        while (ld_acquire_gpu(counter) < target) {
        }
    }
    __syncthreads();
}

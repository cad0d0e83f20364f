// The kernel library's own proof of life: fills `out[0..n)` with `value`. `bonsai kernels info`
// launches it after loading, so a module that loads but cannot run is caught there.
extern "C" __global__ void bonsai_selftest_fill(u32* __restrict__ out, u32 n, u32 value) {
    griddep_wait();
    griddep_launch_dependents();
    const u32 stride = gridDim.x * blockDim.x;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = value;
    }
}

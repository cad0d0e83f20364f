// y = x * sigmoid(g), elementwise (ops/sigmoid_gate/mod.rs): a grid-stride loop, the stable
// sigmoid of the prelude. 12 bytes per element; a decode row of 6144 is launch-bound.

extern "C" __global__ void sigmoid_gate_grid_stride(const float* __restrict__ x, const float* __restrict__ g,
                                                    float* __restrict__ y, long long len) {
    griddep_wait();
    griddep_launch_dependents();
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < len; i += stride)
        y[i] = x[i] * sigmoid_stable(g[i]);
}

// out[i, f] = silu(gate_up[i, f]) * gate_up[i, F + f], grid-stride over m * F.
extern "C" __global__ void swiglu_grid_stride(const float* __restrict__ gate_up,
                                              float* __restrict__ out, int m, int f_dim) {
    griddep_wait();
    griddep_launch_dependents();
    const long long total = (long long)m * f_dim;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const long long row = i / f_dim;
        const long long f = i % f_dim;
        const float* gu = gate_up + row * 2 * f_dim;
        out[i] = silu_mul(gu[f], gu[f_dim + f]);
    }
}

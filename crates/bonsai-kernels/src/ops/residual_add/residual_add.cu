// a[i] += b[i], grid-stride.
extern "C" __global__ void residual_add_grid_stride(float* __restrict__ a,
                                                    const float* __restrict__ b, long long n) {
    griddep_wait();
    griddep_launch_dependents();
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        a[i] += b[i];
}

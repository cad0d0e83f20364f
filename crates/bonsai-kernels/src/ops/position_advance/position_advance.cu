// pos[0] += by: moves the device-resident decode position on from inside a captured CUDA graph,
// so replaying the graph needs no host write of the position. One thread; the launch costs
// ~0.5 us inside a graph, nothing next to a decode step.
// With `count_step` it also counts pos[1] up by one: the decode step serial that flagged planes
// carry (B1PlanesIn in matmul_gemv_b1.cu).
extern "C" __global__ void position_advance(u32* __restrict__ pos, u32 by, u32 count_step) {
    griddep_wait();
    griddep_launch_dependents();
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        pos[0] += by;
        if (count_step != 0) pos[1] += 1;
    }
}

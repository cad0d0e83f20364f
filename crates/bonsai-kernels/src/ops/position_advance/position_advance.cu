// pos[0] += by: moves the device-resident decode position on from inside a captured CUDA graph,
// so replaying the graph needs no host write of the position. One thread: its launch inside the
// graph is nothing next to a decode step (docs/kernel-notes.md, "Outside the layers: host loop,
// step ends, PDL").
extern "C" __global__ void position_advance(u32* __restrict__ pos, u32 by) {
    griddep_wait();
    griddep_launch_dependents();
    if (blockIdx.x == 0 && threadIdx.x == 0) pos[0] += by;
}

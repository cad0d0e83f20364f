// y[c, i, j] = x[c, i/2, j/2]: [C, H, W] -> [C, 2H, 2W].
//
// Write-bound: 4 bytes read and 16 written per input element. Flattened, output rows 2r and
// 2r+1 of [C·2H, 2W] both widen input row r of [C·H, W], and output float4 q of a row is
// (x[2q], x[2q], x[2q+1], x[2q+1]), i.e. the widening of input float2 q. Hence the vector
// kernel: thread item i = one input float2 (r = i / (W/2), q = i - r·(W/2)) and two float4
// stores at output float4 indices i + r·(W/2) (row 2r) and that + W/2 (row 2r+1). Consecutive
// lanes read consecutive float2s (256 coalesced bytes per warp) and write consecutive float4s
// (512 coalesced bytes per warp per row), so every store instruction fills whole sectors.
// UPSAMPLE_ITEMS items per thread, all loads issued before any store (bytes in flight per SM:
// 2048 threads x 4 x 8 bytes = 64 KiB of reads, 256 KiB of writes), one item per thread-slot
// and no grid-stride loop: the launcher covers the input with several waves of CTAs.
//
// Speed of light (H200, 4.8 TB/s): 20 bytes per input element; 384 ch x 64² -> 6.6 us, x 128² ->
// 26 us, x 256² -> 105 us (64²: the launch and one partial wave add to it). Measured, against the
// earlier one float4 in, two half-sector-strided float4 pairs out per thread: docs/kernel-notes.md,
// "GroupNorm and the VAE element-wise ops".
//
// Scalar kernel (W odd or unaligned views): one output element per thread, grid-stride.
// Indices are 32-bit unsigned (the launcher keeps 4·C·H·W below 2^31).

#define UPSAMPLE_ITEMS 4

extern "C" __global__ void upsample_nearest2x_float2(const float2* __restrict__ x,
                                                     float4* __restrict__ y,
                                                     unsigned half_width, unsigned items) {
    griddep_wait();
    griddep_launch_dependents();
    const unsigned first = blockIdx.x * (blockDim.x * UPSAMPLE_ITEMS) + threadIdx.x;
    float2 v[UPSAMPLE_ITEMS];
#pragma unroll
    for (int u = 0; u < UPSAMPLE_ITEMS; ++u) {
        const unsigned i = first + u * blockDim.x;
        if (i < items) v[u] = x[i];
    }
#pragma unroll
    for (int u = 0; u < UPSAMPLE_ITEMS; ++u) {
        const unsigned i = first + u * blockDim.x;
        if (i < items) {
            const unsigned r = i / half_width;
            const unsigned top = i + r * half_width;
            const float4 wide = make_float4(v[u].x, v[u].x, v[u].y, v[u].y);
            y[top] = wide;
            y[top + half_width] = wide;
        }
    }
}

extern "C" __global__ void upsample_nearest2x_grid_stride(const float* __restrict__ x,
                                                          float* __restrict__ y,
                                                          unsigned rows, unsigned width) {
    griddep_wait();
    griddep_launch_dependents();
    const unsigned stride = gridDim.x * blockDim.x;
    const unsigned first = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned out_w = 2 * width;
    const unsigned total = 2 * rows * out_w;
    for (unsigned o = first; o < total; o += stride) {
        const unsigned out_row = o / out_w;
        const unsigned col = o - out_row * out_w;
        y[o] = x[(out_row >> 1) * width + (col >> 1)];
    }
}

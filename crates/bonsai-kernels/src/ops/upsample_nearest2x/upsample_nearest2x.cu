// y[c, i, j] = x[c, i/2, j/2]: [C, H, W] -> [C, 2H, 2W], grid-stride.
//
// Write-bound (4 bytes read, 16 written per input element). Flattened, output rows 2r and 2r+1
// of [C·2H, 2W] both widen input row r of [C·H, W]. Vector path (W % 4 == 0, 16-byte aligned
// pointers): each thread reads one float4 of an input row and stores two float4s into each of
// the two output rows. Scalar path otherwise: one output element per thread. Indices are 32-bit
// unsigned (the launcher keeps 4·C·H·W below 2^31, so i + stride never wraps): a 64-bit
// division per element would cost more issue slots than the copy itself.

extern "C" __global__ void upsample_nearest2x_grid_stride(const float* __restrict__ x,
                                                          float* __restrict__ y,
                                                          unsigned rows, unsigned width) {
    griddep_wait();
    griddep_launch_dependents();
    const unsigned stride = gridDim.x * blockDim.x;
    const unsigned first = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned out_w = 2 * width;
    const bool vec4 = (width & 3) == 0 && ((reinterpret_cast<unsigned long long>(x) |
                                             reinterpret_cast<unsigned long long>(y)) & 15) == 0;
    if (vec4) {
        const unsigned w4 = width >> 2;
        const unsigned total4 = rows * w4;
        const float4* x4 = reinterpret_cast<const float4*>(x);
        for (unsigned i = first; i < total4; i += stride) {
            const unsigned r = i / w4;
            const unsigned col4 = i - r * w4;
            const float4 v = x4[i];
            const float4 lo = make_float4(v.x, v.x, v.y, v.y);
            const float4 hi = make_float4(v.z, v.z, v.w, v.w);
            float4* top = reinterpret_cast<float4*>(y + 2 * r * out_w) + 2 * col4;
            float4* bottom = reinterpret_cast<float4*>(y + (2 * r + 1) * out_w) + 2 * col4;
            top[0] = lo;
            top[1] = hi;
            bottom[0] = lo;
            bottom[1] = hi;
        }
    } else {
        const unsigned total = 2 * rows * out_w;
        for (unsigned o = first; o < total; o += stride) {
            const unsigned out_row = o / out_w;
            const unsigned col = o - out_row * out_w;
            y[o] = x[(out_row >> 1) * width + (col >> 1)];
        }
    }
}

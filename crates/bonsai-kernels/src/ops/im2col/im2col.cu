// cols[c·9 + ky·3 + kx, oy·W + ox] = x[c, oy + ky - 1, ox + kx - 1] (0 outside): the 3x3, pad 1,
// stride 1 patches of x: [C, H, W] as cols: [C·9, H·W], grid-stride over output elements.
//
// Write-bound (36 bytes written per 4 read; the input's rows are re-read from L1/L2 by the 9
// taps). Vector path (W % 4 == 0, 16-byte aligned pointers): each thread fills one float4 of
// an output row, 4 consecutive ox of one oy, from 4 scalar loads (a tap shifts the source by
// kx - 1, so those loads are not 16-byte aligned). Scalar path otherwise. Indices are 32-bit
// unsigned (the launcher keeps 9·C·H·W below 2^31, so i + stride never wraps): 64-bit divisions
// per output would cost about as many issue slots as the stores take time.

#define IM2COL_KERNEL 3
#define IM2COL_TAPS 9

__device__ __forceinline__ float im2col_tap(const float* __restrict__ xc, int height, int width,
                                            int sy, int sx) {
    return (sy >= 0 && sy < height && sx >= 0 && sx < width) ? xc[sy * width + sx] : 0.0f;
}

extern "C" __global__ void im2col_3x3_grid_stride(const float* __restrict__ x,
                                                  float* __restrict__ cols, int channels,
                                                  int height, int width) {
    griddep_wait();
    griddep_launch_dependents();
    const unsigned stride = gridDim.x * blockDim.x;
    const unsigned first = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned plane = (unsigned)height * width;
    const unsigned total = (unsigned)channels * IM2COL_TAPS * plane;
    const bool vec4 = (width & 3) == 0 && ((reinterpret_cast<unsigned long long>(x) |
                                             reinterpret_cast<unsigned long long>(cols)) & 15) == 0;
    if (vec4) {
        float4* cols4 = reinterpret_cast<float4*>(cols);
        for (unsigned i = first; i < (total >> 2); i += stride) {
            const unsigned o = i << 2;
            const unsigned row = o / plane;
            const int p = (int)(o - row * plane);
            const int c = (int)(row / IM2COL_TAPS), tap = (int)(row % IM2COL_TAPS);
            const int sy = p / width + tap / IM2COL_KERNEL - 1;
            const int sx = p % width + tap % IM2COL_KERNEL - 1;
            const float* xc = x + (unsigned long long)c * plane;
            cols4[i] = make_float4(im2col_tap(xc, height, width, sy, sx),
                                   im2col_tap(xc, height, width, sy, sx + 1),
                                   im2col_tap(xc, height, width, sy, sx + 2),
                                   im2col_tap(xc, height, width, sy, sx + 3));
        }
    } else {
        for (unsigned o = first; o < total; o += stride) {
            const unsigned row = o / plane;
            const int p = (int)(o - row * plane);
            const int c = (int)(row / IM2COL_TAPS), tap = (int)(row % IM2COL_TAPS);
            const int sy = p / width + tap / IM2COL_KERNEL - 1;
            const int sx = p % width + tap % IM2COL_KERNEL - 1;
            cols[o] = im2col_tap(x + (unsigned long long)c * plane, height, width, sy, sx);
        }
    }
}

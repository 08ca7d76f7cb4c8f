// resample_kernels.h — average pooling and bilinear up-sampling on the GPU,
// as plain host functions (no CUDA types) on the default stream; the kernels
// are in resample_kernels.cu.
//
// Layouts and contracts are the CPU ops' (layers/cpu/avgpool2d_ops.h,
// layers/cpu/upsample2d_ops.h): `planes` = N·C contiguous H×W planes in,
// N·C output planes out; dx is overwritten. The index arithmetic and weights
// come from layers/resample_index.h, shared with the CPU, and every output
// element runs the CPU's operations in the CPU's order, so the results are
// bit-identical to the CPU ops'.
//   avgpool2d  forward: one thread per output, the window's row-major sum
//              divided by k·k. Backward: one thread per input element gathers
//              dy / (k·k) over the windows that contain it, in row-major
//              window order (overlapping windows, s < k, included): no atomics.
//   bilinear   forward: one thread per output, its row and column taps
//              computed on the fly. Backward: one thread per input element
//              gathers the weighted dy of the outputs that read it, rows then
//              columns ascending: no atomics.
#pragma once

#include <cstdint>

namespace hpmc::gpu {

void avgpool2d_forward(const float* x, float* y, int64_t planes, int h, int w, int kernel,
                       int stride);
void avgpool2d_backward(const float* dy, float* dx, int64_t planes, int h, int w, int kernel,
                        int stride);

void upsample2d_bilinear_forward(const float* x, float* y, int64_t planes, int h, int w,
                                 int scale);
void upsample2d_bilinear_backward(const float* dy, float* dx, int64_t planes, int h, int w,
                                  int scale);

}  // namespace hpmc::gpu

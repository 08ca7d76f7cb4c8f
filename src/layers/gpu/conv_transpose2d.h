// conv_transpose2d.h — the GPU 2-d transposed convolution (PyTorch's
// nn.ConvTranspose2d; conv_transpose2d_spec.h states the definition and the
// shapes) as plain host functions (no CUDA types), on the default stream, for
// each kernel family of conv2d_kernels.h (family.h: naive, tiled, and the
// implicit GEMM that --impl im2col names).
//
// Layouts: x N×in×H×W, w [in, out, k, k], b [out], y N×out×H_out×W_out.
// `eq` is the layer's equivalent convolution for its input
// (conv_transpose2d_equivalent_conv: C = out, H × W = H_out × W_out, K = in,
// P × Q = H × W), whose KCRS weight is w itself, so each pass is a pass of the
// family's Conv2D kernels (which take any size, stride and padding):
//   forward          y  = family::conv2d_backward_data(eq, x, w), then
//                         y[n][o][·][·] += b[o] (add_channel_bias); y overwritten
//   backward_data    dx = family::conv2d_forward(eq, dy, w, no bias); dx overwritten
//   backward_params  dw += family::conv2d_backward_params(eq, dy, x, no bias), then
//                    db += Σ_{n,h,w} dy[n][o][h][w] (channel_sum); both accumulate
// db has its own reduction because eq's bias gradient would sum over its
// output channels, which are this layer's INPUT channels.
#pragma once

#include "layers/conv_shape.h"
#include "layers/gpu/family.h"

namespace hpmc::gpu {

// y = conv_transpose(x, w) + b; b may be null. Overwrites y.
void conv_transpose2d_forward(Family family, const Conv2dShape& eq, const float* x,
                              const float* w, const float* b, float* y);
// dx = dL/dx for dy = dL/dy. Overwrites dx.
void conv_transpose2d_backward_data(Family family, const Conv2dShape& eq, const float* dy,
                                    const float* w, float* dx);
// dw += dL/dw and, if db is non-null, db += dL/db.
void conv_transpose2d_backward_params(Family family, const Conv2dShape& eq, const float* x,
                                      const float* dy, float* dw, float* db);

// The two bias passes, shared by every family, on eq's input space
// (N × eq.C × eq.H × eq.W, the layer's output):
// y[n][o][i] += b[o], one thread per element (fp32: the same single rounding
// as the CPU layer's, after the sum).
void add_channel_bias(const Conv2dShape& eq, const float* b, float* y);
// db[o] += Σ_{n,i} dy[n][o][i]: one block per channel; each thread sums a
// fixed strided subset in double, then a fixed shared-memory tree; one fp32
// rounding at the end. No atomics: bit-identical run to run.
void channel_sum(const Conv2dShape& eq, const float* dy, float* db);

}  // namespace hpmc::gpu

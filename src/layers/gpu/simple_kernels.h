// simple_kernels.h — the kernels of the parameter-free GPU layers (ReLU,
// MaxPool2D, UpSample2D nearest) as host functions on device pointers, for
// the layers of simple_layers.h and for the fused layers (fused_chain.h),
// which run them between and around their convolutions. No CUDA types; the
// kernels, and why each gives the CPU layer's bits, are in simple_layers.cu
// and simple_layers.h. Shapes are NCHW with n included; every function runs
// on the default stream, overwrites its output and returns at once for an
// empty tensor.
#pragma once

#include <cstddef>

#include "core/shape.h"
#include "layers/pool_spec.h"

namespace hpmc::gpu {

// y = x < 0 ? 0 : x (NaN passes), n elements.
void relu_forward(const float* x, float* y, size_t n);
// dx = x > 0 ? dy : 0. x may be the ReLU's output instead of its input: the
// mask is the same (relu(u) > 0 ⇔ u > 0).
void relu_backward(const float* x, const float* dy, float* dx, size_t n);

// in: the input shape. y: maxpool2d_output_shape(win, in).
void maxpool2d_forward(const Shape& in, const PoolWindow& win, const float* x, float* y);
// dx (shape in) from dy; relu_mask: then dx = x > 0 ? dx : 0 as well, the
// backward of a ReLU before the pool whose output is x (fused_chain.h).
void maxpool2d_backward(const Shape& in, const PoolWindow& win, const float* x, const float* dy,
                        float* dx, bool relu_mask);

// in: the input shape; y: (n, c, h·scale, w·scale).
void upsample2d_forward(const Shape& in, int scale, const float* x, float* y);
// dx (shape in) = the sum of each scale×scale block of dy; relu_mask (may be
// null, of shape in): dx = relu_mask > 0 ? dx : 0, the backward of a ReLU
// before the upsample whose output is relu_mask.
void upsample2d_backward(const Shape& in, int scale, const float* dy, float* dx,
                         const float* relu_mask);

}  // namespace hpmc::gpu

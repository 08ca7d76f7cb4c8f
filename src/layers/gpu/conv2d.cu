// conv2d.cu — Conv2dGPU: dispatch to the kernel family chosen at build time
// of the layer (naive, tiled, or the implicit-GEMM kernels for "im2col").
#include "layers/gpu/conv2d.h"

#include "core/error.h"
#include "layers/gpu/conv2d_kernels.h"

namespace hpmc::gpu {

size_t Conv2dGPU::workspace_bytes(const Shape& in) const {
  return family_ == Family::kIm2col ? implicit::input_copy_bytes(conv_shape(in), false, precision())
                                    : 0;
}

void Conv2dGPU::forward_impl(const Tensor& x, Tensor& y) {
  const Conv2dShape s = conv_shape(x.shape());
  const float* w = param(0);
  const float* b = cfg_.bias ? param(1) : nullptr;
  float* out = y.data<float>();
  switch (family_) {
    case Family::kNaive: naive::conv2d_forward(s, x.data<float>(), w, b, out); return;
    case Family::kTiled: tiled::conv2d_forward(s, x.data<float>(), w, b, out); return;
    case Family::kIm2col: {
      const implicit::KeepInput keep(input_copy_);
      implicit::conv2d_forward(s, x.data<float>(), w, b, out);
      return;
    }
  }
  throw RuntimeError(str("conv2d '", name(), "': unknown kernel family ", int(family_)));
}

void Conv2dGPU::backward_impl(const Tensor& x, const Tensor& /*y*/, const Tensor& dy, Tensor* dx) {
  const Conv2dShape s = conv_shape(x.shape());
  const float* xp = x.data<float>();
  const float* dyp = dy.data<float>();
  float* dw = grad(0);
  float* db = cfg_.bias ? grad(1) : nullptr;
  switch (family_) {
    case Family::kNaive:
      naive::conv2d_backward_params(s, xp, dyp, dw, db);
      if (dx) naive::conv2d_backward_data(s, dyp, param(0), dx->data<float>());
      return;
    case Family::kTiled:
      tiled::conv2d_backward_params(s, xp, dyp, dw, db);
      if (dx) tiled::conv2d_backward_data(s, dyp, param(0), dx->data<float>());
      return;
    case Family::kIm2col: {
      // bf16: x's copy from the forward, dy converted once (with the weights'
      // layout of the input gradient, which therefore runs first).
      const implicit::KeepInput keep(input_copy_);
      const implicit::SharedDy shared;
      if (dx) implicit::conv2d_backward_data(s, dyp, param(0), dx->data<float>());
      implicit::conv2d_backward_params(s, xp, dyp, dw, db);
      return;
    }
  }
  throw RuntimeError(str("conv2d '", name(), "': unknown kernel family ", int(family_)));
}

HPMC_REGISTER_GPU(Conv2d)

}  // namespace hpmc::gpu

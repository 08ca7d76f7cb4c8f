// conv2d.h — the CPU 2-d convolution layer (PyTorch's nn.Conv2d with a
// square kernel, the same stride and zero padding on both axes).
//
// Layouts: input NCHW, weight KCRS ([out, in, kh, kw]), bias [out], output
// NKPQ. The layer runs conv2d_ops.h in float32 — the direct kernels of
// conv2d_thin.h or im2col + gemm, as conv2d_thin_applies picks — OpenMP
// over the images. Conv2dConfig and the rules shared
// with the GPU layer (validation, shapes, parameters) are in conv2d_spec.h.
#pragma once

#include <string>
#include <vector>

#include "layers/conv2d_spec.h"
#include "layers/conv_shape.h"
#include "layers/cpu/conv2d_ops.h"
#include "layers/layer.h"

namespace hpmc {

class Conv2dCPU : public LayerCPU<Conv2dSpec> {
 public:
  using LayerCPU::LayerCPU;  // (name, Conv2dConfig) or (LayerArgs)

  size_t workspace_bytes(const Shape& in) const override;

 protected:
  void forward_impl(const Tensor& x, Tensor& y) override;
  void backward_impl(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;

 private:
  cpu::Conv2dWorkspace<float> ws_;  // per-thread buffers, reused across calls
};

}  // namespace hpmc

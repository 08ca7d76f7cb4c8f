// linear.h — the CPU fully connected layer (PyTorch's nn.Linear).
//
// Input: a flat NCHW tensor (N, in_features, 1, 1) — a flatten layer must
// come first after a conv. Weight [out, in], bias [out], output
// (N, out_features, 1, 1). The kernels are in linear_ops.h (gemm, float32).
// LinearConfig and the rules shared with the GPU layer (validation, shapes,
// parameters) are in linear_spec.h.
#pragma once

#include <string>
#include <vector>

#include "layers/layer.h"
#include "layers/linear_spec.h"

namespace hpmc {

class LinearCPU : public LayerCPU<LinearSpec> {
 public:
  using LayerCPU::LayerCPU;  // (name, LinearConfig) or (LayerArgs)

 protected:
  void forward_impl(const Tensor& x, Tensor& y) override;
  void backward_impl(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;
};

}  // namespace hpmc

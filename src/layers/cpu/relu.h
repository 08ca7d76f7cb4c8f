// relu.h — the CPU ReLU layer (YAML type "relu"): y = max(x, 0), any shape.
// The math lives in relu_ops.h; see there for forward and backward.
#pragma once

#include <string>

#include "layers/activation_spec.h"

namespace hpmc {

class ReLUCPU : public LayerCPU<ReLUSpec> {
 public:
  using LayerCPU::LayerCPU;  // (name) or (LayerArgs)

 protected:
  void forward_impl(const Tensor& x, Tensor& y) override;
  void backward_impl(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;
};

}  // namespace hpmc

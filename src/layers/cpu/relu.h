// relu.h — the CPU ReLU layer (YAML type "relu"): y = max(x, 0), any shape.
// The math lives in relu_ops.h; see there for forward and backward.
#pragma once

#include <string>

#include "layers/layer.h"

namespace hpmc {

class ReLUCPU : public LayerCPU {
 public:
  explicit ReLUCPU(std::string name);
  const char* type() const override { return "relu"; }
  Shape output_shape(const Shape& in) const override { return in; }

 protected:
  void forward_impl(const Tensor& x, Tensor& y) override;
  void backward_impl(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;
};

}  // namespace hpmc

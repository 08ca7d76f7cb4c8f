// maxpool2d.h — the CPU 2-d max-pooling layer (YAML type "maxpool2d"):
// (N,C,H,W) → (N,C,floor((H−k)/s)+1,floor((W−k)/s)+1), no padding, as
// PyTorch's MaxPool2d(kernel_size=k, stride=s). The math lives in
// maxpool2d_ops.h; see there for forward and backward.
#pragma once

#include <string>

#include "layers/layer.h"
#include "layers/pool_spec.h"  // MaxPool2dConfig and the checks shared with the GPU layer

namespace hpmc {

class MaxPool2dCPU : public LayerCPU {
 public:
  // Throws ConfigError for kernel < 1 or stride < 0.
  MaxPool2dCPU(std::string name, const MaxPool2dConfig& cfg);
  const char* type() const override { return "maxpool2d"; }
  std::string describe() const override;
  // Throws ShapeError when the k×k window does not fit the H×W input.
  Shape output_shape(const Shape& in) const override;

  int kernel() const { return spec_.kernel; }
  int stride() const { return spec_.stride; }  // the effective stride (never 0)

 protected:
  void forward_impl(const Tensor& x, Tensor& y) override;
  void backward_impl(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;

 private:
  MaxPool2dSpec spec_;
};

}  // namespace hpmc

// avgpool2d.h — the CPU 2-d average-pooling layer (YAML type "avgpool2d"):
// (N,C,H,W) → (N,C,floor((H−k)/s)+1,floor((W−k)/s)+1), no padding, as
// PyTorch's AvgPool2d(kernel_size=k, stride=s). The math lives in
// avgpool2d_ops.h; see there for forward and backward.
#pragma once

#include "layers/layer.h"
#include "layers/pool_spec.h"  // AvgPool2dSpec: schema, checks and shapes shared with the GPU layer

namespace hpmc {

class AvgPool2dCPU : public LayerCPU<AvgPool2dSpec> {
 public:
  using LayerCPU::LayerCPU;  // (name, AvgPool2dConfig) or (LayerArgs)

 protected:
  void forward_impl(const Tensor& x, Tensor& y) override;
  void backward_impl(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;
};

}  // namespace hpmc

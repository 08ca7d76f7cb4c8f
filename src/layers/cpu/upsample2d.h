// upsample2d.h — the CPU up-sampling layer (YAML type "upsample2d"), nearest
// or bilinear: (N,C,H,W) → (N,C,H·s,W·s). The math lives in upsample2d_ops.h;
// see there for forward and backward.
#pragma once

#include <string>

#include "layers/layer.h"
#include "layers/pool_spec.h"

namespace hpmc {

class UpSample2dCPU : public LayerCPU<UpSample2dSpec> {
 public:
  using LayerCPU::LayerCPU;  // (name, scale, mode) or (LayerArgs)

 protected:
  void forward_impl(const Tensor& x, Tensor& y) override;
  void backward_impl(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;
};

}  // namespace hpmc

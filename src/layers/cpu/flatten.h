// flatten.h — the CPU flatten layer (YAML type "flatten"):
// (N,C,H,W) → (N, C·H·W, 1, 1), the bridge from conv to linear layers.
// NCHW is already sample-major and contiguous, so forward and backward are
// plain copies (the element order matches PyTorch's nn.Flatten()).
#pragma once

#include <string>

#include "layers/layer.h"
#include "layers/pool_spec.h"

namespace hpmc {

class FlattenCPU : public LayerCPU<FlattenSpec> {
 public:
  using LayerCPU::LayerCPU;  // (name) or (LayerArgs)

 protected:
  void forward_impl(const Tensor& x, Tensor& y) override;
  void backward_impl(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;
};

}  // namespace hpmc

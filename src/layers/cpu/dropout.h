// dropout.h — the CPU dropout layer (YAML type "dropout"), PyTorch's
// nn.Dropout: inverted dropout in training, the identity in eval. Schema and
// shape from layers/dropout_spec.h; the math lives in dropout_ops.h.
#pragma once

#include "layers/dropout_spec.h"
#include "layers/layer.h"

namespace hpmc {

class DropoutCPU : public LayerCPU<DropoutSpec> {
 public:
  using LayerCPU::LayerCPU;  // (name, p) or (LayerArgs)

 protected:
  void forward_impl(const Tensor& x, Tensor& y) override;
  void backward_impl(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;
};

}  // namespace hpmc

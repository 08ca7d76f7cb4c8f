// activations.h — the CPU layers leaky_relu, prelu, sigmoid and tanh (YAML
// types of the same names; relu has relu.h), any shape, shape unchanged. The
// math lives in activation_ops.h (formulas, NaN behaviour, the slope
// gradient's summation order); each class is a thin wrapper with T = float.
// sigmoid and tanh compute their backward from the output y; leaky_relu and
// prelu from the input x. prelu ADDS its slope gradient into grad(0) (one
// float per channel), as every parameter gradient (layer.h).
#pragma once

#include "layers/activation_spec.h"

namespace hpmc {

class LeakyReLUCPU : public LayerCPU<LeakyReLUSpec> {
 public:
  using LayerCPU::LayerCPU;  // (name, negative_slope) or (LayerArgs)

 protected:
  void forward_impl(const Tensor& x, Tensor& y) override;
  void backward_impl(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;
};

class PReLUCPU : public LayerCPU<PReLUSpec> {
 public:
  using LayerCPU::LayerCPU;  // (name, channels, init) or (LayerArgs)

 protected:
  void forward_impl(const Tensor& x, Tensor& y) override;
  void backward_impl(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;
};

class SigmoidCPU : public LayerCPU<SigmoidSpec> {
 public:
  using LayerCPU::LayerCPU;  // (name) or (LayerArgs)

 protected:
  void forward_impl(const Tensor& x, Tensor& y) override;
  void backward_impl(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;
};

class TanhCPU : public LayerCPU<TanhSpec> {
 public:
  using LayerCPU::LayerCPU;  // (name) or (LayerArgs)

 protected:
  void forward_impl(const Tensor& x, Tensor& y) override;
  void backward_impl(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx) override;
};

}  // namespace hpmc

// activation_spec.h — the element-wise activation layer types, each defined
// once for every device: schema and shape (the output has the input's shape).
// The CPU classes in layers/cpu and the GPU classes in layers/gpu derive from
// these and add only the passes.
#pragma once

#include <string>
#include <vector>

#include "layers/layer.h"

namespace hpmc {

// relu: y = max(x, 0) (nn.ReLU); NaN passes.
class ReLUSpec : public Layer {
 public:
  static const LayerSchema& static_schema();
  explicit ReLUSpec(std::string name) : Layer(std::move(name)) {}
  explicit ReLUSpec(const LayerArgs& a) : ReLUSpec(a.name) {}

  const LayerSchema& schema() const override { return static_schema(); }
  Shape output_shape(const Shape& in) const override { return in; }
};

// sigmoid: y = 1 / (1 + exp(−x)) (nn.Sigmoid); backward from y.
class SigmoidSpec : public Layer {
 public:
  static const LayerSchema& static_schema();
  explicit SigmoidSpec(std::string name) : Layer(std::move(name)) {}
  explicit SigmoidSpec(const LayerArgs& a) : SigmoidSpec(a.name) {}

  const LayerSchema& schema() const override { return static_schema(); }
  Shape output_shape(const Shape& in) const override { return in; }
};

// tanh: y = tanh(x) (nn.Tanh); backward from y.
class TanhSpec : public Layer {
 public:
  static const LayerSchema& static_schema();
  explicit TanhSpec(std::string name) : Layer(std::move(name)) {}
  explicit TanhSpec(const LayerArgs& a) : TanhSpec(a.name) {}

  const LayerSchema& schema() const override { return static_schema(); }
  Shape output_shape(const Shape& in) const override { return in; }
};

// leaky_relu: y = x > 0 ? x : negative_slope · x (nn.LeakyReLU, default slope
// 0.01). The slope is at least 0, so y > 0 exactly where x > 0.
class LeakyReLUSpec : public Layer {
 public:
  static const LayerSchema& static_schema();
  // Throws ConfigError for a negative or non-finite slope.
  LeakyReLUSpec(std::string name, float negative_slope);
  explicit LeakyReLUSpec(const LayerArgs& a)
      : LeakyReLUSpec(a.name, float(a.f("negative_slope"))) {}

  const LayerSchema& schema() const override { return static_schema(); }
  Shape output_shape(const Shape& in) const override { return in; }
  std::string describe() const override;
  float negative_slope() const { return slope_; }

 private:
  float slope_;
};

// prelu: y = x > 0 ? x : a_c · x with one learned slope a_c per channel
// (nn.PReLU(num_parameters = C, init)); parameter "weight" of C slopes,
// initialised to `init` (PyTorch's 0.25). The input's channels are fixed when
// the layer is built; a flat (N, F, 1, 1) input has F channels.
class PReLUSpec : public Layer {
 public:
  static const LayerSchema& static_schema();
  // Throws ConfigError for channels < 1.
  PReLUSpec(std::string name, int channels, float init = 0.25f);
  explicit PReLUSpec(const LayerArgs& a)
      : PReLUSpec(a.name, a.in.c, float(a.f("init"))) {}

  const LayerSchema& schema() const override { return static_schema(); }
  // Throws ShapeError when in.c is not the layer's channel count.
  Shape output_shape(const Shape& in) const override;
  std::vector<ParamSpec> param_specs() const override;
  std::string describe() const override;
  int channels() const { return channels_; }

 private:
  int channels_;
  float init_;
};

}  // namespace hpmc
